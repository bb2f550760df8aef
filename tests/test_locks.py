"""engine/locks.py: every advisory lock's key keeps its shipped value, so an old process and a new one still
exclude each other, and each way of taking a lock excludes the raw SQL an old process runs."""

from __future__ import annotations

from datetime import date

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from engine import locks
from engine.db import autocommit
from engine.locks import LockKey

DAY = date(2026, 12, 2)

# The values as they shipped, spelled out: changing one breaks the exclusion with a running old process.
SHIPPED: list[tuple[LockKey, str | int]] = [
    (locks.DAILY_BUDGET, 0x4253_4255_4447_4554),
    (locks.MIGRATION, 7_340_001),
    (locks.UPGRADE, "billsleuth:prepare"),
    (locks.LEDGER, "billsleuth.seed"),
    (locks.POLICY, "billsleuth:policy"),
    (locks.SEAL, "billsleuth:seal"),
    (locks.SEAL_DUE, "billsleuth:seal-due"),
    (locks.FINDINGS_DIGEST, "billsleuth:findings-digest"),
    (locks.DAILY_FINDINGS_SWEEP, "billsleuth:daily-findings-sweep"),
    (locks.RECOVER, "billsleuth:recover"),
    (locks.case("CASE-0007"), "case:CASE-0007"),
    (locks.delivery("CASE-0007"), "billsleuth:deliver:CASE-0007"),
    (locks.card("CN-0001"), "billsleuth:card:CN-0001"),
    (locks.home("U1"), "billsleuth:home:U1"),
    (locks.digest_message("C1", "1.5"), "billsleuth:findings-digest:C1:1.5"),
    (locks.sweep_plan(DAY), "billsleuth:sweep-plan:2026-12-02"),
    (locks.sweep_shard(DAY, 3), "billsleuth:sweep-shard:2026-12-02:3"),
]


def test_every_key_keeps_its_shipped_value() -> None:
    for key, value in SHIPPED:
        assert key.value == value


def _old_lock_sql(value: str | int) -> str:
    """How the code before engine/locks.py took the lock, session-level."""
    return "pg_try_advisory_lock(hashtext(:key))" if isinstance(value, str) else "pg_try_advisory_lock(:key)"


async def test_each_way_of_taking_a_lock_excludes_an_old_process(db: AsyncEngine) -> None:
    hashed, fixed = (locks.case("CASE-0001"), "case:CASE-0001"), (locks.DAILY_BUDGET, 0x4253_4255_4447_4554)
    for key, value in [hashed, fixed]:
        old_takes = text(f"SELECT {_old_lock_sql(value)}")
        async with autocommit(db) as old, autocommit(db) as new:
            assert (await old.execute(old_takes, {"key": value})).scalar_one()
            assert not await locks.try_session_lock(new, key)
            async with db.begin() as transaction:
                assert not await locks.try_xact_lock(transaction, key)
            await old.execute(text("SELECT pg_advisory_unlock_all()"))
            assert await locks.try_session_lock(new, key)
            assert not (await old.execute(old_takes, {"key": value})).scalar_one()
            await locks.session_unlock(new, key)
            async with db.begin() as transaction:
                assert await locks.try_xact_lock(transaction, key)
                assert not (await old.execute(old_takes, {"key": value})).scalar_one()
            assert (await old.execute(old_takes, {"key": value})).scalar_one()
            await old.execute(text("SELECT pg_advisory_unlock_all()"))


async def test_the_psycopg_lock_is_held_for_the_block_only(db: AsyncEngine, db_url: str) -> None:
    connecting = psycopg.AsyncConnection.connect(db_url, autocommit=True)
    async with await connecting as conn, autocommit(db) as other:
        async with locks.psycopg_session_lock(conn, locks.UPGRADE):
            assert not await locks.try_session_lock(other, locks.UPGRADE)
        assert await locks.try_session_lock(other, locks.UPGRADE)
        await locks.session_unlock(other, locks.UPGRADE)
