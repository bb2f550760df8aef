"""Statements written for plain psycopg (the ledger reader, the findings record) run on the psycopg
connection under a SQLAlchemy one, in its transaction: SQLAlchemy must know that transaction is open, or
its commit() would do nothing and leave the connection inside it."""

from __future__ import annotations

from psycopg.pq import TransactionStatus
from sqlalchemy.ext.asyncio import AsyncEngine

from engine.db import driver_connection
from engine.ledger import load_ledger


async def test_reading_the_ledger_on_a_fresh_connection_begins_its_transaction(
    seeded_db: AsyncEngine,
) -> None:
    async with seeded_db.connect() as conn:
        await load_ledger(conn, "C-0001")
        assert conn.in_transaction()  # as a statement run through SQLAlchemy would have begun it
        driver = await driver_connection(conn)
        await conn.commit()
        assert driver.info.transaction_status == TransactionStatus.IDLE
