"""The ledger read as the engine's value objects: whole customer ledgers and the price book.

One reader, in plain psycopg SQL: the same statements and the same row-to-object assembly serve a plain
psycopg connection (the sweep's, which never imports SQLAlchemy) and the bot's SQLAlchemy connection
(run on the psycopg connection under it, in its transaction). A ledger's statements go to the server in
one round trip (pipeline mode), and each row is a tuple the value object takes as it comes: SQLAlchemy's
statement building and row objects cost more than the rules that judge the ledger.

engine.ledger_stream screens every customer (no invoice lines) for the sweep; this module reads whole
ledgers for the few it flags, and for every case.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.ext.asyncio import AsyncConnection

Rows = Sequence[tuple[Any, ...]]


class UnknownCustomer(LookupError):
    pass


# What payment `p` has given back: its succeeded refunds, less those a credit note made (the note counts).
REFUNDED = (
    "coalesce((SELECT sum(r.amount) FROM refunds r WHERE r.payment_id = p.id AND r.status = 'succeeded' "
    "AND r.credit_note_id IS NULL), 0)"
)

# Each statement takes %(ids)s: the customers whose ledgers to read, or NULL for every customer. The
# parameter is known when the statement is planned (no prepared statements), so NULL IS NULL folds away.
_OF = "(%(ids)s::text[] IS NULL OR {col} = ANY(%(ids)s::text[]))"
LEDGER_STATEMENTS: tuple[str, ...] = (
    "SELECT id, name, country, currency, tax_region, source FROM customers WHERE "
    + _OF.format(col="id")
    + " ORDER BY id",
    "SELECT e.subscription_id, e.id, e.type, e.effective_at, e.payload FROM subscription_events e "
    "JOIN subscriptions s ON s.id = e.subscription_id WHERE "
    + _OF.format(col="s.customer_id")
    + " ORDER BY e.effective_at, e.id",
    "SELECT id, customer_id, start_date, billing_anchor_day, coupon_id FROM subscriptions WHERE "
    + _OF.format(col="customer_id")
    + " ORDER BY customer_id, id",
    "SELECT l.invoice_id, l.line_no, l.kind, l.description, l.quantity, l.unit_amount, l.amount, "
    "l.period_start, l.period_end, l.tax_code, l.inclusive FROM invoice_lines l "
    "JOIN invoices i ON i.id = l.invoice_id WHERE " + _OF.format(col="i.customer_id"),
    "SELECT id, customer_id, subscription_id, period_start, period_end, issued_at, currency, status, "
    "created_at FROM invoices WHERE " + _OF.format(col="customer_id") + " ORDER BY period_start, id",
    "SELECT i.customer_id, p.id, p.invoice_id, p.amount - " + REFUNDED + ", p.status, p.attempted_at, "
    "p.gateway_ref FROM payments p JOIN invoices i ON i.id = p.invoice_id WHERE "
    + _OF.format(col="i.customer_id")
    + " ORDER BY p.attempted_at, p.id",
    "SELECT i.customer_id, n.id, n.invoice_id, n.amount, n.reason, n.status FROM credit_notes n "
    "JOIN invoices i ON i.id = n.invoice_id WHERE " + _OF.format(col="i.customer_id") + " ORDER BY n.id",
)

PRICE_BOOK_STATEMENTS: tuple[str, ...] = (
    "SELECT id, name, interval, unit_price FROM plans",
    "SELECT id, kind, value, duration_months, duration FROM coupons",
    "SELECT code, region, rate, valid_from, valid_to, inclusive FROM tax_rates ORDER BY valid_from, code",
)

# What the price book holds now, in one statement: an md5 of each table's rows as text (every column, in
# a total order). Plans, coupons and tax rates change only when the ledger is (re)seeded, yet every case
# reads the book three times (investigation, card, drafting): a process keeps the book it read last and
# reads the tables again only when their fingerprint has changed.
_BOOK_FINGERPRINT = (
    "SELECT md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM plans r), ''))"
    " || md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM coupons r), ''))"
    " || md5(coalesce((SELECT string_agg(r::text, ',' ORDER BY r::text) FROM tax_rates r), ''))"
)
_last_book: tuple[str, PriceBook] | None = None


def assemble_ledgers(results: Sequence[Rows]) -> list[CustomerLedger]:
    """LEDGER_STATEMENTS' rows, in their order → the ledgers: customers by id, each one's invoices by
    period, payments by attempt, credit notes by id, an invoice's lines in billed order."""
    customers, events, subscriptions, lines, invoices, payments, notes = results
    events_of: dict[str, list[Event]] = defaultdict(list)
    for sub_id, event_id, kind, at, payload in events:
        events_of[sub_id].append(Event(event_id, kind, at, dict(payload)))
    subs_of: dict[str, list[Subscription]] = defaultdict(list)
    for sub_id, customer_id, start, anchor, coupon in subscriptions:
        subs_of[customer_id].append(
            Subscription(sub_id, customer_id, start, anchor, coupon, events_of[sub_id])
        )
    lines_of: dict[str, list[tuple[int, Line]]] = defaultdict(list)
    for row in lines:
        # line_no is the line's place on its invoice: ids are the source's own and say nothing of it.
        lines_of[row[0]].append((row[1] or 0, Line(*row[2:])))
    invoices_of: dict[str, list[Invoice]] = defaultdict(list)
    for row in invoices:
        invoice = Invoice(*row[:8], created_at=row[8])
        invoice.lines = [line for _, line in sorted(lines_of[invoice.id], key=itemgetter(0))]
        invoices_of[invoice.customer_id].append(invoice)
    payments_of: dict[str, list[Payment]] = defaultdict(list)
    for customer_id, *payment in payments:
        payments_of[customer_id].append(Payment(*payment))
    notes_of: dict[str, list[CreditNote]] = defaultdict(list)
    for customer_id, *note in notes:
        notes_of[customer_id].append(CreditNote(*note))
    return [
        CustomerLedger(Customer(*c), subs_of[c[0]], invoices_of[c[0]], payments_of[c[0]], notes_of[c[0]])
        for c in customers
    ]


