"""Every Postgres advisory lock the house takes, named once here with its key, and the one way to take it.

A key is either text Postgres hashes (`hashtext`) or a fixed bigint. The values are a contract between
processes: an old process and a new one running side by side must still exclude each other, so a key
below never changes once it has shipped (tests/test_locks.py holds them to their literal values).

Three ways to hold one:
- transaction-scoped (`xact_lock`, `try_xact_lock`): released by COMMIT or ROLLBACK, so it cannot leak;
- session-level (`session_lock`, `try_session_lock`, `session_unlock`): held across transactions, for a
  run that commits as it goes (a graph run, a migration); released explicitly or when the connection ends;
- on a plain psycopg connection (`psycopg_session_lock`), for the code that runs before SQLAlchemy does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy import ColumnElement, Connection, Select
    from sqlalchemy.ext.asyncio import AsyncConnection


@dataclass(frozen=True)
class LockKey:
    """One advisory lock: text hashed by Postgres (`hashtext`), or a fixed bigint."""

    value: str | int

    def argument(self) -> ColumnElement[int]:
        """The lock functions' argument, as SQL."""
        from sqlalchemy import BigInteger, bindparam, func  # see `_call`

        if isinstance(self.value, int):
            return bindparam("lock_key", self.value, type_=BigInteger)
        return func.hashtext(bindparam("lock_key", self.value))


# ---- the locks ----

# The daily credit budget (approvals.limits): two issuers never both see "room left". "BSBUDGET" in ASCII.
DAILY_BUDGET = LockKey(0x4253_4255_4447_4554)
# Alembic's migration run (migrations/env.py): two processes upgrading at once take turns.
MIGRATION = LockKey(7_340_001)
# `db upgrade` as a whole (agent.database): the checkpointer's setup is not safe to race (both CREATE TABLE).
UPGRADE = LockKey("billsleuth:prepare")
# The ledger is rebuilt (`seed`) or loaded (`ledger import`) by one process at a time.
LEDGER = LockKey("billsleuth.seed")
# One writer of the stored policy at a time: two bots starting together do not interleave.
POLICY = LockKey("billsleuth:policy")
# One seal posted at a time: two processes never post the same head twice.
SEAL = LockKey("billsleuth:seal")
# One bot process looks for a due seal at a time; the others skip the round.
SEAL_DUE = LockKey("billsleuth:seal-due")
# One digest claims the day's findings at a time, across processes.
FINDINGS_DIGEST = LockKey("billsleuth:findings-digest")
# One bot process posts the day's findings digest.
DAILY_FINDINGS_SWEEP = LockKey("billsleuth:daily-findings-sweep")
# One bot process runs the periodic recovery round; the others skip it.
RECOVER = LockKey("billsleuth:recover")


def case(case_id: str) -> LockKey:
    """One graph run per case across processes (agent.cases)."""
    return LockKey(f"case:{case_id}")


def delivery(case_id: str) -> LockKey:
    """One process at a time delivers a case's outbox changes to Slack."""
    return LockKey(f"billsleuth:deliver:{case_id}")


def card(credit_note_id: str) -> LockKey:
    """One redraw of a credit note's card at a time."""
    return LockKey(f"billsleuth:card:{credit_note_id}")


def home(user_id: str) -> LockKey:
    """One publish of a person's App Home at a time."""
    return LockKey(f"billsleuth:home:{user_id}")


def digest_message(channel: str, ts: str) -> LockKey:
    """One redraw of a posted findings digest at a time."""
    return LockKey(f"billsleuth:findings-digest:{channel}:{ts}")


def sweep_plan(day: date) -> LockKey:
    """The first process to ask makes the day's shard plan; the others wait and read it."""
    return LockKey(f"billsleuth:sweep-plan:{day.isoformat()}")


def sweep_shard(day: date, shard: int) -> LockKey:
    """One process audits a shard of the day's run."""
    return LockKey(f"billsleuth:sweep-shard:{day.isoformat()}:{shard}")


# ---- taking them ----


def _call(function: str, key: LockKey) -> Select[tuple[object]]:
    # SQLAlchemy is imported when a lock is taken through it, not with this module: the audit and the
    # sweep read and record over plain psycopg (tests/test_cli_imports.py), and take their locks there.
    from sqlalchemy import func, select

    return select(getattr(func, function)(key.argument()))


async def xact_lock(conn: AsyncConnection, key: LockKey) -> None:
    """Wait for the lock; it is held until the caller's transaction ends."""
    await conn.execute(_call("pg_advisory_xact_lock", key))


async def try_xact_lock(conn: AsyncConnection, key: LockKey) -> bool:
    """Take the lock until the transaction ends if it is free; False (at once) when another holds it."""
    return bool((await conn.execute(_call("pg_try_advisory_xact_lock", key))).scalar_one())


async def session_lock(conn: AsyncConnection, key: LockKey) -> None:
    """Wait for the lock; it is held until `session_unlock` or the end of the connection."""
    await conn.execute(_call("pg_advisory_lock", key))


async def try_session_lock(conn: AsyncConnection, key: LockKey) -> bool:
    """Take the lock for the session if it is free; False (at once) when another holds it."""
    return bool((await conn.execute(_call("pg_try_advisory_lock", key))).scalar_one())


async def session_unlock(conn: AsyncConnection, key: LockKey) -> None:
    await conn.execute(_call("pg_advisory_unlock", key))


def session_lock_sync(conn: Connection, key: LockKey) -> None:
    """`session_lock` on a synchronous connection (Alembic's)."""
    conn.execute(_call("pg_advisory_lock", key))


def session_unlock_sync(conn: Connection, key: LockKey) -> None:
    conn.execute(_call("pg_advisory_unlock", key))


@asynccontextmanager
async def psycopg_session_lock(conn: psycopg.AsyncConnection[object], key: LockKey) -> AsyncIterator[None]:
    """Hold the lock on a plain psycopg connection (autocommit) for the block."""
    argument = "%s" if isinstance(key.value, int) else "hashtext(%s)"
    await conn.execute(f"SELECT pg_advisory_lock({argument})", (key.value,))
    try:
        yield
    finally:
        await conn.execute(f"SELECT pg_advisory_unlock({argument})", (key.value,))
