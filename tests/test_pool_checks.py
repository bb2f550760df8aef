"""A pooled connection the server has ended is replaced when it is checked out, in both pools (SQLAlchemy's
and the graph checkpointer's), without a round trip per checkout: the next caller gets a live one."""

from __future__ import annotations

import asyncio
import select

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.graph.checkpoint import open_checkpointer
from engine.db import create_engine, ended_by_the_server
from tests.pg import admin_execute, database_name


def _terminate_everything_but_me(db_url: str) -> None:
    """What a restart does to every connection of the database: the server ends it (FATAL, then EOF)."""
    admin_execute(
        db_url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{database_name(db_url)}' AND pid <> pg_backend_pid()",
    )


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _until_ended(connection: psycopg.AsyncConnection) -> None:
    """Until the server's goodbye (FATAL, then EOF) is on the socket, a moment after the backend ends."""
    poller = select.poll()
    poller.register(connection.pgconn.socket, select.POLLIN)
    for _ in range(100):
        if poller.poll(0):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the server never ended the connection")


async def test_a_live_idle_connection_is_not_taken_for_an_ended_one(db_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("SELECT 1")
        assert not ended_by_the_server(conn)


async def test_the_engine_replaces_a_pooled_connection_the_server_ended(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        before = await _backend_pid(engine)  # one connection, back in the pool
        async with engine.connect() as conn:
            pooled = (await conn.get_raw_connection()).driver_connection
        _terminate_everything_but_me(db_url)
        await _until_ended(pooled)
        after = await _backend_pid(engine)  # without the check: OperationalError (terminating connection)
        assert after != before
    finally:
        await engine.dispose()


async def test_the_checkpointer_replaces_a_pooled_connection_the_server_ended(db_url: str) -> None:
    async with open_checkpointer(db_url, max_size=1) as saver:
        pool = saver.conn
        async with pool.connection() as conn:  # type: ignore[union-attr]
            before = (await (await conn.execute("SELECT pg_backend_pid() AS pid")).fetchone())["pid"]
            pooled = conn
        _terminate_everything_but_me(db_url)
        await _until_ended(pooled)
        async with pool.connection() as conn:  # type: ignore[union-attr]
            after = (await (await conn.execute("SELECT pg_backend_pid() AS pid")).fetchone())["pid"]
        assert after != before
