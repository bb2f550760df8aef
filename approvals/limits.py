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


async def invoice_currency(conn: AsyncConnection, invoice_id: str) -> str:
    """The invoice's currency: a credit note on it is in that currency too."""
    query = select(t.invoices.c.currency).where(t.invoices.c.id == invoice_id)
    return str((await conn.execute(query)).scalar_one())


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


async def issued_during(conn: AsyncConnection, start: datetime, end: datetime, currency: str) -> Decimal:
    """Credit issued in `currency` in [start, end), across all invoices: what that currency's daily
    budget has spent. Amounts in different currencies are never added together."""
    notes = t.credit_notes.c
    query = select(func.coalesce(func.sum(notes.amount), ZERO)).where(
        notes.status == "issued", notes.issued_at >= start, notes.issued_at < end, notes.currency == currency
    )
    return Decimal((await conn.execute(query)).scalar_one())


async def issued_today(conn: AsyncConnection, now: datetime, currency: str) -> Decimal:
    """Credit issued in `currency` so far on the UTC day of `now`: what counts against its daily limit."""
    start, end = utc_day(now)
    return await issued_during(conn, start, end, currency)
