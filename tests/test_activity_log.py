"""The activity log can't be rewritten unnoticed: the database refuses UPDATE, DELETE and TRUNCATE, keeps a
SHA-256 chain over every row, and `billsleuth activity verify` finds an edit made around the triggers."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import activity
from approvals.activity import verify_chain
from engine.db import create_engine
from tests.cli import Done, billsleuth


def insert_rows(url: str, n: int, *, timezone: str = "UTC") -> None:
    with psycopg.connect(url) as conn:
        conn.execute(f"SET TimeZone = '{timezone}'")  # the chain must not depend on the session's zone
        for i in range(1, n + 1):
            conn.execute(
                "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id, details) "
                "VALUES ('user', 'U1', 'test.row', 'case', %s, %s)",
                (f"K-{i}", json.dumps({"n": i, "amount": "12.50", "note": "café"})),
            )


def as_superuser_without_triggers(url: str, statement: str) -> None:
    """What someone with the server's keys could do: change the table with its triggers switched off."""
    with psycopg.connect(url) as conn:
        conn.execute("SET session_replication_role = replica")  # user triggers do not fire
        conn.execute(statement)  # type: ignore[arg-type]


def cli(url: str, *args: str) -> Done:
    return billsleuth("activity", *args, env={**os.environ, "DATABASE_URL": url})


@pytest.mark.parametrize(
    "statement",
    ["UPDATE activity_log SET actor_id = 'U2'", "DELETE FROM activity_log", "TRUNCATE activity_log"],
)
def test_the_log_refuses_update_delete_and_truncate(db_url: str, statement: str) -> None:
    insert_rows(db_url, 2)
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        conn.execute(statement)  # type: ignore[arg-type]
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*), min(actor_id) FROM activity_log").fetchone() == (2, "U1")


async def test_every_row_is_chained_to_the_one_before(db_url: str, db: AsyncEngine) -> None:
    insert_rows(db_url, 2, timezone="Asia/Shanghai")
    async with db.begin() as conn:
        await activity.record(conn, activity.SYSTEM, activity.BILLSLEUTH, "test.row", "case", "K-3")
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT id, prev_hash, hash FROM activity_log ORDER BY id").fetchall()
    assert rows[0][1] == activity.GENESIS
    assert [r[1] for r in rows[1:]] == [r[2] for r in rows[:-1]]
    assert all(len(r[2]) == 64 and r[2] != r[1] for r in rows)
    assert (await verify_chain(db)).line() == "3 rows, chain intact"


async def test_concurrent_appends_keep_one_unbroken_chain(db_url: str) -> None:
    engine = create_engine(db_url, pool_size=20, max_overflow=0)

    async def append_two(i: int) -> None:
        async with engine.begin() as conn:
            await activity.record(conn, activity.USER, f"U{i}", "test.first", "case", f"K-{i}")
            await asyncio.sleep(0.01 * (i % 3))  # hold the chain while the others queue behind it
            await activity.record(conn, activity.USER, f"U{i}", "test.second", "case", f"K-{i}")

    try:
        await asyncio.gather(*(append_two(i) for i in range(20)))
        report = await verify_chain(engine)
    finally:
        await engine.dispose()
    assert report.line() == "40 rows, chain intact"
    with psycopg.connect(db_url) as conn:
        pairs = conn.execute("SELECT entity_id, action FROM activity_log ORDER BY id").fetchall()
    # A transaction's two rows are neighbours: the chain was held from its first append to its commit.
    assert all(pairs[i][0] == pairs[i + 1][0] for i in range(0, 40, 2))


