"""The whole ledger, streamed customer by customer: plain psycopg, no SQLAlchemy, memory flat.

A sweep over every customer (`audit --all`, `sweep`) reads each table once through a server-side cursor,
all ordered by customer, and zips them into one customer's ledger at a time; only a batch of customers
is ever in memory. Plain psycopg, as engine.ledger, which reads whole ledgers: SQLAlchemy's row objects
and its import cost more than the rules themselves.

Screen rows carry no invoice lines: each invoice comes with its succeeded payments and issued credit
notes summed by Postgres (one Payment and one CreditNote per invoice standing for the sums), which is all
agent.auditor.audit.has_overpaid_invoice needs; engine.ledger.full_ledgers reads whole ledgers for the few it
flags.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from engine.ledger import REFUNDED
from engine.model import (
    CreditNote,
    Customer,
    CustomerLedger,
    Event,
    Invoice,
    Payment,
    Subscription,
)

if TYPE_CHECKING:
    import psycopg

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FETCH_ROWS = 5_000  # rows a server-side cursor hands over per round trip

# Every statement takes the same bounds, %(lo)s and %(hi)s (customer ids, inclusive; NULL: no bound), and
# orders its rows by customer id first. benchmarks/audit_sweep.py reads exactly these rows for its floor.
_IN_RANGE = "(%(lo)s::text IS NULL OR {col} >= %(lo)s) AND (%(hi)s::text IS NULL OR {col} <= %(hi)s)"
SCREEN_QUERIES: dict[str, str] = {
    "customers": "SELECT id, name, country, currency, tax_region, source FROM customers WHERE "
    + _IN_RANGE.format(col="id")
    + " ORDER BY id",
    "subscriptions": "SELECT customer_id, id, start_date, billing_anchor_day, coupon_id FROM subscriptions "
    "WHERE " + _IN_RANGE.format(col="customer_id") + " ORDER BY customer_id, id",
    "events": "SELECT s.customer_id, e.subscription_id, e.id, e.type, e.effective_at, e.payload "
    "FROM subscription_events e JOIN subscriptions s ON s.id = e.subscription_id WHERE "
    + _IN_RANGE.format(col="s.customer_id")
    + " ORDER BY s.customer_id, e.effective_at, e.id",
    # The sums by index probes, invoice by invoice in index order: rows flow from the first one on, with
    # no sort or hash of the whole ledger first (the same statement reads 3,000 or 100,000 customers).
    "invoices": "SELECT i.customer_id, i.id, i.subscription_id, i.period_start, i.period_end, i.issued_at, "
    "i.currency, i.status, i.created_at, "
    "(SELECT sum(p.amount - " + REFUNDED + ") FROM payments p WHERE p.invoice_id = i.id "
    "AND p.status = 'succeeded'), "
    "(SELECT sum(c.amount) FROM credit_notes c WHERE c.invoice_id = i.id AND c.status = 'issued') "
    "FROM invoices i WHERE "
    + _IN_RANGE.format(col="i.customer_id")
    + " ORDER BY i.customer_id, i.period_start",
}


def customer_ids(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM customers ORDER BY id")]


def _rows(
    conn: psycopg.Connection[Any], name: str, bounds: dict[str, str | None]
) -> Iterator[tuple[Any, ...]]:
    """One screen statement's rows through a server-side cursor (a few thousand rows at a time)."""
    with conn.cursor(name=f"screen_{name}") as cursor:
        cursor.execute(SCREEN_QUERIES[name], bounds)
        # A list at a time: iterating the cursor itself costs a Python call a row.
        while rows := cursor.fetchmany(FETCH_ROWS):
            yield from rows


def _by_customer(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    for customer_id, group in groupby(rows, key=itemgetter(0)):
        yield customer_id, list(group)


class _Follower:
    """A table's rows grouped by customer, advanced in step with the customers (both in id order)."""

    def __init__(self, rows: Iterator[tuple[Any, ...]]) -> None:
        self._groups = _by_customer(rows)
        self._next = next(self._groups, None)

    def take(self, customer_id: str) -> list[tuple[Any, ...]]:
        # Every stream comes in the database's order of customer ids, which is its collation's and need
        # not be Python's ("ZX-41" sorts after "acme-7" under en_US, before it byte by byte): a group is
        # taken when it is this customer's and otherwise left for a later one, never compared with `<`.
        # Rows of a customer the customers table lacks cannot exist (foreign keys).
        if self._next is None or self._next[0] != customer_id:
            return []
        rows = self._next[1]
        self._next = next(self._groups, None)
        return rows


def _screen_ledger(
    customer: tuple[Any, ...],
    subs: list[tuple[Any, ...]],
    events: list[tuple[Any, ...]],
    invoices: list[tuple[Any, ...]],
) -> CustomerLedger:
    events_of: dict[str, list[Event]] = defaultdict(list)
    for _, sub_id, event_id, kind, at, payload in events:
        events_of[sub_id].append(Event(event_id, kind, at, dict(payload)))
    subscriptions = [
        Subscription(sub_id, customer_id, start, anchor, coupon, events_of[sub_id])
        for customer_id, sub_id, start, anchor, coupon in subs
    ]
    headers, payments, notes = [], [], []
    # header: subscription, period start and end, issue date, currency, status
    for customer_id, inv_id, *header, created, paid, credited in invoices:
        headers.append(Invoice(inv_id, customer_id, *header, created_at=created))
        if paid is not None:
            payments.append(Payment(f"{inv_id}:paid", inv_id, paid, "succeeded", EPOCH, ""))
        if credited is not None:
            notes.append(CreditNote(f"{inv_id}:credited", inv_id, credited, "", "issued"))
    return CustomerLedger(Customer(*customer), subscriptions, headers, payments, notes)


def screen_batches(
    conn: psycopg.Connection[Any], batch: int, lo: str | None = None, hi: str | None = None
) -> Iterator[list[CustomerLedger]]:
    """Every customer with id in [lo, hi] (None: unbounded), in id order, `batch` ledgers at a time,
    without invoice lines. Runs in a transaction of its own on `conn` (the cursors live in it)."""
    bounds = {"lo": lo, "hi": hi}
    with conn.transaction():
        subs = _Follower(_rows(conn, "subscriptions", bounds))
        events = _Follower(_rows(conn, "events", bounds))
        invoices = _Follower(_rows(conn, "invoices", bounds))
        ledgers: list[CustomerLedger] = []
        for customer in _rows(conn, "customers", bounds):
            cid = customer[0]
            ledgers.append(_screen_ledger(customer, subs.take(cid), events.take(cid), invoices.take(cid)))
            if len(ledgers) == batch:
                yield ledgers
                ledgers = []
        if ledgers:
            yield ledgers
