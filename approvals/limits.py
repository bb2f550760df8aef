"""The money limits checked when drafting and again when issuing, and the locks that make them hold.

A check-then-write is only safe when whoever could invalidate the check waits for us: drafting and
issuing on one invoice serialise on that invoice's row (SELECT … FOR UPDATE); issuing serialises on a
transaction-scoped advisory lock for the daily budget, so two issuers cannot both see "room left".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

from sqlalchemy import Select, bindparam, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from approvals.models import NoteStatus
from engine import locks
from engine import schema as t
from engine.diff import check_ledger, ledger_as_of
from engine.ledger import load_ledger, load_price_book
from engine.model import BillingError
from engine.money import ZERO, fmt, money


class OwedUnknown(ValueError):
    """The billing rules cannot re-bill the invoice's ledger, so what is owed back cannot be known."""


@dataclass(frozen=True)
class Owed:
    """What is still owed back on one invoice, re-derived from the ledger as it stands now."""

    invoice_id: str
    paid: Decimal  # succeeded payments
    due: Decimal  # what the billing rules say should have been paid (never below zero)
    issued: Decimal  # credit notes already issued on the invoice
    pending: Decimal  # other notes on the invoice that may yet be issued

    @property
    def amount(self) -> Decimal:
        return money(self.paid - self.due - self.issued - self.pending)

    def explain(self) -> str:
        return (
            f"{fmt(self.amount)} is still owed back on {self.invoice_id} (paid {fmt(self.paid)}, should have "
            f"paid {fmt(self.due)}, already issued {fmt(self.issued)}, other open notes {fmt(self.pending)})"
        )


async def lock_invoice(conn: AsyncConnection, invoice_id: str) -> bool:
    """Hold the invoice row until the transaction ends; False when there is no such invoice."""
    query = select(t.invoices.c.id).where(t.invoices.c.id == invoice_id).with_for_update()
    return (await conn.execute(query)).first() is not None


# Drafting runs these on every note, in its transaction: built once (building one costs about as much
# CPU as running it).
_CURRENCY = select(t.invoices.c.currency).where(t.invoices.c.id == bindparam("invoice_id"))
# A payment brings in its amount less its succeeded refunds, those a credit note made aside (the note
# counts as credited): engine.ledger.REFUNDED, here as SQLAlchemy.
_REFUNDED = (
    select(func.coalesce(func.sum(t.refunds.c.amount), ZERO))
    .where(
        t.refunds.c.payment_id == t.payments.c.id,
        t.refunds.c.status == "succeeded",
        t.refunds.c.credit_note_id.is_(None),
    )
    .scalar_subquery()
)
_PAID = select(func.coalesce(func.sum(t.payments.c.amount - _REFUNDED), ZERO)).where(
    t.payments.c.invoice_id == bindparam("invoice_id"), t.payments.c.status == "succeeded"
)


def _credited_query(excluding: bool, excluding_case: bool) -> Select[tuple[Decimal]]:
    notes = t.credit_notes.c
    query = select(func.coalesce(func.sum(notes.amount), ZERO)).where(
        notes.invoice_id == bindparam("invoice_id"), notes.status.in_(bindparam("statuses", expanding=True))
    )
    if excluding:
        query = query.where(notes.id != bindparam("excluding"))
    if excluding_case:
        query = query.where(notes.case_id.is_distinct_from(bindparam("excluding_case")))
    return query


# (leaving out a note, leaving out a case's notes) → the statement
_CREDITED = {(note, case): _credited_query(note, case) for note in (False, True) for case in (False, True)}


async def invoice_currency(conn: AsyncConnection, invoice_id: str) -> str:
    """The invoice's currency: a credit note on it is in that currency too."""
    return str((await conn.execute(_CURRENCY, {"invoice_id": invoice_id})).scalar_one())


async def lock_daily_budget(conn: AsyncConnection) -> None:
    await locks.xact_lock(conn, locks.DAILY_BUDGET)


async def paid_total(conn: AsyncConnection, invoice_id: str) -> Decimal:
    """What the customer actually paid on the invoice: succeeded payments only."""
    return Decimal((await conn.execute(_PAID, {"invoice_id": invoice_id})).scalar_one())


