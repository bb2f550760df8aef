"""Running the auditor over the ledger in the database: one customer, or every customer in chunks.

A sweep works a chunk of customers (1,000 by default) at a time, so memory stays flat however large the
ledger is, and in two passes:
1. screen: customers, subscriptions with their events, and invoice headers with each invoice's paid and
   credited sums (added up by Postgres). That is all the rules need to tell whether any invoice was paid
   beyond what is due (agent.auditor.has_overpaid_invoice).
2. audit: whole ledgers (lines and payments, engine.ledger.load_ledgers) only for the customers the
   screen flagged, and the full auditor on them.
Invoice lines are most of a ledger's rows and almost always correct, so the second pass reads a few
percent of them. With several workers each chunk is screened and audited in a process of its own, on a
connection of its own; only findings travel back.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from sqlalchemy import ARRAY, Text, any_, bindparam, func, pool, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.auditor import Finding, audit_customer, has_overpaid_invoice
from engine import schema as t
from engine.db import create_engine
from engine.ledger import customer_ids, load_ledger, load_ledgers, load_price_book
from engine.model import (
    BillingError,
    CreditNote,
    Customer,
    CustomerLedger,
    Event,
    Invoice,
    Payment,
    PriceBook,
    Subscription,
)

CHUNK_SIZE = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class AuditReport:
    as_of: date
    customers: int = 0
    findings: list[Finding] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (customer id, why the rules refused it)

    def merge(self, other: AuditReport) -> None:
        self.customers += other.customers
        self.findings += other.findings
        self.refused += other.refused


async def latest_issue_date(conn: AsyncConnection) -> date | None:
    """The default date to judge up to: the latest invoice issue date in the ledger."""
    return (await conn.execute(select(func.max(t.invoices.c.issued_at)))).scalar()


def _audit(ledgers: Sequence[CustomerLedger], book: PriceBook, as_of: date) -> AuditReport:
    report = AuditReport(as_of, customers=len(ledgers))
    for ledger in ledgers:
        try:
            report.findings += audit_customer(ledger, book, as_of)
        except BillingError as error:  # one history the rules refuse must not stop the sweep
            report.refused.append((ledger.customer.id, str(error)))
    return report


async def audit_one(conn: AsyncConnection, customer_id: str, as_of: date) -> AuditReport:
    """One customer's findings; engine.ledger.UnknownCustomer when there is no such customer."""
    ledger = await load_ledger(conn, customer_id)
    return _audit([ledger], await load_price_book(conn), as_of)


# ---------- the screen: headers and sums only ----------


async def _header_ledgers(conn: AsyncConnection, ids: Sequence[str]) -> list[CustomerLedger]:
    """Ledgers without invoice lines; each invoice's succeeded payments and issued credit notes summed."""
    # One array parameter rather than an IN list of a thousand: the statement stays small and the same.
    chunk = bindparam("chunk", list(ids), type_=ARRAY(Text))
    customers = [
        Customer(r.id, r.name, r.country, r.currency, r.tax_region)
        for r in await conn.execute(select(t.customers).where(t.customers.c.id == any_(chunk)))
    ]
    subs_of = t.subscriptions.c.customer_id == any_(chunk)
    events: dict[str, list[Event]] = defaultdict(list)
    event_rows = await conn.execute(
        select(t.subscription_events)
        .join(t.subscriptions, t.subscriptions.c.id == t.subscription_events.c.subscription_id)
        .where(subs_of)
    )
    for r in event_rows:
        events[r.subscription_id].append(Event(r.id, r.type, r.effective_at, dict(r.payload)))
    subscriptions: dict[str, list[Subscription]] = defaultdict(list)
    for r in await conn.execute(select(t.subscriptions).where(subs_of)):
        subscriptions[r.customer_id].append(
            Subscription(r.id, r.customer_id, r.start_date, r.billing_anchor_day, r.coupon_id, events[r.id])
        )

    invoices, payments, notes = defaultdict(list), defaultdict(list), defaultdict(list)
    inv = t.invoices.c
    paid = (
        select(func.sum(t.payments.c.amount))
        .where(t.payments.c.invoice_id == inv.id, t.payments.c.status == "succeeded")
        .scalar_subquery()
    )
    credited = (
        select(func.sum(t.credit_notes.c.amount))
        .where(t.credit_notes.c.invoice_id == inv.id, t.credit_notes.c.status == "issued")
        .scalar_subquery()
    )
    header = select(
        inv.id, inv.customer_id, inv.subscription_id, inv.period_start, inv.period_end, inv.issued_at,
        inv.currency, inv.status, paid.label("paid"), credited.label("credited"),
    ).where(inv.customer_id == any_(chunk))  # fmt: skip
    for r in await conn.execute(header):
        invoices[r.customer_id].append(
            Invoice(
                r.id, r.customer_id, r.subscription_id, r.period_start, r.period_end, r.issued_at, r.currency
            )
        )
        if r.paid is not None:
            payments[r.customer_id].append(Payment(f"{r.id}:paid", r.id, r.paid, "succeeded", _EPOCH, ""))
        if r.credited is not None:
            notes[r.customer_id].append(CreditNote(f"{r.id}:credited", r.id, r.credited, "", "issued"))
    return [
        CustomerLedger(c, subscriptions[c.id], invoices[c.id], payments[c.id], notes[c.id]) for c in customers
    ]


async def _audit_chunk(
    conn: AsyncConnection, ids: Sequence[str], book: PriceBook, as_of: date
) -> AuditReport:
    flagged: list[str] = []
    refused: list[tuple[str, str]] = []
    for ledger in await _header_ledgers(conn, ids):
        try:
            if has_overpaid_invoice(ledger, book, as_of):
                flagged.append(ledger.customer.id)
        except BillingError as error:
            refused.append((ledger.customer.id, str(error)))
    report = _audit(await load_ledgers(conn, flagged), book, as_of) if flagged else AuditReport(as_of)
    report.customers = len(ids)
    report.refused += refused
    return report


def _chunks(ids: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


async def _audit_chunk_alone(url: str, ids: list[str], as_of: date) -> AuditReport:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            return await _audit_chunk(conn, ids, await load_price_book(conn), as_of)
    finally:
        await engine.dispose()


def _worker(url: str, ids: list[str], as_of: date) -> AuditReport:
    return asyncio.run(_audit_chunk_alone(url, ids, as_of))


def default_workers() -> int:
    """One core is left to Postgres, which serves every worker: on 2 cores a second worker measured no
    faster (the screen's queries and the rules' arithmetic compete for the same cores), only bigger."""
    return max(1, min(4, (os.cpu_count() or 1) - 1))


async def audit_all(
    url: str, as_of: date | None = None, chunk_size: int = CHUNK_SIZE, workers: int = 1
) -> AuditReport:
    """Every customer's findings, in customer order. as_of defaults to the latest invoice issue date."""
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            as_of = as_of or await latest_issue_date(conn) or date.today()
            ids = await customer_ids(conn)
            report = AuditReport(as_of)
            if workers <= 1 or len(ids) <= chunk_size:
                book = await load_price_book(conn)
                for chunk in _chunks(ids, chunk_size):
                    report.merge(await _audit_chunk(conn, chunk, book, as_of))
                return report
    finally:
        await engine.dispose()
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(max_workers=workers) as executor:
        parts = [
            loop.run_in_executor(executor, _worker, url, chunk, as_of) for chunk in _chunks(ids, chunk_size)
        ]
        for part in await asyncio.gather(*parts):
            report.merge(part)
    return report
