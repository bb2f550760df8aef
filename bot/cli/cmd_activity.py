"""billsleuth activity verify [--anchor ROW:HASH] | activity seal | activity export [--since YYYY-MM-DD]
[--format csv|json]

Kept light: only SQLAlchemy and approvals.activity/seals, no LangGraph or OpenAI; `seal` loads the Slack
client only when it posts.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from datetime import date
from typing import TYPE_CHECKING, Any

from bot.cli.common import CommandError, on_database, warn

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from approvals.seals import Seal
    from bot.config import SlackSettings


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("activity", help="the append-only activity log: verify its hash chain, export it")
    activity_sub = parser.add_subparsers(dest="activity_command", metavar="ACTION", required=True)
    verify = activity_sub.add_parser(
        "verify",
        help="recompute the hash chain: 'N rows, chain intact' (exit 0) or the first broken row (exit 1)",
    )
    verify.add_argument(
        "--anchor",
        default=None,
        metavar="ROW:HASH",
        help="a seal (`activity seal`, or the one posted to Slack): also check that the chain still has that "
        "hash at that row and runs on from it to its head",
    )
    verify.set_defaults(handler=run_verify)
    seal = activity_sub.add_parser(
        "seal",
        help="print the chain's head as ROW:HASH; with SLACK_BOT_TOKEN set, post it to the finance channel "
        "(or each approver's DM) too",
    )
    seal.set_defaults(handler=run_seal)
    export = activity_sub.add_parser("export", help="write the log to stdout for auditors")
    export.add_argument(
        "--since", default=None, metavar="YYYY-MM-DD", help="only rows from this UTC day on (default: all)"
    )
    export.add_argument("--format", choices=("csv", "json"), default="csv", help="default: csv")
    export.set_defaults(handler=run_export)


def run_verify(args: argparse.Namespace) -> int:
    from approvals.activity import verify_chain

    if args.anchor is None:
        report = on_database(verify_chain)
        print(report.line())
        return 0 if report.intact else 1
    from approvals.seals import SealError, parse_seal, verify_anchor

    try:
        seal = parse_seal(args.anchor)  # before touching the database
    except SealError as error:
        raise CommandError(f"--anchor: {error}") from None
    anchored = on_database(lambda engine: verify_anchor(engine, seal))
    print(anchored.line())
    return 0 if anchored.intact else 1


def run_seal(args: argparse.Namespace) -> int:
    from bot.config import SlackConfigError, SlackSettings

    try:
        slack = SlackSettings.from_env()
    except SlackConfigError as error:
        raise CommandError(str(error)) from None
    if not slack.bot_token.get_secret_value():
        from approvals.seals import current_seal

        print(on_database(current_seal).line())  # no Slack: the line to keep somewhere else
        return 0
    seal, posted_to = on_database(lambda engine: _post_seal(engine, slack))
    print(seal.line())
    if not posted_to:
        warn("no BILLSLEUTH_FINANCE_CHANNEL and no approvers in the stored policy: the seal was not posted")
    return 0


async def _post_seal(engine: AsyncEngine, slack: SlackSettings) -> tuple[Seal, tuple[str, ...]]:
    """The seal posted to the finance channel, else each approver of the stored policy; where it went."""
    from slack_sdk.errors import SlackApiError

    from approvals import activity, seals
    from approvals.policy_store import read_policy
    from bot.cli.common import cli_source
    from bot.flows.seals import post_seal, seal_recipients
    from bot.server import create_web_client, keep_alive

    policy = await read_policy(engine)
    recipients = seal_recipients(slack.finance_channel, policy.approvers if policy else ())
    if not recipients:
        return await seals.current_seal(engine), ()
    try:
        async with keep_alive(create_web_client(slack)) as client:
            seal = await post_seal(
                client, engine, recipients, why=seals.BY_HAND, actor_type=activity.USER, actor_id=cli_source()
            )
    except SlackApiError as error:
        raise CommandError(
            f"Slack refused the seal ({error.response.get('error')}); nothing was recorded", 1
        ) from None
    return seal, recipients


def parse_since(raw: str | None) -> date | None:
    if raw is None:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise CommandError(f"--since {raw!r} is not a date; write YYYY-MM-DD") from None


def run_export(args: argparse.Namespace) -> int:
    from bot.cli.common import ready_database

    since = parse_since(args.since)  # before touching the database: bad input changes nothing
    url = ready_database()
    asyncio.run(_export(url, since, args.format))
    return 0


async def _export(url: str, since: date | None, fmt: str) -> None:
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
