"""`billsleuth demo` plays the whole flow; here it runs in-process on a seeded database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
from slack_sdk.models.blocks import Block

from bot.demo import run_demo
from engine.db import create_engine
from tests.pg import database_name, drop_database

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "default"


async def test_the_demo_shows_every_outcome_and_saves_valid_block_kit(
    seeded_db_url: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    scenarios = [json.loads(p.read_text()) for p in sorted(SCENARIOS.glob("S*.json"))]
    scene = await run_demo(seeded_db_url, tmp_path, scenarios, say=lines.append)
    text = "\n".join(lines)
    assert "rule: not_an_approver" in text and "rule: one_vote_each" in text
    assert "Approvals: 1 of 2" in text
    assert text.count("Issued") >= 2 and "Rejected by" in text
    assert "Explained: the bill was right" in text
    assert "A credit note waits for a decision" in text and "Decided" in text  # approvers are told
    assert "Changes requested" in text and "Round 2 of 3" in text
    assert "customer id" in text  # the bot asked for one
    assert "found by name" in text  # a customer named, not numbered
    assert "Findings sweep:" in text and "Case from the digest, in its thread" in text
    assert "Activity log seal" in text and "chain intact through the seal at row" in text
    assert len(scene.saved) >= 8
    for path in scene.saved:
        blocks = json.loads(path.read_text())["blocks"]
        assert all(Block.parse(b).to_dict() == b for b in blocks)
    engine = create_engine(seeded_db_url)
    async with engine.connect() as conn:
        from sqlalchemy import text as sql

        statuses = dict(
            (await conn.execute(sql("SELECT status, count(*) FROM credit_notes GROUP BY status"))).all()
        )
    await engine.dispose()
    # a rejected note, one sent back for a new round; drafts: the customer found by name, the digest's case
    assert statuses == {"issued": 3, "rejected": 2, "draft": 2}


def _money_history(url: str) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    with psycopg.connect(url) as conn:
        notes = conn.execute("SELECT id, status FROM credit_notes ORDER BY id").fetchall()
        log = conn.execute("SELECT id, hash FROM activity_log ORDER BY id").fetchall()
    return notes, log  # type: ignore[return-value]


def test_the_demo_cli_never_touches_the_users_database_and_runs_twice(
    seeded_db_url: str, pg_server_url: str, tmp_path: Path
) -> None:
    """The demo plays in `<database>_demo`: an issued note at DATABASE_URL is never erased, and the demo's
    own database (holding the previous run's issued notes) is reseeded on the next run."""
    with psycopg.connect(seeded_db_url) as conn:
        conn.execute(
            "INSERT INTO credit_notes (id, invoice_id, amount, reason, status, issued_at) "
            "VALUES ('CN-0001', 'INV-0001-05', 174.90, 'duplicate', 'issued', now())"
        )
        conn.execute(
            "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
            "VALUES ('system', 'billsleuth', 'credit_note.issued', 'credit_note', 'CN-0001')"
        )
    before = _money_history(seeded_db_url)
    env = {**os.environ, "DATABASE_URL": seeded_db_url, "BILLSLEUTH_HOME": str(tmp_path)}
    billsleuth = Path(sys.executable).with_name("billsleuth")
    demo_name = database_name(seeded_db_url) + "_demo"
    try:
        for _ in range(2):
            run = subprocess.run(
                [str(billsleuth), "demo"], capture_output=True, text=True, env=env, timeout=300
            )
            assert run.returncode == 0, run.stderr
            assert "Approvals: 1 of 2" in run.stdout
        assert _money_history(seeded_db_url) == before
        demo_url = seeded_db_url.replace(database_name(seeded_db_url), demo_name)
        with psycopg.connect(demo_url) as conn:
            actions = [r[0] for r in conn.execute("SELECT action FROM activity_log ORDER BY id")]
            issued = conn.execute("SELECT count(*) FROM credit_notes WHERE status = 'issued'").fetchone()
        assert actions.count("ledger.reseeded") == 1  # the second run erased the first run's notes
        assert actions.count("credit_note.issued") == 6 and issued == (3,)  # three per run
    finally:
        drop_database(pg_server_url, demo_name)