@pytest.mark.parametrize(
    ("tampering", "broken_id", "words"),
    [
        ('UPDATE activity_log SET details = \'{"amount": "1250.00"}\' WHERE id = 3', 3, "edited"),
        ("DELETE FROM activity_log WHERE id = 3", 4, "removed"),
        ("DELETE FROM activity_log WHERE id = 1", 2, "removed"),
        ("DELETE FROM activity_log WHERE id = 5", 5, "removed from the end"),
        (
            "INSERT INTO activity_log (id, actor_type, actor_id, action, entity_type, entity_id, prev_hash, "
            "hash) SELECT 7, 'user', 'U9', 'credit_note.approved', 'credit_note', 'CN-0009', "
            "prev_hash, hash FROM activity_log WHERE id = 4",
            7,
            "not row 5's hash",
        ),
    ],
    ids=["edit", "delete-middle", "delete-first", "delete-last", "insert-copying-a-neighbours-hashes"],
)
async def test_verify_names_the_first_row_touched_around_the_triggers(
    db_url: str, db: AsyncEngine, tampering: str, broken_id: int, words: str
) -> None:
    insert_rows(db_url, 5)
    assert (await verify_chain(db)).intact
    as_superuser_without_triggers(db_url, tampering)
    report = await verify_chain(db)
    assert not report.intact
    assert report.broken_id == broken_id, report.line()
    assert f"chain broken at row {broken_id}" in report.line() and words in report.line()


async def test_an_inserted_row_is_found_even_with_a_plausible_hash(db_url: str, db: AsyncEngine) -> None:
    """A forger who computes a correct hash for the new row still cannot link it to the real last row
    without knowing it and, once another row is appended, the head no longer agrees either."""
    insert_rows(db_url, 4)
    as_superuser_without_triggers(
        db_url,
        "INSERT INTO activity_log (id, at, actor_type, actor_id, action, entity_type, entity_id, details, "
        "prev_hash, hash) SELECT 25, now(), 'user', 'U9', 'forged', 'case', 'K-9', '{}', a.hash, "
        "activity_log_row_hash(a.hash, 25, now(), 'user', 'U9', 'forged', 'case', 'K-9', '{}') "
        "FROM activity_log a WHERE a.id = 2",
    )
    report = await verify_chain(db)
    assert report.broken_id == 25 and "not row 4's hash" in report.line()


def test_cli_verify_reports_intact_then_the_broken_row(db_url: str) -> None:
    empty = cli(db_url, "verify")
    assert (empty.returncode, empty.stdout.strip()) == (0, "0 rows, chain intact")
    insert_rows(db_url, 3)
    intact = cli(db_url, "verify")
    assert (intact.returncode, intact.stdout.strip()) == (0, "3 rows, chain intact")
    as_superuser_without_triggers(db_url, "UPDATE activity_log SET actor_id = 'U0MALLORY' WHERE id = 2")
    broken = cli(db_url, "verify")
    assert broken.returncode == 1
    assert "chain broken at row 2" in broken.stdout and "Traceback" not in broken.stderr


def test_cli_export_writes_csv_with_a_header_and_json(db_url: str) -> None:
    insert_rows(db_url, 3)
    exported = cli(db_url, "export")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.reader(io.StringIO(exported.stdout)))
    assert rows[0] == list(activity.EXPORT_COLUMNS)
    assert [r[0] for r in rows[1:]] == ["1", "2", "3"]
    first = dict(zip(rows[0], rows[1], strict=True))
    assert json.loads(first["details"]) == {"n": 1, "amount": "12.50", "note": "café"}
    assert first["prev_hash"] == activity.GENESIS and first["at"].endswith("+00:00")
    assert dict(zip(rows[0], rows[2], strict=True))["prev_hash"] == first["hash"]

    later = cli(db_url, "export", "--since", "2999-01-01")
    assert later.returncode == 0 and later.stdout.splitlines() == [",".join(activity.EXPORT_COLUMNS)]
    today = cli(db_url, "export", "--since", "2000-01-01", "--format", "json")
    report = json.loads(today.stdout)
    assert report["since"] == "2000-01-01"
    assert [r["entity_id"] for r in report["activity"]] == ["K-1", "K-2", "K-3"]
    assert report["activity"][2]["details"]["n"] == 3 and len(report["activity"][2]["hash"]) == 64

    bad = cli(db_url, "export", "--since", "yesterday")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "YYYY-MM-DD" in bad.stderr
