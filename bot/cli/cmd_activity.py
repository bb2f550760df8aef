"""billsleuth activity verify | activity export [--since YYYY-MM-DD] [--format csv|json]

Kept light: only SQLAlchemy and approvals.activity, no LangGraph, Slack or OpenAI.
"""

from __future__ import annotations

import argparse
from datetime import date
from typing import Any

from bot.cli.common import CommandError, on_database


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("activity", help="the append-only activity log: verify its hash chain, export it")
    activity_sub = parser.add_subparsers(dest="activity_command", metavar="ACTION", required=True)
    verify = activity_sub.add_parser(
        "verify",
        help="recompute the hash chain: 'N rows, chain intact' (exit 0) or the first broken row (exit 1)",
    )
    verify.set_defaults(handler=run_verify)
    export = activity_sub.add_parser("export", help="write the log to stdout for auditors")
    export.add_argument(
        "--since", default=None, metavar="YYYY-MM-DD", help="only rows from this UTC day on (default: all)"
    )
    export.add_argument("--format", choices=("csv", "json"), default="csv", help="default: csv")
    export.set_defaults(handler=run_export)


def run_verify(args: argparse.Namespace) -> int:
    from approvals.activity import verify_chain

    report = on_database(verify_chain)
    print(report.line())
    return 0 if report.intact else 1


def parse_since(raw: str | None) -> date | None:
    if raw is None:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise CommandError(f"--since {raw!r} is not a date; write YYYY-MM-DD") from None


def run_export(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.common import ready_database

    since = parse_since(args.since)  # before touching the database: bad input changes nothing
    url = ready_database()
    asyncio.run(_export(url, since, args.format))
    return 0


async def _export(url: str, since: date | None, fmt: str) -> None:
    import csv
    import json
    import sys

    from approvals.activity import EXPORT_COLUMNS, export_rows
    from bot.cli.common import dumps
    from engine.db import create_engine

    engine = create_engine(url)
    try:
        rows = export_rows(engine, since)
        if fmt == "json":
            print(dumps({"since": since, "activity": [row async for row in rows]}))
            return
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(EXPORT_COLUMNS)
        async for row in rows:
            details = json.dumps(row["details"], ensure_ascii=False, sort_keys=True)
            writer.writerow([details if name == "details" else _cell(row[name]) for name in EXPORT_COLUMNS])
    finally:
        await engine.dispose()


def _cell(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
