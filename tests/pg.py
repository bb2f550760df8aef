"""Test databases: one Postgres server per session, a fresh database per test cloned from a template.

The server is DATABASE_URL's when set (tests then create and drop their own databases on it), else an
embedded pgserver in a temporary directory. Cloning a migrated template (CREATE DATABASE … TEMPLATE) takes
milliseconds, so every test gets a database of its own.
"""

from __future__ import annotations

import itertools
import os
import uuid

import psycopg

from engine.db import with_database

_counter = itertools.count(1)


def admin_execute(server_url: str, *statements: str) -> None:
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def clone_database(server_url: str, template: str, prefix: str = "t") -> str:
    """Create a fresh database from a template and return its libpq URL."""
    name = f"{prefix}_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    admin_execute(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return with_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    admin_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_name(libpq_url: str) -> str:
    from sqlalchemy.engine import make_url

    name = make_url(libpq_url).database
    assert name
    return name