async def credited_total(
    conn: AsyncConnection,
    invoice_id: str,
    statuses: Iterable[str],
    *,
    excluding: str | None = None,
    excluding_case: str | None = None,
) -> Decimal:
    """The sum of the invoice's credit notes in the given statuses (optionally leaving out one note, or
    one case's notes)."""
    query = _CREDITED[(excluding is not None, excluding_case is not None)]
    params = {
        "invoice_id": invoice_id,
        "statuses": [str(s) for s in statuses],
        "excluding": excluding,
        "excluding_case": excluding_case,
    }
    return Decimal((await conn.execute(query, params)).scalar_one())


async def owed_on_invoice(
    conn: AsyncConnection,
    invoice_id: str,
    *,
    pending: Iterable[str],
    excluding_case: str | None = None,
) -> Owed:
    """paid − max(due, 0) − issued − other notes in the `pending` statuses, re-derived from the ledger;
    the caller holds the invoice lock.

    Whatever a case verified earlier, this is what money may be committed against now: another case's
    note may have been issued since, a payment refunded, a ledger row corrected. The case's own notes are
    left out (`excluding_case`): a case may propose a new amount, and whichever of its notes is issued
    first counts as issued for the others. Raises OwedUnknown when the rules cannot re-bill the ledger.
    """
    customer_id = (
        await conn.execute(select(t.invoices.c.customer_id).where(t.invoices.c.id == invoice_id))
    ).scalar_one()
    ledger = await load_ledger(conn, customer_id)
    try:
        checks = check_ledger(ledger, await load_price_book(conn), ledger_as_of(ledger))
    except BillingError as error:
        raise OwedUnknown(f"the billing rules cannot re-bill {invoice_id}: {error}") from None
    check = next(c for c in checks if c.invoice_id == invoice_id)
    others = await credited_total(conn, invoice_id, pending, excluding_case=excluding_case)
    return Owed(invoice_id, check.paid_total, max(check.should_pay, ZERO), check.credited_total, others)


def utc_day(now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the UTC calendar day containing `now`."""
    start = datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


async def issued_during(conn: AsyncConnection, start: datetime, end: datetime, currency: str) -> Decimal:
    """Credit issued in `currency` in [start, end), across all invoices: what that currency's daily
    budget has spent. Amounts in different currencies are never added together.

    Notes a forced reseed erased still count: their `ledger.reseeded` activity row lists them."""
    notes = t.credit_notes.c
    query = select(func.coalesce(func.sum(notes.amount), ZERO)).where(
        notes.status == NoteStatus.ISSUED,
        notes.imported.is_(False),  # the billing system's own notes are not ours to budget
        notes.issued_at >= start,
        notes.issued_at < end,
        notes.currency == currency,
    )
    standing = Decimal((await conn.execute(query)).scalar_one())
    return standing + await _erased_by_reseeds(conn, start, end, currency)


# A reseed happens after the notes it erased were issued, so only reseeds since `start` can list any.
_ERASED_ISSUED = text(
    """
    SELECT coalesce(sum((note->>'amount')::numeric), 0)
    FROM activity_log AS a, jsonb_array_elements(a.details->'erased_issued') AS note
    WHERE a.action = 'ledger.reseeded' AND a.at >= :start
      AND (note->>'issued_at')::timestamptz >= :start AND (note->>'issued_at')::timestamptz < :end
      AND note->>'currency' = :currency
    """
)


async def _erased_by_reseeds(conn: AsyncConnection, start: datetime, end: datetime, currency: str) -> Decimal:
    window = {"start": start, "end": end, "currency": currency}
    return Decimal((await conn.execute(_ERASED_ISSUED, window)).scalar_one())


async def issued_today(conn: AsyncConnection, now: datetime, currency: str) -> Decimal:
    """Credit issued in `currency` so far on the UTC day of `now`: what counts against its daily limit."""
    start, end = utc_day(now)
    return await issued_during(conn, start, end, currency)
