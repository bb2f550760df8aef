"""billsleuth audit [CUSTOMER_ID | --all] [--json] [--as-of YYYY-MM-DD]

The deterministic auditor over the ledger, no model: every invoice a customer paid more on than the rules
say, with its root cause and the figures behind it. Exit 0 whenever it ran, findings or not.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import date
from typing import TYPE_CHECKING

from bot.cli.common import CommandError, print_json

if TYPE_CHECKING:
    from agent.auditor.audit import Finding
    from agent.auditor.run import AuditReport


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit",
        help="the auditor over the ledger, no model: every invoice paid beyond the rules, and why",
        description="Audit one customer (or every customer) against the billing rules. Only invoices the "
        "customer paid more on than the rules say are findings.",
    )
    parser.add_argument("customer_id", nargs="?", metavar="CUSTOMER_ID", help="e.g. C-0007")
    parser.add_argument("--all", action="store_true", help="every customer (the default without CUSTOMER_ID)")
    add_audit_options(parser, workers_help="processes for --all")
    parser.set_defaults(handler=run)


def add_audit_options(parser: argparse.ArgumentParser, *, workers_help: str) -> None:
    """--json, --as-of and --workers, as `audit` and `sweep` (the same audit underneath) both take them."""
    parser.add_argument("--json", action="store_true", help='print {"as_of", "findings": [...]}')
    parser.add_argument(
        "--as-of",
        type=_day,
        metavar="YYYY-MM-DD",
        help="judge periods up to this date (default: the latest invoice issue date in the ledger)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help=f"{workers_help} (default: one per core, at most 4)",
    )


def run(args: argparse.Namespace) -> int:
    if args.customer_id and args.all:
        raise CommandError("give either a CUSTOMER_ID or --all, not both")
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    from bot.cli.common import ready_database

    url = ready_database()
    report = asyncio.run(_audit(url, args))
    for customer_id, reason in report.refused:
        print(
            f"billsleuth: warning: {customer_id} skipped, the rules refuse its history: {reason}",
            file=sys.stderr,
        )
    if args.json:
        print_json({"as_of": report.as_of.isoformat(), "findings": [f.as_json() for f in report.findings]})
    else:
        print(_table(report, show_evidence=bool(args.customer_id)))
    return 0


async def _audit(url: str, args: argparse.Namespace) -> AuditReport:
    from agent.auditor.run import audit_all, audit_one, default_workers, latest_issue_date

    if not args.customer_id:
        from bot.cli.progress import progress_bar

        workers = args.workers or default_workers()
        bar = progress_bar("audit")
        try:
            return await audit_all(url, args.as_of, workers=workers, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    from engine.db import create_engine
    from engine.ledger import UnknownCustomer

    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            as_of = args.as_of or await latest_issue_date(conn) or date.today()
            try:
                return await audit_one(conn, args.customer_id, as_of)
            except UnknownCustomer:
                raise CommandError(f"no customer {args.customer_id!r} in the ledger") from None
    finally:
        await engine.dispose()


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _table(report: AuditReport, show_evidence: bool) -> str:
    """A plain-text table, one finding a row (with its evidence for a single customer), and the totals."""
    from engine.money import fmt_amount

    findings = report.findings
    head = f"audit as of {report.as_of.isoformat()}: {_count(report.customers, 'customer')}"
    if not findings:
        return f"{head}, no invoice paid beyond the rules"
    rows = [("CUSTOMER", "INVOICE", "ROOT CAUSE", "OVERCHARGE")]
    rows += [
        (f.customer_id, f.invoice_id, f.root_cause, fmt_amount(f.overcharge, f.currency)) for f in findings
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]

    def render(row: tuple[str, str, str, str]) -> str:
        left = "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths[:3], strict=True))
        return f"{left}  {row[3].rjust(widths[3])}"

    lines = [head, "", render(rows[0])]
    for finding, row in zip(findings, rows[1:], strict=True):
        lines.append(render(row))
        if show_evidence:
            lines += [f"    - {item}" for item in finding.evidence]
    customers = _count(len({f.customer_id for f in findings}), "customer")
    lines += ["", f"total: {_count(len(findings), 'finding')} on {customers}", *_currency_totals(findings)]
    return "\n".join(lines)


def _currency_totals(findings: list[Finding]) -> list[str]:
    """One total per currency, never one sum across currencies; an overcharge the currency cannot
    express (a fraction of a yen) is counted as it is, and said to be undraftable."""
    from engine.money import expressible, fmt_amount, total

    lines = []
    for currency in sorted({f.currency for f in findings}):
        mine = [f for f in findings if f.currency == currency]
        overcharge = fmt_amount(total(f.overcharge for f in mine), currency)
        line = f"  {currency}: {_count(len(mine), 'finding')}, overcharge {overcharge}"
        odd = sum(not expressible(f.overcharge, currency) for f in mine)
        if odd:
            line += f" ({odd} not expressible in {currency}: no credit note can be drafted)"
        lines.append(line)
    return lines
