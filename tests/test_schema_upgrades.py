"""Who changes the schema: on an external DATABASE_URL only `billsleuth db upgrade`; every other command
refuses a database behind (or ahead of) this code in one line, exit 2, writing nothing. On the embedded
server commands still upgrade by themselves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from agent.database import SchemaNotReady, ensure_ready
from bot.cli import main as cli
from bot.server import prepare_database
from engine import migrate

HEAD = migrate.head_revision()
# Commands that read or write the database, each refused before it touches it.
COMMANDS = [
    ["audit", "--all", "--json"],
    ["seed"],
    ["eval", "--json"],
    ["list", "--json"],
    ["activity", "verify"],
    ["policy", "show"],
]


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLSLEUTH_HOME", str(tmp_path))  # seed's scenario files, never the repo's var/


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli(args)
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {row[0] for row in rows}


def assert_refused(args: list[str], capsys: pytest.CaptureFixture[str], line: str) -> None:
    code, out, err = run(args, capsys)
    assert (code, out, err) == (2, "", f"billsleuth: error: {line}\n"), args


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(args))
def test_an_empty_external_database_is_refused_and_left_empty(
    args: list[str], empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_refused(
        args, capsys, f"database schema is empty, this billsleuth needs {HEAD}; run: billsleuth db upgrade"
    )
    assert tables(empty_db_url) == set()


@pytest.mark.parametrize("args", COMMANDS[:3], ids=lambda args: " ".join(args))
def test_an_old_external_database_is_refused_and_left_at_its_revision(
    args: list[str], empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate.upgrade(empty_db_url, "0003")
    before = tables(empty_db_url)
    assert_refused(
        args, capsys, f"database schema is at 0003, this billsleuth needs {HEAD}; run: billsleuth db upgrade"
    )
    assert migrate.current_revision(empty_db_url) == "0003"
    assert tables(empty_db_url) == before


def test_behind_checkpoint_tables_are_refused_too(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with psycopg.connect(db_url) as conn:
        head = conn.execute("SELECT max(v) FROM checkpoint_migrations").fetchone()[0]  # type: ignore[index]
        conn.execute("DELETE FROM checkpoint_migrations WHERE v > 2")
    assert_refused(
        ["audit", "--all", "--json"],
        capsys,
        f"graph checkpoint schema is at 2, this billsleuth needs {head}; run: billsleuth db upgrade",
    )


def test_a_newer_database_is_refused_even_by_db_upgrade(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    line = (
        f"database schema is at 9999, newer than this billsleuth knows ({HEAD}); "
        "install the billsleuth that upgraded it"
    )
    assert_refused(["audit", "--all", "--json"], capsys, line)
    assert_refused(["db", "upgrade"], capsys, line)
    assert migrate.current_revision(db_url) == "9999"


def test_db_upgrade_brings_an_external_database_to_head_and_commands_then_run(
    empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate.upgrade(empty_db_url, "0003")
    assert run(["db", "upgrade"], capsys) == (0, f"schema at {HEAD} (was 0003)\n", "")
    assert run(["db", "upgrade"], capsys) == (0, f"schema at {HEAD} (already current)\n", "")
    code, out, err = run(["audit", "--all", "--json"], capsys)
    assert (code, err) == (0, "")
    assert '"findings": []' in out


def test_the_bot_refuses_to_start_on_a_behind_external_database(empty_db_url: str) -> None:
    with pytest.raises(SchemaNotReady, match="database schema is empty"):
        asyncio.run(prepare_database(empty_db_url))
    assert tables(empty_db_url) == set()


def test_on_the_embedded_server_commands_upgrade_by_themselves(
    empty_db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No DATABASE_URL: the embedded server, stood in for by this test's empty database.
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setattr("engine.db._embedded_url", lambda pgdata: empty_db_url)
    code, out, err = run(["audit", "--all", "--json"], capsys)
    assert (code, err) == (0, "")
    assert '"findings": []' in out
    assert migrate.current_revision(empty_db_url) == HEAD
    assert "checkpoint_migrations" in tables(empty_db_url)


def test_an_embedded_database_newer_than_the_code_is_not_touched(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    monkeypatch.delenv("DATABASE_URL")
    with pytest.raises(SchemaNotReady, match="newer than this billsleuth"):
        asyncio.run(ensure_ready(db_url))
    assert migrate.current_revision(db_url) == "9999"


def test_the_quick_check_knows_the_heads_alembic_and_the_saver_have() -> None:
    """ensure_ready's one-query check compares with these constants; a migration that forgets them fails
    here, not silently in the field (the quick check would then always take the slow path, or worse)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from agent.database import CHECKPOINT_HEAD, SCHEMA_HEAD

    assert SCHEMA_HEAD == HEAD
    assert len(AsyncPostgresSaver.MIGRATIONS) - 1 == CHECKPOINT_HEAD


def test_the_quick_check_says_current_only_at_both_heads(db_url: str, empty_db_url: str) -> None:
    from agent.database import at_heads

    assert asyncio.run(at_heads(db_url))
    assert not asyncio.run(at_heads(empty_db_url))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DELETE FROM checkpoint_migrations WHERE v > 2")
    assert not asyncio.run(at_heads(db_url))
