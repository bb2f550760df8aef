"""Least-privilege database roles (migration 0011): a login in billsleuth_app runs the everyday commands
and appends to the activity log through its chain, and Postgres itself refuses it everything that would
rewrite history or the schema; a login in billsleuth_reader serves `billsleuth mcp` and writes nothing
else; the owner's commands refuse another login in one line; the embedded server runs the runtime as a
login of its own."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.database import upgrade_all
from bot.cli import main as cli
from engine.db import with_database
from tests.cli import billsleuth
from tests.pg import Login, admin_execute, create_login, database_name, drop_database, drop_login
from tests.test_mcp import (
    check_audit_rows,
    check_listing,
    check_recompute_and_refusals,
    mcp_rows,
    stdio_session,
)

SUPPORT, ALICE = "U0SUPPORT1", "U0FIN0001"
APPEND = (
    "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
    "VALUES ('user', 'U1', 'case.opened', 'case', 'K-1')"
)
# What would let a runtime login rewrite history (or the schema) unnoticed; each needs ownership, a
# superuser or a privilege the role does not have.
REFUSED = [
    "UPDATE activity_log SET actor_id = 'U0MALLORY'",
    "DELETE FROM activity_log",
    "TRUNCATE activity_log",
    "UPDATE activity_log_head SET last_hash = repeat('0', 64)",
    "DELETE FROM activity_log_head",
    "INSERT INTO activity_log_head (one, last_id, last_hash) VALUES (true, 0, repeat('0', 64))",
    "ALTER TABLE activity_log DISABLE TRIGGER activity_log_append_only",
    "ALTER TABLE activity_log DISABLE TRIGGER ALL",
    "DROP TRIGGER activity_log_chain ON activity_log",
    "DROP TABLE activity_log",
    "DROP TABLE credit_notes CASCADE",
    "TRUNCATE credit_notes CASCADE",
    "ALTER TABLE credit_notes ADD COLUMN note text",
    "SET session_replication_role = replica",
    "SELECT setval('activity_log_id_seq', 1)",
    "UPDATE alembic_version SET version_num = '0001'",
    "INSERT INTO checkpoint_migrations (v) VALUES (999)",
    "ALTER FUNCTION activity_log_chain() SECURITY INVOKER",
    "CREATE TABLE shadow (id int)",
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


def head(url: str) -> tuple[int | None, str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT last_id, last_hash FROM activity_log_head").fetchone()
    assert row is not None
    return row[0], row[1]


# ---- billsleuth_app: Postgres refuses the rewrites -------------------------------------------------------


@pytest.mark.parametrize("statement", REFUSED)
def test_the_app_role_cannot_rewrite_history_or_the_schema(
    db_url: str, app_login: Login, statement: str
) -> None:
    with psycopg.connect(app_login.url(db_url), autocommit=True) as conn:
        conn.execute(APPEND)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)  # type: ignore[arg-type]
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT count(*), min(actor_id) FROM activity_log").fetchone()
    assert rows == (1, "U1")


def test_the_app_role_appends_through_the_chain_and_the_owner_keeps_the_head(
    db_url: str, app_login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_login.url(db_url)
    with psycopg.connect(app) as conn:
        conn.execute(APPEND)
        conn.execute(APPEND)
        chained = conn.execute("SELECT id, prev_hash, hash FROM activity_log ORDER BY id").fetchall()
    assert chained[1][1] == chained[0][2]
    assert head(db_url) == (chained[1][0], chained[1][2])
    monkeypatch.setenv("DATABASE_URL", app)
    assert run(["activity", "verify"], capsys) == (0, "2 rows, chain intact\n", "")


def test_a_head_of_the_callers_own_does_not_stand_in_for_the_chains(db_url: str, app_login: Login) -> None:
    """The chain function runs as the owner with search_path pinned: a temporary table the caller names
    activity_log_head (pg_temp comes first on an unpinned path) is not the head it extends."""
    with psycopg.connect(db_url) as conn:
        conn.execute(APPEND)
    _, before = head(db_url)
    with psycopg.connect(app_login.url(db_url)) as conn:
        conn.execute("CREATE TEMP TABLE activity_log_head (one boolean, last_id bigint, last_hash text)")
        conn.execute("INSERT INTO activity_log_head VALUES (true, 0, repeat('f', 64))")
        conn.execute(APPEND)
        prev_hash, row_id = conn.execute(
            "SELECT prev_hash, id FROM public.activity_log ORDER BY id DESC LIMIT 1"
        ).fetchone() or (None, None)
    assert prev_hash == before
    assert head(db_url)[0] == row_id


def test_tables_later_migrations_create_are_the_app_roles_to_use_not_to_own(
    db_url: str, app_login: Login
) -> None:
    """Default privileges: a table the owner creates after 0011 (the next migrations', the checkpointer's)
    is read and written by the app role, which still cannot truncate or drop it."""
    with psycopg.connect(db_url) as conn:
        conn.execute("CREATE TABLE later_table (id bigint GENERATED BY DEFAULT AS IDENTITY, note text)")
    with psycopg.connect(app_login.url(db_url), autocommit=True) as conn:
        conn.execute("INSERT INTO later_table (note) VALUES ('a')")
        conn.execute("UPDATE later_table SET note = 'b'")
        assert conn.execute("SELECT note FROM later_table").fetchall() == [("b",)]
        conn.execute("DELETE FROM later_table")
        for statement in ("TRUNCATE later_table", "DROP TABLE later_table"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[arg-type]
        writable = conn.execute(
            "SELECT has_table_privilege('checkpoints', 'INSERT'), has_table_privilege('checkpoint_writes', "
            "'DELETE'), has_table_privilege('checkpoint_migrations', 'SELECT')"
        ).fetchone()
    assert writable == (True, True, True)


# ---- billsleuth_app: the everyday commands work ----------------------------------------------------------


def test_the_everyday_commands_run_as_a_member_of_the_app_role(
    seeded_db_url: str, app_login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", app_login.url(seeded_db_url))
    monkeypatch.setenv("BILLSLEUTH_APPROVERS", ALICE)
    code, out, err = run(
        ["case", "open", "C-0001", "why did you charge me 174.90 in September?", "--as", SUPPORT, "--json"],
        capsys,
    )
    assert code == 0, err
    case = json.loads(out)
    assert case["status"] == "awaiting_approval" and case["credit_note"]["amount"] == "174.90"
    note = case["credit_note"]["id"]
    for args in (
        ["case", "show", case["case_id"], "--json"],
        ["list", "--json"],
        ["show", note, "--json"],
        ["audit", "C-0001", "--json"],
        ["sweep", "--json"],
        ["costs", "--json"],
        ["budget", "show", "--json"],
        ["policy", "show", "--json"],
        ["activity", "export", "--format", "json"],
    ):
        code, out, err = run(args, capsys)
        assert code == 0, (args, err)
        json.loads(out)
    assert note in out  # the export holds the drafting
    code, out, err = run(["activity", "verify"], capsys)
    assert code == 0 and out.endswith("chain intact\n"), err


# ---- the owner's commands --------------------------------------------------------------------------------


def test_owner_commands_refuse_the_app_login_in_one_line_and_take_the_owners_url(
    db_url: str, app_login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_login.url(db_url)
    owner = make_url(db_url).username
    monkeypatch.setenv("DATABASE_URL", app)
    for args, command in ((["db", "upgrade"], "billsleuth db upgrade"), (["seed"], "billsleuth seed")):
        code, out, err = run(args, capsys)
        assert (code, out) == (2, ""), err
        assert err == (
            f"billsleuth: error: {command} needs the schema owner's login ({owner}), not {app_login.user}; "
            "set BILLSLEUTH_OWNER_DATABASE_URL to it\n"
        )
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (0,)  # nothing half-written

    monkeypatch.setenv("BILLSLEUTH_OWNER_DATABASE_URL", db_url)
    assert run(["db", "upgrade"], capsys)[0] == 0
    code, out, err = run(["seed"], capsys)
    assert code == 0, err
    code, out, err = run(["audit", "--all", "--json"], capsys)  # DATABASE_URL is still the app's
    assert code == 0 and json.loads(out)["findings"], err


def test_db_upgrade_on_an_empty_database_refuses_a_login_that_may_not_create_tables(
    empty_db_url: str, app_login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", app_login.url(empty_db_url))
    code, out, err = run(["db", "upgrade"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"billsleuth: error: billsleuth db upgrade needs the schema owner's login: {app_login.user} may not "
        "create tables here; set BILLSLEUTH_OWNER_DATABASE_URL to it\n"
    )


# ---- the embedded server ---------------------------------------------------------------------------------


def test_on_the_embedded_server_the_runtime_is_a_login_in_the_app_role(
    empty_db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.cli.common import ready_database, ready_owner_database

    # No DATABASE_URL: the embedded server, stood in for by this test's empty database (its superuser).
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setattr("engine.db._embedded_url", lambda pgdata: empty_db_url)
    runtime = ready_database()
    assert make_url(runtime).username == "billsleuth_runtime"
    assert ready_owner_database("billsleuth seed") == empty_db_url
    with psycopg.connect(runtime, autocommit=True) as conn:
        member = conn.execute("SELECT pg_has_role(current_user, 'billsleuth_app', 'MEMBER')").fetchone()
        assert member == (True,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("TRUNCATE activity_log")
    assert run(["seed"], capsys)[0] == 0  # the owner's command, as the owner
    code, out, err = run(["audit", "--all", "--json"], capsys)
    assert code == 0 and json.loads(out)["findings"], err


# ---- billsleuth_reader: `billsleuth mcp` ----------------------------------------------------------------


async def test_mcp_serves_its_tools_as_a_reader_login_that_postgres_refuses_any_write(
    seeded_db_url: str, seeded_db: AsyncEngine, reader_login: Login
) -> None:
    reader = reader_login.url(seeded_db_url)
    async with stdio_session(reader) as session:
        check_listing(await session.list_tools())
        await check_recompute_and_refusals(session, seeded_db)
    check_audit_rows(await mcp_rows(seeded_db))  # its audit rows, written as the reader
    with psycopg.connect(reader, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM invoices").fetchone() != (0,)
        for write in (
            "UPDATE invoices SET total = 0",
            "INSERT INTO credit_notes (id, invoice_id, amount, reason, status) "
            "VALUES ('CN-9999', 'INV-0001-05', 1.00, 'x', 'issued')",
            "DELETE FROM payments",
            "UPDATE audit_log SET ok = true",
            "DELETE FROM audit_log",
            "SELECT count(*) FROM cases",  # not the ledger: cases, notes' votes, activity are not its to read
            "SELECT count(*) FROM approvals",
            APPEND,
            "TRUNCATE audit_log",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(write)  # type: ignore[arg-type]


# ---- doctor --------------------------------------------------------------------------------------------


def doctor(url: str) -> str:
    """`billsleuth doctor`'s output, run in this process as a process would see it (tests/cli.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    return billsleuth("doctor", env={**env, "DATABASE_URL": url}).stdout


