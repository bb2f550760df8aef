"""billsleuth sweep [--post] [--json] [--as-of YYYY-MM-DD]

The findings sweep: the auditor over every customer (as `audit --all`), each finding recorded the first
time it is seen; lists the current ones nobody is crediting yet. `--post` sends one digest of those no
digest listed before to BILLSLEUTH_SWEEP_CHANNEL (nothing new: no digest).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from bot.cli.common import CommandError, print_json, warn

if TYPE_CHECKING:
    from agent.auditor.sweep_record import SweepResult
    from bot.config import SlackSettings
    from bot.flows.digest import PostedDigest


def add_parser(sub: argparse._SubParsersAction) -> None:
    from bot.cli.cmd_audit import add_audit_options

    parser = sub.add_parser(
        "sweep",
        help="audit every customer, record new overcharges; --post: the new ones to Slack as a digest",
        description="Find overcharges before customers do: audit every customer, record each finding the "
        "first time it is seen, list those nobody is crediting yet. With --post, one digest of the ones no "
        "digest listed before goes to BILLSLEUTH_SWEEP_CHANNEL.",
    )
    parser.add_argument(
        "--post", action="store_true", help="post the new findings to BILLSLEUTH_SWEEP_CHANNEL"
    )
    add_audit_options(parser, workers_help="audit processes")
    parser.set_defaults(handler=run)


def _slack_for_posting() -> SlackSettings:
    from bot.config import SlackConfigError, SlackSettings

    try:
        settings = SlackSettings.from_env()
    except SlackConfigError as error:
        raise CommandError(str(error)) from None
    missing = [
        name
        for name, value in (
            ("SLACK_BOT_TOKEN", settings.bot_token.get_secret_value()),
            ("BILLSLEUTH_SWEEP_CHANNEL", settings.sweep_channel),
        )
        if not value
    ]
    if missing:
        raise CommandError(f"--post needs {' and '.join(missing)} (not set)")
    return settings


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    slack = _slack_for_posting() if args.post else None  # refuse before the audit's work, not after
    from bot.cli.common import ready_database

    url = ready_database()
    result, posted = asyncio.run(_sweep(url, args, slack))
    for customer_id, reason in result.refused:
        warn(f"{customer_id} skipped, the rules refuse its history: {reason}")
    if args.json:
        print_json(result.as_json())
    else:
        print(_summary(result, posted if args.post else None, posting=args.post))
    return 0


async def _sweep(
    url: str, args: argparse.Namespace, slack: SlackSettings | None
) -> tuple[SweepResult, PostedDigest | None]:
    from agent.auditor.run import audit_all, default_workers
    from bot.cli.progress import progress_bar

    bar = progress_bar("sweep")
    try:
        report = await audit_all(url, args.as_of, workers=args.workers or default_workers(), progress=bar)
    finally:
        if bar is not None:
            bar.close()
    from agent.auditor.sweep_record import record_sweep

    result = await record_sweep(url, report)
    if slack is None:
        return result, None
    posted = await _post(url, result, slack)
    if posted is not None:  # what --json prints says which findings the digest just listed
        import psycopg

        from agent.auditor.sweep_record import current_findings

        async with await psycopg.AsyncConnection.connect(url, prepare_threshold=None) as conn:
            result.findings = await current_findings(conn, result.keys)
    return result, posted


async def _post(url: str, result: SweepResult, slack: SlackSettings) -> PostedDigest | None:
    from slack_sdk.errors import SlackApiError

    from approvals.activity import USER
    from bot.cli.common import cli_source
    from bot.flows.digest import post_findings_digest
    from bot.server import create_web_client, keep_alive
    from engine.db import create_engine

    engine = create_engine(url)
    try:
        async with keep_alive(create_web_client(slack)) as client:
            return await post_findings_digest(
                client, engine, slack.sweep_channel, result, actor_type=USER, actor_id=cli_source()
            )
    except SlackApiError as error:
        raise CommandError(
            f"Slack refused the digest ({error.response.get('error')}); nothing was marked posted", 1
        ) from None
    finally:
        await engine.dispose()


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _summary(result: SweepResult, posted: PostedDigest | None, *, posting: bool) -> str:
    from engine.money import fmt_amount, total

    findings = result.findings
    head = f"sweep as of {result.as_of.isoformat()}: {_count(result.customers, 'customer')}"
    if not findings:
        lines = [f"{head}, no overcharge that nobody is crediting yet"]
    else:
        unposted = sum(f.posted_at is None for f in findings)
        lines = [f"{head}, {_count(len(findings), 'finding')} ({unposted} not in any digest yet)"]
        for currency in sorted({f.currency for f in findings}):
            mine = [f for f in findings if f.currency == currency]
            overcharge = fmt_amount(total(f.overcharge for f in mine), currency)
            lines.append(f"  {currency}: {_count(len(mine), 'finding')}, overcharge {overcharge}")
        largest = sorted(findings, key=lambda f: (f.currency, -f.overcharge, f.invoice_id))[:10]
        lines += ["", "largest:"] + [
            f"  {f.invoice_id}  {f.customer_id}  {f.root_cause}  {fmt_amount(f.overcharge, f.currency)}"
            + ("" if f.posted_at is None else "  (posted)")
            for f in largest
        ]
    if posting:
        lines.append(
            f"posted a digest of {_count(posted.findings, 'finding')} to {posted.channel}"
            if posted is not None
            else "nothing new to post: no digest"
        )
    return "\n".join(lines)
