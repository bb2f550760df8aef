"""The findings sweep: the auditor over every customer (agent.audit_run), each finding recorded the first
time it is seen, and the database side of the digest that posts the new ones to Slack.

Not to be confused with the periodic expiry chore (`CaseService.sweep`, bot.flows.chores.sweep), which
expires overdue notes: this one finds overcharges before customers do.

A finding is keyed by (invoice, overcharge) in `sweep_findings`: the same overcharge found again keeps its
`first_seen`; a partial credit makes a smaller overcharge, which is a new finding. What is listed is what
the audit finds now (issued credits already subtracted), less invoices with an open note (draft or
approved): someone is already settling those. A finding a digest listed (`posted_at`) is never listed in
a digest again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import ARRAY, Numeric, Text, and_, bindparam, func, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.audit_run import CHUNK_SIZE, AuditReport, Progress, audit_all
from agent.auditor import Finding
from approvals import activity
from approvals.models import NoteStatus
from engine import schema as t
from engine.db import create_engine
from engine.money import fmt, money

OPEN_NOTE = (NoteStatus.DRAFT, NoteStatus.APPROVED)
DIGEST_LOCK = "billsleuth:findings-digest"  # one digest claims at a time, across processes
POSTED = "sweep.posted"  # activity_log: a digest listed these findings
DAILY_RUN = "sweep.daily_run"  # activity_log: the bot's daily findings sweep ran for this UTC day

Key = tuple[str, Decimal]  # (invoice id, overcharge)


@dataclass(frozen=True)
class SweepFinding:
    """One finding as the sweep recorded it."""

    customer_id: str
    invoice_id: str
    root_cause: str
    overcharge: Decimal
    currency: str
    first_seen: datetime
    posted_at: datetime | None = None
    case_id: str | None = None

    @property
    def key(self) -> Key:
        return (self.invoice_id, self.overcharge)

    def as_json(self) -> dict[str, Any]:
        """The `sweep --json` shape of one finding (DESIGN.md §3)."""
        return {
            "customer_id": self.customer_id,
            "invoice_id": self.invoice_id,
            "root_cause": self.root_cause,
            "overcharge": fmt(self.overcharge),
            "currency": self.currency,
            "first_seen": self.first_seen.isoformat(),
            "posted": self.posted_at is not None,
        }


@dataclass
class SweepResult:
    as_of: date
    customers: int
    findings: list[SweepFinding]  # current, not being credited, in the audit's (customer) order
    refused: list[tuple[str, str]] = field(default_factory=list)  # (customer id, why the rules refused it)

    @property
    def keys(self) -> list[Key]:
        return [f.key for f in self.findings]

    def as_json(self) -> dict[str, Any]:
        return {"as_of": self.as_of.isoformat(), "findings": [f.as_json() for f in self.findings]}


async def run_findings_sweep(
    url: str, as_of: date | None = None, *, workers: int = 1, progress: Progress | None = None
) -> SweepResult:
    """Audit every customer (the same streamed, two-pass run as `audit --all`), record what is new, and
    return the current findings that nobody is crediting yet. `progress` as audit_all's."""
    return await record_sweep(url, await audit_all(url, as_of, workers=workers, progress=progress))


