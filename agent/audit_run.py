"""Running the auditor over the ledger in the database: one customer, or all of them in chunks.

Customers are loaded a chunk at a time (engine.ledger.load_ledgers: a fixed number of queries per chunk),
so memory stays flat however large the ledger is. With several workers, each chunk is loaded AND audited
in a worker process of its own (its own connection), so the loading, which is most of the work, runs in
parallel too; only the findings travel back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy import func, pool, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.auditor import Finding, audit_customer
from engine import schema as t
from engine.db import create_engine
from engine.ledger import customer_ids, load_ledger, load_ledgers, load_price_book
from engine.model import BillingError, CustomerLedger, PriceBook

CHUNK_SIZE = 1_000


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
        except BillingError as error:  # one malformed history must not stop the sweep
            report.refused.append((ledger.customer.id, str(error)))
    return report


async def audit_one(conn: AsyncConnection, customer_id: str, as_of: date) -> AuditReport:
    """One customer's findings; engine.ledger.UnknownCustomer when there is no such customer."""
    ledger = await load_ledger(conn, customer_id)
    return _audit([ledger], await load_price_book(conn), as_of)


async def _audit_chunk(
    conn: AsyncConnection, ids: Sequence[str], book: PriceBook, as_of: date
) -> AuditReport:
    return _audit(await load_ledgers(conn, list(ids)), book, as_of)


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
    return max(1, min(4, os.cpu_count() or 1))


async def audit_all(
    url: str, as_of: date | None = None, chunk_size: int = CHUNK_SIZE, workers: int = 1
) -> AuditReport:
    """Every customer's findings. as_of defaults to the latest invoice issue date in the ledger."""
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
        futures = [
            loop.run_in_executor(executor, _worker, url, chunk, as_of) for chunk in _chunks(ids, chunk_size)
        ]
        for part in await asyncio.gather(*futures):
            report.merge(part)
    return report
