"""Writing the price book and scenario ledgers to the database (async SQLAlchemy Core, bulk inserts).

Rows for many ledgers are collected per table, parents before children, and each batch goes in as ONE
statement: INSERT … SELECT FROM unnest(<one array per column>). A plain executemany sends one INSERT per
row, and with prepared statements off (prepare_threshold=None, for pgbouncer) the server parses each of
them: writing 10,000 customers (~230,000 rows) took ~20 s that way and takes ~9 s with unnest, most of
it the server's foreign-key checks. The arrays are typed from engine.schema's columns.
The caller owns the transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from itertools import chain
from typing import Any

from sqlalchemy import Insert, Table, bindparam, func, insert, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from engine import schema as t
from engine.billing import add_months
from engine.db import driver_connection
from engine.interchange import line_record, to_record
from engine.ledger_load import load_records, records_as_lines
from engine.model import Invoice, PriceBook
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from scenarios.faults import ScenarioLedger

Row = dict[str, Any]
BATCH_ROWS = 10_000  # rows per statement: bounded message size, few round trips

DEFAULT_PRICE_BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))


def bulk_insert(table: Table, rows: Sequence[Row]) -> Insert:
    """One INSERT for many rows: each column travels as one typed array, unnested side by side."""
    columns = [column for column in table.c if column.name in rows[0]]
    arrays = [
        bindparam(f"{column.name}_values", [row[column.name] for row in rows], type_=ARRAY(column.type))
        for column in columns
    ]
    source = func.unnest(*arrays).table_valued(*(c.name for c in columns)).render_derived(name="source")
    return insert(table).from_select([c.name for c in columns], select(*(source.c[c.name] for c in columns)))


async def _insert(conn: AsyncConnection, table: Table, rows: Sequence[Row]) -> None:
    for start in range(0, len(rows), BATCH_ROWS):
        await conn.execute(bulk_insert(table, rows[start : start + BATCH_ROWS]))


async def write_price_book(conn: AsyncConnection, book: PriceBook = DEFAULT_PRICE_BOOK) -> None:
    """Insert plans, coupons and tax rates (into tables the caller has emptied)."""
    await _insert(
        conn,
        t.plans,
        [
            {"id": p.id, "name": p.name, "interval": p.interval, "unit_price": p.unit_price}
            for p in book.plans.values()
        ],
    )
    await _insert(
        conn,
        t.coupons,
        [
            {"id": c.id, "kind": c.kind, "value": c.value, "duration_months": c.duration_months}
            for c in book.coupons.values()
        ],
    )
    await _insert(
        conn,
        t.tax_rates,
        [
            {
                "code": r.code,
                "region": r.region,
                "rate": r.rate,
                "valid_from": r.valid_from,
                "valid_to": r.valid_to,
            }
            for r in book.tax_rates
        ],
    )


@dataclass
class LedgerRows:
    """Rows for the ledger tables, in the order they must be inserted (parents first)."""

    customers: list[Row] = field(default_factory=list)
    subscriptions: list[Row] = field(default_factory=list)
    subscription_events: list[Row] = field(default_factory=list)
    invoices: list[Row] = field(default_factory=list)
    invoice_lines: list[Row] = field(default_factory=list)
    payments: list[Row] = field(default_factory=list)

    def by_table(self) -> Iterator[tuple[Table, list[Row]]]:
        yield t.customers, self.customers
        yield t.subscriptions, self.subscriptions
        yield t.subscription_events, self.subscription_events
        yield t.invoices, self.invoices
        yield t.invoice_lines, self.invoice_lines
        yield t.payments, self.payments


@dataclass(frozen=True)
class SubscriptionSnapshot:
    """The subscriptions row: the state after replaying every event (the events stay the facts)."""

    plan_id: str
    quantity: int
    status: str
    current_period_start: date
    current_period_end: date


def subscription_snapshot(ledger: ScenarioLedger) -> SubscriptionSnapshot:
    sub = ledger.subscription
    events = sorted(sub.events, key=lambda ev: ev.effective_at)
    create = next(ev for ev in events if ev.type == "create")
    plan_id, quantity, status = str(create.payload["plan_id"]), int(create.payload["quantity"]), "active"
    for event in events:
        plan_id = str(event.payload.get("to_plan", plan_id))
        quantity = int(event.payload.get("to_quantity", quantity))
        status = {"cancel": "canceled", "pause": "paused", "resume": "active"}.get(event.type, status)
    # The current period is the latest one invoiced; a duplicate ("D") copy is not a period of its own.
    periods = [inv for inv in ledger.invoices if inv.subscription_id == sub.id and not inv.id.endswith("D")]
    if periods:
        last = max(periods, key=lambda inv: inv.period_start)
        start, end = last.period_start, last.period_end
    else:
        months = 12 if ledger.plans[plan_id].interval == "year" else 1
        start, end = sub.start_date, add_months(sub.start_date, months, sub.billing_anchor_day)
    return SubscriptionSnapshot(plan_id, quantity, status, start, end)


def _invoice_row(invoice: Invoice) -> Row:
    return {
        "id": invoice.id,
        "customer_id": invoice.customer_id,
        "subscription_id": invoice.subscription_id,
        "period_start": invoice.period_start,
        "period_end": invoice.period_end,
        "issued_at": invoice.issued_at,
        "status": invoice.status,
        "subtotal": invoice.subtotal,
        "discount": invoice.discount,
        "tax": invoice.tax,
        "total": invoice.total,
        "currency": invoice.currency,
    }


def _line_rows(invoice: Invoice) -> Iterator[Row]:
    for number, line in enumerate(invoice.lines, start=1):
        yield {
            "id": f"{invoice.id}-L{number}",
            "invoice_id": invoice.id,
            "line_no": number,
            "kind": line.kind,
            "description": line.description,
            "quantity": line.quantity,
            "unit_amount": line.unit_amount,
            "amount": line.amount,
            "period_start": line.period_start,
            "period_end": line.period_end,
            "tax_code": line.tax_code,
        }


def contact_email(customer_id: str, name: str) -> str:
    """The demo ledger's address for a customer: its name in ASCII where it has one (Helio Freight-004 →
    billing@helio-freight-004.example.com), else its id (星河咨询-003 → billing@c-0003.example.com)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not re.search(r"[a-z]", slug):
        slug = customer_id.lower()
    return f"billing@{slug}.example.com"