async def record_sweep(url: str, report: AuditReport) -> SweepResult:
    """An audit's findings recorded, and the current ones nobody is crediting yet (run_findings_sweep's
    second half: `billsleuth sweep` imports this module while the audit's workers run)."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await record_findings(conn, report.findings)
            current = await current_findings(conn, [_key(f) for f in report.findings])
    finally:
        await engine.dispose()
    return SweepResult(report.as_of, report.customers, current, report.refused)


def _key(finding: Finding) -> Key:
    return (finding.invoice_id, money(finding.overcharge))


async def record_findings(conn: AsyncConnection, findings: Sequence[Finding]) -> None:
    """Insert each finding not seen before; one multi-row statement per chunk, never one per finding.
    ON CONFLICT DO NOTHING keeps the first `first_seen` of a finding seen again."""
    for start in range(0, len(findings), CHUNK_SIZE):
        rows = [
            {
                "invoice_id": f.invoice_id,
                "overcharge": money(f.overcharge),
                "customer_id": f.customer_id,
                "root_cause": f.root_cause,
                "currency": f.currency,
            }
            for f in findings[start : start + CHUNK_SIZE]
        ]
        await conn.execute(pg_insert(t.sweep_findings).values(rows).on_conflict_do_nothing())


def _among(keys: Sequence[Key]) -> Any:
    """`(invoice_id, overcharge)` is one of `keys`: two array parameters, however many keys."""
    invoices = bindparam("key_invoices", [k[0] for k in keys], type_=ARRAY(Text))
    amounts = bindparam("key_amounts", [k[1] for k in keys], type_=ARRAY(Numeric(12, 2)))
    pairs = select(
        func.unnest(invoices).label("invoice_id"), func.unnest(amounts).label("overcharge")
    ).subquery()
    sf = t.sweep_findings.c
    return tuple_(sf.invoice_id, sf.overcharge).in_(select(pairs.c.invoice_id, pairs.c.overcharge))


def _not_being_credited() -> Any:
    notes = t.credit_notes.c
    open_note = select(notes.id).where(
        notes.invoice_id == t.sweep_findings.c.invoice_id, notes.status.in_([str(s) for s in OPEN_NOTE])
    )
    return ~open_note.exists()


def _finding(row: Any) -> SweepFinding:
    return SweepFinding(
        row.customer_id,
        row.invoice_id,
        row.root_cause,
        row.overcharge,
        row.currency,
        row.first_seen,
        row.posted_at,
        row.case_id,
    )


def _in_order(rows: Iterable[Any], keys: Sequence[Key]) -> list[SweepFinding]:
    found = {(r.invoice_id, r.overcharge): _finding(r) for r in rows}
    return [found[k] for k in keys if k in found]


async def current_findings(conn: AsyncConnection, keys: Sequence[Key]) -> list[SweepFinding]:
    """The recorded findings among `keys` (what the audit finds now) whose invoice has no open note."""
    if not keys:
        return []
    rows = await conn.execute(select(t.sweep_findings).where(_among(keys), _not_being_credited()))
    return _in_order(rows, keys)


async def claim_unposted(conn: AsyncConnection, keys: Sequence[Key]) -> list[SweepFinding]:
    """The current findings no digest listed yet, locked for the caller's transaction, which posts the
    digest and then marks them (mark_posted) before it commits. Claims are taken one digest at a time
    (an advisory lock), so a concurrent digest waits and then finds them posted; if posting fails the
    transaction rolls back and nothing is marked."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": DIGEST_LOCK})
    if not keys:
        return []
    sf = t.sweep_findings.c
    rows = await conn.execute(
        select(t.sweep_findings)
        .where(_among(keys), sf.posted_at.is_(None), _not_being_credited())
        .with_for_update()
    )
    return _in_order(rows, keys)


async def mark_posted(
    conn: AsyncConnection,
    findings: Sequence[SweepFinding],
    channel: str,
    ts: str,
    *,
    actor_type: str,
    actor_id: str,
    as_of: date,
) -> None:
    """The digest at (channel, ts) listed these findings: never listed again; on record."""
    if not findings:
        return
    await conn.execute(
        update(t.sweep_findings)
        .where(_among([f.key for f in findings]))
        .values(posted_at=func.now(), channel=channel, ts=ts)
    )
    await activity.record(
        conn,
        actor_type,
        actor_id,
        POSTED,
        "sweep_digest",
        f"{channel}:{ts}",
        {
            "as_of": as_of,
            "count": len(findings),
            "findings": [{"invoice_id": f.invoice_id, "overcharge": fmt(f.overcharge)} for f in findings],
        },
    )


async def finding_for_case(
    conn: AsyncConnection, invoice_id: str, overcharge: Decimal
) -> SweepFinding | None:
    """The finding, locked until the caller's transaction ends, so two clicks on `Open case` link one
    case; None when there is no such finding."""
    sf = t.sweep_findings.c
    row = (
        await conn.execute(
            select(t.sweep_findings)
            .where(sf.invoice_id == invoice_id, sf.overcharge == money(overcharge))
            .with_for_update()
        )
    ).first()
    return _finding(row) if row is not None else None


async def link_case(conn: AsyncConnection, finding: SweepFinding, case_id: str) -> None:
    sf = t.sweep_findings.c
    await conn.execute(
        update(t.sweep_findings)
        .where(and_(sf.invoice_id == finding.invoice_id, sf.overcharge == finding.overcharge))
        .values(case_id=case_id)
    )


async def posted_in(conn: AsyncConnection, channel: str, ts: str) -> list[SweepFinding]:
    """The findings the digest at (channel, ts) listed."""
    sf = t.sweep_findings.c
    rows = await conn.execute(
        select(t.sweep_findings).where(sf.channel == channel, sf.ts == ts).order_by(sf.invoice_id)
    )
    return [_finding(r) for r in rows]


async def ran_today(conn: AsyncConnection, day: date) -> bool:
    """Whether the bot's daily findings sweep has run for this UTC day (any process, before a restart)."""
    log = t.activity_log.c
    found = await conn.execute(
        select(log.id).where(log.action == DAILY_RUN, log.entity_id == day.isoformat()).limit(1)
    )
    return found.first() is not None


async def record_daily_run(conn: AsyncConnection, day: date, posted: int) -> None:
    await activity.record(
        conn, activity.SYSTEM, "bot", DAILY_RUN, "sweep_day", day.isoformat(), {"posted": posted}
    )