def assemble_price_book(results: Sequence[Rows]) -> PriceBook:
    """PRICE_BOOK_STATEMENTS' rows, in their order → the price book."""
    plans, coupons, rates = results
    return PriceBook(
        {r[0]: Plan(*r) for r in plans}, {r[0]: Coupon(*r) for r in coupons}, [TaxRate(*r) for r in rates]
    )


def _ids(customer_ids: Sequence[str] | None) -> dict[str, list[str] | None]:
    return {"ids": None if customer_ids is None else list(customer_ids)}


# ---- on a plain psycopg connection (the sweep) ----


def _run(conn: psycopg.Connection[Any], statements: Sequence[str], params: dict[str, Any]) -> list[Rows]:
    with conn.pipeline():
        cursors = [conn.execute(statement, params) for statement in statements]  # type: ignore[call-overload]
    return [cursor.fetchall() for cursor in cursors]


def full_ledgers(
    conn: psycopg.Connection[Any], customer_ids: Sequence[str] | None = None
) -> list[CustomerLedger]:
    """Whole ledgers of these customers (None: every customer), in one round trip."""
    if customer_ids is not None and not customer_ids:
        return []
    return assemble_ledgers(_run(conn, LEDGER_STATEMENTS, _ids(customer_ids)))


def price_book(conn: psycopg.Connection[Any]) -> PriceBook:
    """The plans, coupons and tax rates as they stand."""
    return assemble_price_book(_run(conn, PRICE_BOOK_STATEMENTS, {}))


# ---- on the bot's SQLAlchemy connection ----


async def _run_async(conn: AsyncConnection, statements: Sequence[str], params: dict[str, Any]) -> list[Rows]:
    from engine.db import driver_connection

    driver = await driver_connection(conn)
    async with driver.pipeline():
        cursors = [await driver.execute(statement, params) for statement in statements]
    return [await cursor.fetchall() for cursor in cursors]


async def load_ledgers(
    conn: AsyncConnection, customer_ids: Sequence[str] | None = None
) -> list[CustomerLedger]:
    """full_ledgers on the caller's SQLAlchemy connection, in its transaction."""
    if customer_ids is not None and not customer_ids:
        return []
    return assemble_ledgers(await _run_async(conn, LEDGER_STATEMENTS, _ids(customer_ids)))


async def load_ledger(conn: AsyncConnection, customer_id: str) -> CustomerLedger:
    found = await load_ledgers(conn, [customer_id])
    if not found:
        raise UnknownCustomer(f"no customer {customer_id!r} in the ledger")
    return found[0]


async def _fingerprint(conn: AsyncConnection) -> str:
    (rows,) = await _run_async(conn, (_BOOK_FINGERPRINT,), {})
    return str(rows[0][0])


async def load_price_book(conn: AsyncConnection) -> PriceBook:
    """The plans, coupons and tax rates as they stand (the same object while they have not changed)."""
    global _last_book
    fingerprint = await _fingerprint(conn)
    if _last_book is not None and _last_book[0] == fingerprint:
        return _last_book[1]
    book = assemble_price_book(await _run_async(conn, PRICE_BOOK_STATEMENTS, {}))
    # Kept only when nothing changed while it was read (each statement sees the latest commit), so the
    # fingerprint always names the rows it was taken from.
    if await _fingerprint(conn) == fingerprint:
        _last_book = (fingerprint, book)
    return book
