"""billsleuth ledger import PATH|DIR|- [--dry-run] [--json] | ledger export [--customer ID …] [--since D]

The ledger in and out in `billsleuth-ledger/2` (DESIGN.md §3; version 1 files still import). An import
is checked whole before anything is written: each bad record is one line on stderr (`PATH:LINE: field:
problem`, the first 50, then a count) and the exit is 2 with nothing written.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from bot.cli.common import CommandError

RECORD_TYPES_SHOWN = (
    "customer",
    "plan",
    "coupon",
    "tax_rate",
    "subscription",
    "subscription_event",
    "invoice",
    "payment",
    "credit_note",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ledger", help="import or export the ledger (format billsleuth-ledger/2)")
    ledger_sub = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    imp = ledger_sub.add_parser(
        "import",
        help="load a ledger file, a directory of .jsonl files, or - (stdin); upserts by id",
        description="Validate every record first; on any bad one print each (PATH:LINE: field: problem), "
        "exit 2 and write nothing. Otherwise upsert by id in one transaction and print what was added, "
        "changed and left unchanged per record type.",
    )
    imp.add_argument("path", metavar="PATH", help="a .jsonl file, a directory of them, or - for stdin")
    imp.add_argument("--dry-run", action="store_true", help="validate and count, write nothing")
    imp.add_argument("--json", action="store_true", help="print the counts as JSON")
    imp.set_defaults(handler=run_import)
    exp = ledger_sub.add_parser("export", help="write the ledger to stdout in the same format")
    exp.add_argument(
        "--customer", action="append", default=None, metavar="ID", help="only this customer (repeatable)"
    )
    exp.add_argument(
        "--since",
        default=None,
        metavar="YYYY-MM-DD",
        help="only invoices issued (and events effective) on or after this day",
    )
    exp.set_defaults(handler=run_export)


def run_import(args: argparse.Namespace) -> int:
    from approvals.identity import os_account
    from approvals.ledger_import import LedgerRejected, import_ledger
    from bot.cli.common import print_json, ready_database
    from bot.cli.progress import progress_bar
    from engine.db import create_engine
    from engine.ledger_load import LedgerInputError, input_files

    try:
        files = input_files(args.path, sys.stdin.buffer)
    except LedgerInputError as error:
        raise CommandError(str(error)) from None
    url = ready_database()
    bar = progress_bar("import", unit="kB")  # on a terminal only: stdout stays the counts

    async def go() -> Any:
        engine = create_engine(url)
        try:
            return await import_ledger(engine, files, actor=os_account(), dry_run=args.dry_run, progress=bar)
        finally:
            await engine.dispose()
            if bar is not None:
                bar.close()

    try:
        report = asyncio.run(go())
    except LedgerRejected as rejected:
        for line in rejected.lines:
            print(line, file=sys.stderr)
        raise CommandError(f"{rejected.count} bad record(s) in the input; nothing was written") from None
    except OSError as error:
        raise CommandError(f"{args.path}: cannot read it ({error.strerror})") from None
    if args.json:
        print_json(report.payload())
    else:
        print(summary(report))
    return 0


def summary(report: Any) -> str:
    verb = "would import" if report.dry_run else "imported"
    head = f"{verb} {report.records} records (sha256 {report.sha256})"
    rows = [
        f"  {kind:<19} {c['added']:>8} added {c['changed']:>8} changed {c['unchanged']:>8} unchanged"
        for kind in RECORD_TYPES_SHOWN
        if (c := report.counts.get(kind)) and any(c.values())
    ]
    return "\n".join([head, *rows])


def run_export(args: argparse.Namespace) -> int:
    import psycopg

    from bot.cli.cmd_activity import parse_since
    from bot.cli.common import ready_database
    from engine.ledger_export import records, write

    since = parse_since(args.since)
    url = ready_database()
    with psycopg.connect(url, prepare_threshold=None) as conn:
        write(records(conn, args.customer, since), sys.stdout)
    return 0