def test_doctor_warns_when_the_runtime_logs_in_as_a_superuser_or_the_schema_owner(
    pg_server_url: str, db_url: str, app_login: Login, capsys: pytest.CaptureFixture[str]
) -> None:
    superuser = make_url(db_url).username
    assert (
        f"! database role: DATABASE_URL logs in as {superuser}, a superuser: it could disable the triggers "
        "and rewrite history\n    → run the bot and the everyday commands as a login in billsleuth_app"
    ) in doctor(db_url)
    assert f"✓ database role: {app_login.user}, a member of billsleuth_app" in doctor(app_login.url(db_url))

    # A schema owner that is no superuser (as on a managed Postgres): its `db upgrade` makes the grants,
    # and the app role works on what it owns; doctor still tells it apart from the runtime.
    owner = create_login(pg_server_url, "pg_monitor")  # any harmless group: the login is what counts
    name = database_name(db_url) + "_owned"
    admin_execute(pg_server_url, f'CREATE DATABASE "{name}" OWNER {owner.user}')
    try:
        owned = owner.url(with_database(db_url, name))
        asyncio.run(upgrade_all(owned))
        assert f"! database role: DATABASE_URL logs in as {owner.user}, the schema owner" in doctor(owned)
        with psycopg.connect(app_login.url(owned), autocommit=True) as conn:
            conn.execute(APPEND)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("ALTER TABLE activity_log DISABLE TRIGGER ALL")
    finally:
        drop_database(pg_server_url, name)
        admin_execute(pg_server_url, f"DROP OWNED BY {owner.user}")
        drop_login(pg_server_url, owner)
