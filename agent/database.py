"""The database a process needs: the Alembic schema and the graph checkpointer's tables, both at the
versions this code knows.

Who changes them: `billsleuth db upgrade` (the Procfile's release) always, through `upgrade_all`, as
the schema owner. Any other command and the bot upgrade by themselves only on the embedded server (no
DATABASE_URL), which is this installation's own; a shared database is upgraded on purpose, once, by a
release, so there they check and refuse in one line (`SchemaNotReady`) rather than change a schema other
processes use.

Who connects: the runtime (the bot, the everyday commands, the sweep, `mcp`) as a login in
`billsleuth_app` (or `billsleuth_reader`), never as the owner (migration 0011 holds the grants). On the
embedded server this module does it itself: it upgrades as the server's superuser, which owns the schema,
and hands the runtime the login `billsleuth_runtime`, a member of `billsleuth_app` (`ready_embedded`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg

from engine import locks

if TYPE_CHECKING:
    from engine.migrate import Revision

# The heads this code needs. A command on a current database (nearly always) checks them with one query,
# without importing Alembic or LangGraph, which cost a read command most of its start-up time; any other
# answer takes the full path. tests/test_schema_upgrades.py holds them to Alembic's head and the saver's
# MIGRATIONS, so a new migration that forgets them fails the suite.
SCHEMA_HEAD = "0016"
CHECKPOINT_HEAD = 9

APP_ROLE = "billsleuth_app"
READER_ROLE = "billsleuth_reader"
# The embedded server's runtime login (it trusts local connections: no password).
RUNTIME_LOGIN = "billsleuth_runtime"


class SchemaNotReady(Exception):
    """The database is behind this code and may not be upgraded here, or ahead of it: one line to show."""


class NotSchemaOwner(SchemaNotReady):
    """The login may not change the schema (it is not its owner): one line to show."""


async def revisions(libpq_url: str) -> list[Revision]:
    """The schema's and the checkpoint tables' standing; changes nothing."""
    from agent.graph.checkpoint import checkpoint_revision
    from engine import migrate

    schema = await asyncio.to_thread(migrate.schema_revision, libpq_url)
    return [schema, await checkpoint_revision(libpq_url)]


async def upgrade_all(libpq_url: str) -> None:
    """Bring the schema and the checkpoint tables to this code's head, one process at a time. A database
    newer than this code is refused, not touched."""
    from agent.graph.checkpoint import setup_checkpointer
    from engine import migrate

    connecting = psycopg.AsyncConnection.connect(libpq_url, autocommit=True)
    async with await connecting as conn, locks.psycopg_session_lock(conn, locks.UPGRADE):
        _refuse_newer(await revisions(libpq_url))
        await require_owner(conn, "billsleuth db upgrade")
        try:
            await asyncio.to_thread(migrate.upgrade, libpq_url)
            await setup_checkpointer(libpq_url)
            await _grant_checkpoint_tables(conn)
        except Exception as error:
            refused = insufficient_privilege(error)
            if refused is None:
                raise
            raise NotSchemaOwner(
                f"billsleuth db upgrade needs the schema owner's login: {refused}; "
                "set BILLSLEUTH_OWNER_DATABASE_URL to it"
            ) from None


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


async def require_owner(conn: psycopg.AsyncConnection, command: str) -> None:
    """Refuse, in one line, a login that does not own the schema (nor is a superuser): what `command`
    does (migrate, grant, truncate) is the owner's alone, and would otherwise fail half-way. On an empty
    database it is enough that the login may create tables there."""
    cursor = await conn.execute(
        "SELECT current_user, pg_get_userbyid(c.relowner),"
        " r.rolsuper OR pg_has_role(current_user, c.relowner, 'USAGE'),"
        " has_schema_privilege(current_schema(), 'CREATE')"
        " FROM pg_roles r LEFT JOIN pg_class c ON c.oid = to_regclass('alembic_version')"
        " WHERE r.rolname = current_user"
    )
    row = await cursor.fetchone()
    assert row is not None
    login, owner, owns, may_create = row
    if owner is not None and not owns:
        raise NotSchemaOwner(
            f"{command} needs the schema owner's login ({owner}), not {login}; "
            "set BILLSLEUTH_OWNER_DATABASE_URL to it"
        )
    if owner is None and not may_create:
        raise NotSchemaOwner(
            f"{command} needs the schema owner's login: {login} may not create tables here; "
            "set BILLSLEUTH_OWNER_DATABASE_URL to it"
        )


async def _grant_checkpoint_tables(conn: psycopg.AsyncConnection) -> None:
    """The checkpointer's setup makes its tables as the owner: the runtime writes checkpoints, and only
    reads the saver's version (every command checks it, `mcp` included). Migration 0011's default
    privileges cover tables created after it; this also covers those created before."""
    await conn.execute(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, checkpoint_writes"
        f" TO {APP_ROLE}"
    )
    await conn.execute(f"REVOKE INSERT, UPDATE, DELETE ON checkpoint_migrations FROM {APP_ROLE}")
    await conn.execute(f"GRANT SELECT ON checkpoint_migrations TO {APP_ROLE}, {READER_ROLE}")


def insufficient_privilege(error: BaseException) -> str | None:
    """The server's own words when `error`, or an error that led to it, is a refused privilege (a login
    without the owner's rights); None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.errors.InsufficientPrivilege):
            return current.diag.message_primary or str(current).splitlines()[0]
        current = current.__cause__ or current.__context__
    return None


async def ready_embedded(owner_url: str) -> str:
    """On the embedded server: the URL the runtime uses, the login `billsleuth_runtime` (a member of
    `billsleuth_app`), after upgrading the schema as the owner when it is behind and creating that login
    when missing. A current database with the login costs the one query `at_heads` makes anyway."""
    from engine.db import with_login

    runtime = with_login(owner_url, RUNTIME_LOGIN)
    try:
        if await at_heads(runtime):
            return runtime
    except psycopg.OperationalError:
        pass  # the login does not exist yet (a new server): the owner makes it below
    await ensure_ready(owner_url)
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        await conn.execute(
            f"""
            DO $$
            BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{RUNTIME_LOGIN}') THEN
                    CREATE ROLE {RUNTIME_LOGIN} LOGIN IN ROLE {APP_ROLE};
                END IF;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- another process made it meanwhile
            END $$
            """
        )
    return runtime


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
