"""Scratch databases: the evaluation runs its cases on copies, so the ledger at DATABASE_URL never changes.

A copy is a new database on the same server, migrated to head, holding the source's ledger and credit-note
tables as they stand (read in one REPEATABLE READ snapshot and streamed with COPY … BINARY) and the
source's sequence positions, so new case and credit note numbers never collide with the copied rows. Each
repetition of the evaluation gets its own clone of that copy (CREATE DATABASE … TEMPLATE, which needs the
template to have no connections — we hold none between runs), so runs never see each other's drafts.

Everything created is dropped on the way out, also on an error or Ctrl-C (DROP … WITH (FORCE) ends any
connection a cancelled case left behind).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

import psycopg
from psycopg import sql

from agent.database import upgrade_all
from engine.db import with_database
from engine.ledger_staging import TABLE_ORDER as LEDGER_TABLE_ORDER

# Parents before children. The ledger, plus the credit-note side (existing notes limit what may still be
# credited on an invoice), plus dataset_info. Cases, logs and Slack event ids are history the agent never
# reads; they stay behind.
COPIED_TABLES: tuple[str, ...] = (*LEDGER_TABLE_ORDER, "credit_note_requests", "approvals", "dataset_info")

NAME_PREFIX = "bs_eval_"


class ScratchRefused(RuntimeError):
    """The server would not create a scratch database (the role lacks CREATEDB, or similar)."""


def _libpq(url: str) -> str:
    return "postgresql://" + url.removeprefix("postgres://") if url.startswith("postgres://") else url


@contextmanager
def _admin(url: str) -> Iterator[psycopg.Connection]:
    # CREATE/DROP DATABASE cannot run inside a transaction block.
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        yield conn


class ScratchServer:
    """Creates, clones and drops this evaluation's scratch databases on the source's server."""

    def __init__(self, source_url: str) -> None:
        self.source_url = source_url
        self.run_token = f"{NAME_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"
        self.created: list[str] = []

    def __enter__(self) -> ScratchServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.drop_all()

    def url(self, name: str) -> str:
        return with_database(self.source_url, name)

    # ---- creating ----

    def _create(self, name: str, template: str | None = None) -> str:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        try:
            with _admin(self.source_url) as conn:
                conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege as error:
            raise ScratchRefused(
                "eval runs its cases on a scratch copy of the ledger so it never changes DATABASE_URL, "
                f"but the server refused to create one ({error.diag.message_primary}); "
                "grant CREATEDB to this role"
            ) from None
        self.created.append(name)
        with _admin(self.url(name)) as conn:
            # A throwaway copy needs no durability: commits need not wait for the WAL to reach disk.
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
            )
        return self.url(name)

    def copy_of_source(self) -> str:
        """A database as `db upgrade` leaves it (schema and checkpoint tables) holding the source's ledger
        as it stands; returns its URL."""
        name = f"{self.run_token}_base"
        url = self._create(name)
        asyncio.run(upgrade_all(url))
        copy_ledger(self.source_url, url)
        return url

    def clone(self, template_url: str, label: str) -> str:
        """An untouched copy of a scratch database (nothing may be connected to it meanwhile)."""
        template = _database_name(template_url)
        return self._create(f"{self.run_token}_{label}", template=template)

    # ---- dropping ----

    def drop(self, url: str) -> None:
        name = _database_name(url)
        with _admin(self.source_url) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if name in self.created:
            self.created.remove(name)

    def drop_all(self) -> None:
        for name in reversed(list(self.created)):
            self.drop(self.url(name))


def _database_name(url: str) -> str:
    from sqlalchemy.engine import make_url

    name = make_url(_libpq(url)).database
    if not name:
        raise ValueError(f"no database name in {url!r}")
    return name


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [row[0] for row in rows]


def copy_ledger(source_url: str, target_url: str) -> dict[str, int]:
    """Stream the copied tables from source to target; returns rows copied per table.

    The source is read in one REPEATABLE READ, READ ONLY transaction: a consistent snapshot even while the
    bot keeps working, and a guarantee that nothing here can write to it.
    """
    copied: dict[str, int] = {}
    with (
        psycopg.connect(_libpq(source_url)) as source,
        psycopg.connect(_libpq(target_url)) as target,
    ):
        source.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        source.read_only = True
        tables = sql.SQL(", ").join(sql.Identifier(t) for t in COPIED_TABLES)
        # Migrations may seed reference rows (the price book); the source's rows are the ones that count.
        # CASCADE: tables that reference these (approver notices) must be emptied with them, and are.
        target.execute(sql.SQL("TRUNCATE TABLE {} CASCADE").format(tables))
        for table in COPIED_TABLES:
            copied[table] = _copy_table(source, target, table)
        _copy_sequences(source, target)
        target.commit()
        source.rollback()
    return copied


def _copy_table(source: psycopg.Connection, target: psycopg.Connection, table: str) -> int:
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in _columns(source, table))
    read = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT (FORMAT BINARY)").format(
        columns, sql.Identifier(table)
    )
    write = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(sql.Identifier(table), columns)
    with (
        source.cursor() as out_cursor,
        target.cursor() as in_cursor,
        out_cursor.copy(read) as out,
        in_cursor.copy(write) as into,
    ):
        for chunk in out:
            into.write(chunk)
    return in_cursor.rowcount


def _copy_sequences(source: psycopg.Connection, target: psycopg.Connection) -> None:
    """Case and credit note numbers (and bigserial ids) continue where the source's are."""
    rows = source.execute(
        "SELECT sequencename, last_value FROM pg_sequences "
        "WHERE schemaname = current_schema() AND last_value IS NOT NULL"
    ).fetchall()
    for name, last_value in rows:
        target.execute(
            "SELECT setval(%s::regclass, %s, true)", (sql.Identifier(name).as_string(target), last_value)
        )


def leftover_scratch_databases(server_url: str) -> list[str]:
    """Scratch databases on the server (any evaluation's); for checks and clean-up tools."""
    with _admin(server_url) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY datname",
            (NAME_PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
    return [row[0] for row in rows]
