"""The findings sweep's record (`sweep_findings`), on a plain psycopg connection.

Kept apart from agent.auditor.sweep and free of SQLAlchemy so that `billsleuth sweep` records what the
audit found without paying for SQLAlchemy's import (longer, on this machine, than auditing 3,000
customers). Every statement on `sweep_findings` that takes a set of findings lives here, in SQL; the
SQLAlchemy side (the digest's claim, the daily run) runs these on its own transaction's connection
(engine.db.driver_connection), so there is one way to say which findings are current.

A finding is keyed by (invoice, overcharge): the same overcharge found again keeps its `first_seen`; a
partial credit makes a smaller overcharge, which is a new finding. What is listed is what the audit finds
now, less invoices with an open note (draft or approved): someone is already settling those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agent.auditor.audit import Finding
from agent.auditor.run import CHUNK_SIZE, AuditReport
from approvals.models import OPEN_NOTES
from engine.money import fmt, money

if TYPE_CHECKING:
    import psycopg

Key = tuple[str, Decimal]  # (invoice id, overcharge)

# (invoice_id, overcharge) is one of the keys: two array parameters, however many keys.
_AMONG = (
    "(sf.invoice_id, sf.overcharge) IN "
    "(SELECT * FROM unnest(%(key_invoices)s::text[], %(key_amounts)s::numeric(12,2)[]))"
)
_NOT_BEING_CREDITED = (
    "NOT EXISTS (SELECT 1 FROM credit_notes c WHERE c.invoice_id = sf.invoice_id "
    "AND c.status = ANY(%(open_note)s::text[]))"
)
_INSERT = (
    "INSERT INTO sweep_findings (invoice_id, overcharge, customer_id, root_cause, currency) "
    "SELECT * FROM unnest(%s::text[], %s::numeric(12,2)[], %s::text[], %s::text[], %s::text[]) "
    "ON CONFLICT DO NOTHING"
)


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


# sweep_findings' columns, named as SweepFinding's fields and in their order: a row is SweepFinding(*row).
COLUMNS = tuple(f.name for f in fields(SweepFinding))


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


def key_of(finding: Finding) -> Key:
    return (finding.invoice_id, money(finding.overcharge))


def among(keys: Sequence[Key]) -> dict[str, Any]:
    """The parameters of a statement that picks these findings (`_AMONG`), the open statuses with them."""
    return {
        "key_invoices": [k[0] for k in keys],
        "key_amounts": [k[1] for k in keys],
        "open_note": [str(s) for s in OPEN_NOTES],
    }


def _in_order(rows: Sequence[tuple[Any, ...]], keys: Sequence[Key]) -> list[SweepFinding]:
    found = {(f.invoice_id, f.overcharge): f for f in (SweepFinding(*row) for row in rows)}
    return [found[k] for k in keys if k in found]


async def record_findings(conn: psycopg.AsyncConnection[Any], findings: Sequence[Finding]) -> None:
    """Insert each finding not seen before; one statement per chunk, never one per finding. ON CONFLICT
    DO NOTHING keeps the first `first_seen` of a finding seen again."""
    for start in range(0, len(findings), CHUNK_SIZE):
        chunk = findings[start : start + CHUNK_SIZE]
        columns = (
            [f.invoice_id for f in chunk],
            [money(f.overcharge) for f in chunk],
            [f.customer_id for f in chunk],
            [f.root_cause for f in chunk],
            [f.currency for f in chunk],
        )
        await conn.execute(_INSERT, columns)


async def current_findings(
    conn: psycopg.AsyncConnection[Any], keys: Sequence[Key], *, unposted: bool = False
) -> list[SweepFinding]:
    """The recorded findings among `keys` (what the audit finds now) whose invoice has no open note, in
    the keys' order. `unposted`: only those no digest listed yet, locked until the caller's transaction
    ends (the digest's claim)."""
    if not keys:
        return []
    where = f"{_AMONG} AND {_NOT_BEING_CREDITED}" + (" AND sf.posted_at IS NULL" if unposted else "")
    lock = " FOR UPDATE OF sf" if unposted else ""
    cursor = await conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM sweep_findings sf WHERE {where}{lock}",  # type: ignore[arg-type]
        among(keys),
    )
    return _in_order(await cursor.fetchall(), keys)


async def mark_listed(conn: psycopg.AsyncConnection[Any], keys: Sequence[Key], channel: str, ts: str) -> None:
    """The digest at (channel, ts) listed these findings: never listed in a digest again."""
    await conn.execute(
        f"UPDATE sweep_findings sf SET posted_at = now(), channel = %(channel)s, ts = %(ts)s "  # type: ignore[arg-type]
        f"WHERE {_AMONG}",
        {**among(keys), "channel": channel, "ts": ts},
    )


async def record_sweep(url: str, report: AuditReport) -> SweepResult:
    """An audit's findings recorded, and the current ones nobody is crediting yet, in one transaction."""
    import psycopg

    connection = await psycopg.AsyncConnection.connect(url, prepare_threshold=None)
    async with connection as conn, conn.transaction():
        await record_findings(conn, report.findings)
        current = await current_findings(conn, [key_of(f) for f in report.findings])
    return SweepResult(report.as_of, report.customers, current, report.refused)
