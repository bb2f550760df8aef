"""The database records what changes money and rules (migration 0012): every change of a credit note's
status, every vote and every change of the stored policy appends an activity row of its own (actor_type
`database`, actions `db.*`), in the changing transaction, whoever makes it — billsleuth or psql."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import ApprovalSettings, issue
from approvals.activity import verify_chain
from approvals.policy_store import APPLY, POLICY_CHANGED, policy_in_force, propose
from tests.test_approvals import ALICE, BIG, BOB, FULL, SETTINGS, add_ledger, approve, draft


@pytest.fixture
async def ledger(db: AsyncEngine) -> AsyncEngine:
    await add_ledger(db)
    return db


def rows(url: str, where: str = "true") -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        cursor = conn.execute(
            "SELECT actor_type, actor_id, action, entity_type, entity_id, details FROM activity_log "  # type: ignore[arg-type]
            f"WHERE {where} ORDER BY id"
        )
        names = [c.name for c in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor]


def by_the_database(url: str) -> list[dict[str, Any]]:
    return rows(url, "actor_type = 'database'")


def login(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT session_user").fetchone()
    assert row is not None
    return str(row[0])


def as_psql(url: str, *statements: str) -> None:
    """What someone with a shell and DATABASE_URL does: plain SQL, in one transaction."""
    with psycopg.connect(url, application_name="psql") as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


async def test_billsleuths_changes_are_recorded_once_by_it_and_once_by_the_database(
    ledger: AsyncEngine, db_url: str
) -> None:
    note_id = await draft(ledger, BIG, "500.00")  # two approvers
    await approve(ledger, note_id, ALICE, BOB)
    await issue(ledger, note_id, SETTINGS)

    mine = by_the_database(db_url)
    statuses = [
        (r["details"]["from"], r["details"]["to"]) for r in mine if r["action"] == "db.credit_note.status"
    ]
    assert statuses == [(None, "draft"), ("draft", "approved"), ("approved", "issued")]
    votes = [r["details"]["new"] for r in mine if r["action"] == "db.vote"]
    assert [(v["approver"], v["decision"]) for v in votes] == [(ALICE, "approve"), (BOB, "approve")]
    assert {(r["actor_id"], r["entity_type"], r["entity_id"]) for r in mine} == {
        (login(db_url), "credit_note", note_id)
    }
    assert mine[-1]["details"]["amount"] == "500.00" and mine[-1]["details"]["invoice_id"] == BIG
    # Never two rows that look alike: an action belongs to billsleuth or to the database, not both.
    actors_of = {action: {r["actor_type"] for r in rows(db_url) if r["action"] == action} for action in
                 {r["action"] for r in rows(db_url)}}  # fmt: skip
    assert all(len(actors) == 1 for actors in actors_of.values()), actors_of
    assert Counter(r["action"] for r in rows(db_url, "actor_type <> 'database'"))["approval.recorded"] == 2
    assert (await verify_chain(ledger)).intact


async def test_a_change_made_in_psql_is_on_record(ledger: AsyncEngine, db_url: str) -> None:
    note_id = await draft(ledger, FULL, "174.90")
    before = len(rows(db_url))
    as_psql(
        db_url,
        "INSERT INTO approvals (credit_note_id, approver, decision) "
        f"VALUES ('{note_id}', 'U0MALLORY', 'approve')",
        f"UPDATE credit_notes SET status = 'issued', issued_at = now() WHERE id = '{note_id}'",
    )
    added = rows(db_url)[before:]
    assert [(r["actor_type"], r["actor_id"], r["action"]) for r in added] == [
        ("database", login(db_url), "db.vote"),
        ("database", login(db_url), "db.credit_note.status"),
    ]
    vote, status = (r["details"] for r in added)
    assert vote["op"] == "insert" and vote["old"] is None and vote["new"]["approver"] == "U0MALLORY"
    assert vote["application"] == "psql"
    assert (status["op"], status["from"], status["to"], status["amount"]) == (
        "update",
        "draft",
        "issued",
        "174.90",
    )

    # A vote edited or removed by hand is on record too, with what it was.
    as_psql(
        db_url,
        "UPDATE approvals SET decision = 'reject', comment = 'changed my mind' "
        f"WHERE credit_note_id = '{note_id}'",
    )
    as_psql(db_url, f"DELETE FROM approvals WHERE credit_note_id = '{note_id}'")
    edited, removed = rows(db_url)[before + 2 :]
    assert (edited["details"]["old"]["decision"], edited["details"]["new"]["decision"]) == (
        "approve",
        "reject",
    )
    assert removed["details"]["op"] == "delete" and removed["details"]["old"]["approver"] == "U0MALLORY"
    assert removed["details"]["new"] is None
    assert (await verify_chain(ledger)).intact


async def test_a_change_rolled_back_or_not_of_the_status_leaves_no_row(
    ledger: AsyncEngine, db_url: str
) -> None:
    note_id = await draft(ledger, FULL, "174.90")
    before = len(rows(db_url))
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE credit_notes SET status = 'issued' WHERE id = %s", (note_id,))
        conn.rollback()
    as_psql(db_url, f"UPDATE credit_notes SET memo = 'reworded' WHERE id = '{note_id}'")
    assert len(rows(db_url)) == before


async def test_every_change_of_the_stored_policy_is_recorded(db: AsyncEngine, db_url: str) -> None:
    await policy_in_force(db, SETTINGS, actor_type="user", actor_id="ops")  # the first policy, stored as is
    first = by_the_database(db_url)
    assert {r["details"]["op"] for r in first} == {"insert"} and {r["action"] for r in first} == {"db.policy"}
    assert len(first) == len({r["details"]["variable"] for r in first})  # one row per setting

    # A lower limit narrows power: it applies at once (a higher one would wait for consent).
    lower = ApprovalSettings.from_env({**SETTINGS.as_env(), "BILLSLEUTH_DAILY_CREDIT_LIMIT": "4000.00"})
    await propose(db, lower, proposer="ops", source="cli:ops", why=APPLY, on_apply=None)
    [changed] = by_the_database(db_url)[len(first) :]
    assert changed["details"] == {
        "op": "update",
        "variable": "BILLSLEUTH_DAILY_CREDIT_LIMIT",
        "old": "5000.00",
        "new": "4000.00",
    }
    assert [r["action"] for r in rows(db_url, "actor_type <> 'database'")] == [POLICY_CHANGED, POLICY_CHANGED]

    as_psql(
        db_url,
        "UPDATE policy SET value = 'U0ALICE,U0MALLORY' WHERE name = 'BILLSLEUTH_APPROVERS'",
        "DELETE FROM policy WHERE name = 'BILLSLEUTH_CLI_DECISIONS'",
    )
    approvers, deleted = by_the_database(db_url)[len(first) + 1 :]
    assert (approvers["details"]["variable"], approvers["details"]["new"]) == (
        "BILLSLEUTH_APPROVERS",
        "U0ALICE,U0MALLORY",
    )
    assert approvers["details"]["application"] == "psql"
    assert (deleted["details"]["op"], deleted["details"]["variable"]) == (
        "delete",
        "BILLSLEUTH_CLI_DECISIONS",
    )


async def test_a_months_model_budget_raised_by_hand_is_recorded(db: AsyncEngine, db_url: str) -> None:
    as_psql(db_url, "INSERT INTO model_budget_months (month, paused_at) VALUES ('2026-12', now())")
    assert by_the_database(db_url) == []  # spend pausing a month is not a change of the rules
    as_psql(db_url, "UPDATE model_budget_months SET limit_usd = 1000000, paused_at = NULL")
    [raised] = by_the_database(db_url)
    assert raised["action"] == "db.policy"
    assert raised["details"] == {
        "op": "update",
        "variable": "BILLSLEUTH_MODEL_BUDGET",
        "month": "2026-12",
        "old": None,
        "new": "1000000.000000",
        "application": "psql",
    }


async def test_truncating_a_table_that_held_notes_or_votes_is_recorded(
    ledger: AsyncEngine, db_url: str
) -> None:
    as_psql(db_url, "TRUNCATE approvals")  # empty: nothing changed, nothing to say
    assert [r["action"] for r in by_the_database(db_url)] == []
    note_id = await draft(ledger, FULL, "174.90")
    await approve(ledger, note_id, ALICE)
    as_psql(db_url, "TRUNCATE approvals, credit_notes CASCADE")
    truncated = [r for r in by_the_database(db_url) if r["action"] == "db.truncate"]
    assert [(r["entity_type"], r["entity_id"], r["details"]["rows"]) for r in truncated] == [
        ("table", "approvals", 1),
        ("table", "credit_notes", 1),
    ]
    assert (await verify_chain(ledger)).intact


def test_nobody_but_a_trigger_writes_as_the_database(db_url: str) -> None:
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.RaiseException, match="own triggers"):
        conn.execute(
            "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
            "VALUES ('database', 'postgres', 'db.vote', 'credit_note', 'CN-0001')"
        )
    assert rows(db_url) == []
