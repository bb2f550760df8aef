"""Read access to the ledger: rows → the engine's value objects. Async, on SQLAlchemy Core."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from engine import schema as t
from engine.model import (
    Coupon,
    CreditNote,
    Customer,
    CustomerLedger,
    Event,
    Invoice,
    Line,
    Payment,
    Plan,
    PriceBook,
    Subscription,
    TaxRate,
)


class UnknownCustomer(LookupError):
    pass


# What the price book holds now, in one statement: an md5 of each table's rows as text (every column, in
# a total order). Plans, coupons and tax rates change only when the ledger is (re)seeded, yet every case
# reads the book three times (investigation, card, drafting): a process keeps the book it read last and
# reads the tables again only when their fingerprint has changed.
_BOOK_FINGERPRINT = text(
    "SELECT md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM plans r), ''))"
    " || md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM coupons r), ''))"
    " || md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM tax_rates r), ''))"
)
_last_book: tuple[str, PriceBook] | None = None


async def load_price_book(conn: AsyncConnection) -> PriceBook:
    """The plans, coupons and tax rates as they stand (the same object while they have not changed)."""
    global _last_book
    fingerprint = str((await conn.execute(_BOOK_FINGERPRINT)).scalar_one())
    if _last_book is not None and _last_book[0] == fingerprint:
        return _last_book[1]
    book = await _read_price_book(conn)
    # Kept only when nothing changed while it was read (each statement sees the latest commit), so the
    # fingerprint always names the rows it was taken from.
    if str((await conn.execute(_BOOK_FINGERPRINT)).scalar_one()) == fingerprint:
        _last_book = (fingerprint, book)
    return book


async def _read_price_book(conn: AsyncConnection) -> PriceBook:
    plans = {r.id: Plan(r.id, r.name, r.interval, r.unit_price) for r in await conn.execute(select(t.plans))}
    coupons = {
        r.id: Coupon(r.id, r.kind, r.value, r.duration_months) for r in await conn.execute(select(t.coupons))
    }
    rates = [
        TaxRate(r.code, r.region, r.rate, r.valid_from, r.valid_to)
        for r in await conn.execute(
            select(t.tax_rates).order_by(t.tax_rates.c.valid_from, t.tax_rates.c.code)
        )
    ]
    return PriceBook(plans, coupons, rates)


def _customer(row: Any) -> Customer:
    return Customer(row.id, row.name, row.country, row.currency, row.tax_region)


def _line(row: Any) -> Line:
    return Line(
        row.kind,
        row.description,
        row.quantity,
        row.unit_amount,
        row.amount,
        row.period_start,
        row.period_end,
        row.tax_code,
    )


def _line_number(line_id: str) -> int:
    """Lines are stored as <invoice>-L<n>; keep their billed order."""
    _, _, number = line_id.rpartition("-L")
    return int(number) if number.isdigit() else 0


async def load_ledgers(
    conn: AsyncConnection, customer_ids: Sequence[str] | None = None
) -> list[CustomerLedger]:
    """Load whole customer ledgers in a fixed number of queries (not one per invoice)."""

    def only(table: Any, column: Any) -> Any:
        query = select(table)
        return query.where(column.in_(customer_ids)) if customer_ids is not None else query

    customers = [
        _customer(r)
        for r in await conn.execute(only(t.customers, t.customers.c.id).order_by(t.customers.c.id))
    ]
    subs_rows = list(await conn.execute(only(t.subscriptions, t.subscriptions.c.customer_id)))
    sub_ids = [r.id for r in subs_rows]
    events_by_sub: dict[str, list[Event]] = defaultdict(list)
    event_query = select(t.subscription_events).order_by(t.subscription_events.c.effective_at)
    if customer_ids is not None:
        event_query = event_query.where(t.subscription_events.c.subscription_id.in_(sub_ids))
    for r in await conn.execute(event_query):
        events_by_sub[r.subscription_id].append(Event(r.id, r.type, r.effective_at, dict(r.payload)))
    subs_by_customer: dict[str, list[Subscription]] = defaultdict(list)
    for r in subs_rows:
        subs_by_customer[r.customer_id].append(
            Subscription(
                r.id, r.customer_id, r.start_date, r.billing_anchor_day, r.coupon_id, events_by_sub[r.id]
            )
        )

    invoice_rows = list(
        await conn.execute(
            only(t.invoices, t.invoices.c.customer_id).order_by(t.invoices.c.period_start, t.invoices.c.id)
        )
    )
    owner = {r.id: r.customer_id for r in invoice_rows}
    lines_by_invoice: dict[str, list[tuple[int, Line]]] = defaultdict(list)
    line_query = select(t.invoice_lines)
    pay_query = select(t.payments).order_by(t.payments.c.attempted_at, t.payments.c.id)
    note_query = select(t.credit_notes).order_by(t.credit_notes.c.id)
    if customer_ids is not None:
        ids = list(owner)
        line_query = line_query.where(t.invoice_lines.c.invoice_id.in_(ids))
        pay_query = pay_query.where(t.payments.c.invoice_id.in_(ids))
        note_query = note_query.where(t.credit_notes.c.invoice_id.in_(ids))
    for r in await conn.execute(line_query):
        lines_by_invoice[r.invoice_id].append((_line_number(r.id), _line(r)))
    invoices_by_customer: dict[str, list[Invoice]] = defaultdict(list)
    for r in invoice_rows:
        invoice = Invoice(
            r.id,
            r.customer_id,
            r.subscription_id,
            r.period_start,
            r.period_end,
            r.issued_at,
            r.currency,
            r.status,
        )
        invoice.lines = [line for _, line in sorted(lines_by_invoice[r.id], key=lambda pair: pair[0])]
        invoices_by_customer[r.customer_id].append(invoice)
    payments_by_customer: dict[str, list[Payment]] = defaultdict(list)
    for r in await conn.execute(pay_query):
        payments_by_customer[owner[r.invoice_id]].append(
            Payment(r.id, r.invoice_id, r.amount, r.status, r.attempted_at, r.gateway_ref)
        )
    notes_by_customer: dict[str, list[CreditNote]] = defaultdict(list)
    for r in await conn.execute(note_query):
        notes_by_customer[owner[r.invoice_id]].append(
            CreditNote(r.id, r.invoice_id, r.amount, r.reason, r.status)
        )

    return [
        CustomerLedger(
            c,
            subs_by_customer[c.id],
            invoices_by_customer[c.id],
            payments_by_customer[c.id],
            notes_by_customer[c.id],
        )
        for c in customers
    ]


async def load_ledger(conn: AsyncConnection, customer_id: str) -> CustomerLedger:
    found = await load_ledgers(conn, [customer_id])
    if not found:
        raise UnknownCustomer(f"no customer {customer_id!r} in the ledger")
    return found[0]