def add_ledger_rows(rows: LedgerRows, ledger: ScenarioLedger) -> None:
    customer, sub = ledger.customer, ledger.subscription
    rows.customers.append(
        {
            "id": customer.id,
            "name": customer.name,
            "country": customer.country,
            "currency": customer.currency,
            "tax_region": customer.tax_region,
            "contact_email": contact_email(customer.id, customer.name),
        }
    )
    snapshot = subscription_snapshot(ledger)
    rows.subscriptions.append(
        {
            "id": sub.id,
            "customer_id": sub.customer_id,
            "plan_id": snapshot.plan_id,
            "quantity": snapshot.quantity,
            "status": snapshot.status,
            "start_date": sub.start_date,
            "current_period_start": snapshot.current_period_start,
            "current_period_end": snapshot.current_period_end,
            "billing_anchor_day": sub.billing_anchor_day,
            "coupon_id": sub.coupon_id,
        }
    )
    rows.subscription_events.extend(
        {
            "id": ev.id,
            "subscription_id": sub.id,
            "type": ev.type,
            "effective_at": ev.effective_at,
            "payload": ev.payload,
        }
        for ev in sub.events
    )
    for invoice in ledger.invoices:
        rows.invoices.append(_invoice_row(invoice))
        rows.invoice_lines.extend(_line_rows(invoice))
    rows.payments.extend(
        {
            "id": p.id,
            "invoice_id": p.invoice_id,
            "amount": p.amount,
            "status": p.status,
            "attempted_at": p.attempted_at,
            "gateway_ref": p.gateway_ref,
        }
        for p in ledger.payments
    )


def ledger_rows(ledgers: Iterable[ScenarioLedger]) -> LedgerRows:
    rows = LedgerRows()
    for ledger in ledgers:
        add_ledger_rows(rows, ledger)
    return rows


async def write_ledgers(conn: AsyncConnection, ledgers: Iterable[ScenarioLedger]) -> LedgerRows:
    """Insert customers, subscriptions (snapshot), events, invoices (with header figures), lines
    (ids "<invoice>-L<n>") and payments. The price book must already be there. Returns what it wrote."""
    rows = ledger_rows(ledgers)
    for table, table_rows in rows.by_table():
        await _insert(conn, table, table_rows)
    return rows


def price_book_records(book: PriceBook = DEFAULT_PRICE_BOOK) -> Iterator[dict[str, Any]]:
    for plan in book.plans.values():
        yield to_record("plans", vars(plan))
    for coupon in book.coupons.values():
        yield to_record("coupons", vars(coupon))
    for rate in book.tax_rates:
        yield to_record("tax_rates", vars(rate))


def ledger_records(ledgers: Iterable[ScenarioLedger]) -> Iterator[dict[str, Any]]:
    """Each scenario ledger as billsleuth-ledger/1 records (the rows add_ledger_rows would insert)."""
    for ledger in ledgers:
        rows = LedgerRows()
        add_ledger_rows(rows, ledger)
        currency = ledger.customer.currency
        for table, table_rows in rows.by_table():
            if table.name == "invoice_lines":
                continue
            for row in table_rows:
                record = to_record(table.name, row, currency)
                if table.name == "invoices":
                    record["lines"] = [
                        line_record(line, currency)
                        for line in rows.invoice_lines
                        if line["invoice_id"] == row["id"]
                    ]
                yield record


class LedgerNotWritten(RuntimeError):
    """The generator built records the ledger format refuses: a bug in the generator, named in full."""


async def load_dataset(
    conn: AsyncConnection, ledgers: Iterable[ScenarioLedger], book: PriceBook = DEFAULT_PRICE_BOOK
) -> None:
    """The price book and the ledgers through `ledger import`'s own loader (billsleuth-ledger/1 records,
    checked and upserted as any imported ledger), into tables the caller has emptied, in its transaction:
    every seed exercises the format."""
    records = chain(price_book_records(book), ledger_records(ledgers))
    result = await load_records(await driver_connection(conn), ["seed"], records_as_lines(records))
    if not result.ok:
        raise LedgerNotWritten("; ".join(result.errors[:3]))
