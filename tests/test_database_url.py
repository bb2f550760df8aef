"""DATABASE_URL as libpq writes it (postgresql://, postgres://, ?host=/socket/dir), and one-line errors."""

from __future__ import annotations

import json
import os

import pytest

from engine.db import DatabaseUrlError, sqlalchemy_url
from tests.cli import Done, billsleuth


def run(*args: str, url: str) -> Done:
    return billsleuth(*args, env={**os.environ, "DATABASE_URL": url})


@pytest.mark.parametrize(
    ("given", "host", "database"),
    [
        ("postgresql://u:p@db.internal:6432/billing", "db.internal", "billing"),
        ("postgres://u:p@db.internal/billing", "db.internal", "billing"),
        ("postgresql://postgres:@/postgres?host=/tmp/socket-dir", None, "postgres"),
    ],
)
def test_libpq_urls_are_adapted_for_sqlalchemy(given: str, host: str | None, database: str) -> None:
    url = sqlalchemy_url(given)
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.database) == (host, database)
    if "?host=" in given:
        assert url.query["host"] == "/tmp/socket-dir"


def test_other_databases_are_refused() -> None:
    with pytest.raises(DatabaseUrlError, match="postgresql://"):
        sqlalchemy_url("mysql://u@h/db")


def test_the_commands_accept_the_postgres_scheme_and_a_socket_directory(db_url: str) -> None:
    assert "?host=" in db_url  # the embedded server listens on a Unix socket directory
    heroku_style = "postgres://" + db_url.removeprefix("postgresql://")
    upgraded = run("db", "upgrade", url=heroku_style)
    assert upgraded.returncode == 0, upgraded.stderr
    listed = run("list", "--json", url=heroku_style)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"credit_notes": []}


def test_a_wrong_or_unreachable_database_is_one_line() -> None:
    wrong = run("audit", "--all", url="mysql://u@h/db")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.strip().splitlines() == [
        "billsleuth: error: DATABASE_URL must be a postgresql:// URL, got mysql://"
    ]
    down = run("list", url="postgresql://nobody@127.0.0.1:1/x")
    assert down.returncode == 1
    assert len(down.stderr.strip().splitlines()) == 1 and "cannot reach the database" in down.stderr
