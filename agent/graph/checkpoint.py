"""Graph checkpoints in Postgres: AsyncPostgresSaver on a psycopg AsyncConnectionPool.

The pool is built inside the running event loop, with autocommit (setup() needs it), dict rows (the saver
reads columns by name) and prepare_threshold=None (safe behind pgbouncer in transaction mode). Each
connection is checked as it leaves the pool: after a Postgres restart the pool still holds connections the
server has ended, and without the check the next graph run gets one and fails with AdminShutdown. The
check looks at the socket, not the server (engine.db.ended_by_the_server, as SQLAlchemy's pool does): an
empty query per checkout was a round trip per checkpoint read or write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from engine.db import ended_by_the_server
from engine.migrate import Revision


def _libpq(url: str) -> str:
    return "postgresql://" + url.removeprefix("postgres://") if url.startswith("postgres://") else url


@asynccontextmanager
async def open_checkpointer(libpq_url: str, max_size: int = 10) -> AsyncIterator[AsyncPostgresSaver]:
    pool = AsyncConnectionPool(
        conninfo=_libpq(libpq_url),
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": None},
        check=_replace_if_ended,  # a dead connection is replaced, not handed out
        open=False,
    )
    await pool.open(wait=True)
    try:
        yield AsyncPostgresSaver(pool)  # type: ignore[arg-type]
    finally:
        await pool.close()


async def _replace_if_ended(conn: psycopg.AsyncConnection) -> None:
    if ended_by_the_server(conn):
        await conn.close()  # closed, the pool replaces it instead of putting it back
        raise psycopg.OperationalError("the server ended this pooled connection")


async def setup_checkpointer(libpq_url: str) -> None:
    """Create or upgrade the saver's own tables (agent.database.upgrade_all runs it)."""
    async with open_checkpointer(libpq_url, max_size=1) as saver:
        await saver.setup()


async def checkpoint_revision(libpq_url: str) -> Revision:
    """Where the saver's tables stand. setup() numbers its migrations from 0 and records each one it
    applied in checkpoint_migrations: the highest recorded is the version, len(MIGRATIONS) - 1 the head."""
    head = len(AsyncPostgresSaver.MIGRATIONS) - 1
    async with await psycopg.AsyncConnection.connect(_libpq(libpq_url), autocommit=True) as conn:
        current = await _applied_version(conn)
    return Revision(
        "graph checkpoint schema",
        None if current is None else str(current),
        str(head),
        newer=current is not None and current > head,
    )


async def _applied_version(conn: psycopg.AsyncConnection) -> int | None:
    exists = await (await conn.execute("SELECT to_regclass('public.checkpoint_migrations')")).fetchone()
    if exists is None or exists[0] is None:
        return None
    row = await (await conn.execute("SELECT max(v) FROM checkpoint_migrations")).fetchone()
    return None if row is None else row[0]
