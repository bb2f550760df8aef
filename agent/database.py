"""The database a process needs: the Alembic schema and the graph checkpointer's tables, both at the
versions this code knows.

Who changes them: `billsleuth db upgrade` (the Procfile's release) always, through `upgrade_all`. Any
other command and the bot upgrade by themselves only on the embedded server (no DATABASE_URL), which is
this installation's own; a shared database is upgraded on purpose, once, by a release, so there they
check and refuse in one line (`SchemaNotReady`) rather than change a schema other processes use.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from engine.migrate import Revision

# pg_advisory_lock key: two processes upgrading at once take turns (the checkpointer's setup is not
# safe to race: both would CREATE TABLE).
UPGRADE_LOCK = "billsleuth:prepare"

# The heads this code needs. A command on a current database (nearly always) checks them with one query,
# without importing Alembic or LangGraph, which cost a read command most of its start-up time; any other
# answer takes the full path. tests/test_schema_upgrades.py holds them to Alembic's head and the saver's
# MIGRATIONS, so a new migration that forgets them fails the suite.
SCHEMA_HEAD = "0014"
CHECKPOINT_HEAD = 9


class SchemaNotReady(Exception):
    """The database is behind this code and may not be upgraded here, or ahead of it: one line to show."""


async def revisions(libpq_url: str) -> list[Revision]:
    """The schema's and the checkpoint tables' standing; changes nothing."""
    from agent.checkpoint import checkpoint_revision
    from engine import migrate

    schema = await asyncio.to_thread(migrate.schema_revision, libpq_url)
    return [schema, await checkpoint_revision(libpq_url)]


async def upgrade_all(libpq_url: str) -> None:
    """Bring the schema and the checkpoint tables to this code's head, one process at a time. A database
    newer than this code is refused, not touched."""
    from agent.checkpoint import setup_checkpointer
    from engine import migrate

    async with await psycopg.AsyncConnection.connect(libpq_url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (UPGRADE_LOCK,))
        try:
            _refuse_newer(await revisions(libpq_url))
            await asyncio.to_thread(migrate.upgrade, libpq_url)
            await setup_checkpointer(libpq_url)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (UPGRADE_LOCK,))


async def ensure_ready(libpq_url: str) -> None:
    """Make sure this process can use the database: upgrade it on the embedded server, else refuse
    (SchemaNotReady) when any part is behind or ahead."""
    if await at_heads(libpq_url):
        return
    standing = await revisions(libpq_url)
    _refuse_newer(standing)
    behind = [revision for revision in standing if revision.behind]
    if not behind:
        return
    from engine.db import embedded  # SQLAlchemy and pydantic come with it: not on the common path

    if not embedded():
        raise SchemaNotReady(behind[0].problem())
    await upgrade_all(libpq_url)


def _refuse_newer(standing: list[Revision]) -> None:
    for revision in standing:
        if revision.newer:
            raise SchemaNotReady(revision.problem())


async def at_heads(libpq_url: str) -> bool:
    """Whether the schema and the checkpoint tables stand exactly at this code's heads (one round trip).
    A URL that is not Postgres's is refused first, in DATABASE_URL's terms (DatabaseUrlError)."""
    if not libpq_url.startswith(("postgresql://", "postgres://")):
        from engine.db import sqlalchemy_url  # SQLAlchemy only to word the refusal (or accept its forms)

        sqlalchemy_url(libpq_url)
    async with await psycopg.AsyncConnection.connect(libpq_url, autocommit=True) as conn:
        tables = await conn.execute(
            "SELECT to_regclass('public.alembic_version') IS NOT NULL"
            " AND to_regclass('public.checkpoint_migrations') IS NOT NULL"
        )
        row = await tables.fetchone()
        if not (row and row[0]):
            return False
        heads = await conn.execute(
            "SELECT (SELECT array_agg(version_num) FROM alembic_version),"
            " (SELECT max(v) FROM checkpoint_migrations)"
        )
        standing = await heads.fetchone()
    return standing is not None and standing[0] == [SCHEMA_HEAD] and standing[1] == CHECKPOINT_HEAD
