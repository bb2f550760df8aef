"""The money limits checked when drafting and again when issuing, and the locks that make them hold.

A check-then-write is only safe when whoever could invalidate the check waits for us: drafting and
issuing on one invoice serialise on that invoice's row (SELECT … FOR UPDATE); issuing serialises on a
transaction-scoped advisory lock for the daily budget, so two issuers cannot both see "room left".
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from engine import schema as t
from engine.money import ZERO

# A fixed key for pg_advisory_xact_lock: "the daily credit budget". Any constant works as long as
# nothing else in the database uses it; this one spells "BSBUDGET" in ASCII.
BUDGET_LOCK_KEY = 0x4253_4255_4447_4554

CREDITED = ("approved", "issued")  # what counts against the paid total when drafting


async def lock_invoice(conn: AsyncConnection, invoice_id: str) -> bool:
    """Hold the invoice row until the transaction ends; False when there is no such invoice."""
    query = select(t.invoices.c.id).where(t.invoices.c.id == invoice_id).with_for_update()
    return (await conn.execute(query)).first() is not None


async def lock_daily_budget(conn: AsyncConnection) -> None:
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": BUDGET_LOCK_KEY})


async def paid_total(conn: AsyncConnection, invoice_id: str) -> Decimal:
    """What the customer actually paid on the invoice: succeeded payments only."""
    query = select(func.coalesce(func.sum(t.payments.c.amount), ZERO)).where(
        t.payments.c.invoice_id == invoice_id, t.payments.c.status == "succeeded"
    )
    return Decimal((await conn.execute(query)).scalar_one())


async def credited_total(
    conn: AsyncConnection, invoice_id: str, statuses: Iterable[str], *, excluding: str | None = None
) -> Decimal:
    """The sum of the invoice's credit notes in the given statuses (optionally leaving one note out)."""
    notes = t.credit_notes.c
    query = select(func.coalesce(func.sum(notes.amount), ZERO)).where(
        notes.invoice_id == invoice_id, notes.status.in_(list(statuses))
    )
    if excluding is not None:
        query = query.where(notes.id != excluding)
    return Decimal((await conn.execute(query)).scalar_one())


def utc_day(now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the UTC calendar day containing `now`."""
    start = datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


async def issued_during(conn: AsyncConnection, start: datetime, end: datetime) -> Decimal:
    """Credit issued in [start, end), across all invoices: what the daily budget has spent.

    Notes a forced reseed erased still count: their `ledger.reseeded` activity row lists them."""
    notes = t.credit_notes.c
    query = select(func.coalesce(func.sum(notes.amount), ZERO)).where(
        notes.status == "issued", notes.issued_at >= start, notes.issued_at < end
    )
    standing = Decimal((await conn.execute(query)).scalar_one())
    return standing + await _erased_by_reseeds(conn, start, end)


# A reseed happens after the notes it erased were issued, so only reseeds since `start` can list any.
_ERASED_ISSUED = text(
    """
    SELECT coalesce(sum((note->>'amount')::numeric), 0)
    FROM activity_log AS a, jsonb_array_elements(a.details->'erased_issued') AS note
    WHERE a.action = 'ledger.reseeded' AND a.at >= :start
      AND (note->>'issued_at')::timestamptz >= :start AND (note->>'issued_at')::timestamptz < :end
    """
)


async def _erased_by_reseeds(conn: AsyncConnection, start: datetime, end: datetime) -> Decimal:
    return Decimal((await conn.execute(_ERASED_ISSUED, {"start": start, "end": end})).scalar_one())


async def issued_today(conn: AsyncConnection, now: datetime) -> Decimal:
    """Credit issued so far on the UTC day of `now`: what counts against the daily credit limit."""
    start, end = utc_day(now)
    return await issued_during(conn, start, end)
