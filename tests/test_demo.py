"""`billsleuth demo` plays the whole flow; here it runs in-process on a seeded database."""

from __future__ import annotations

import json
from pathlib import Path

from slack_sdk.models.blocks import Block

from agent.checkpoint import setup_checkpointer
from bot.demo import run_demo
from engine.db import create_engine

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "default"


async def test_the_demo_shows_every_outcome_and_saves_valid_block_kit(
    seeded_db_url: str, tmp_path: Path
) -> None:
    await setup_checkpointer(seeded_db_url)
    lines: list[str] = []
    scenarios = [json.loads(p.read_text()) for p in sorted(SCENARIOS.glob("S*.json"))]
    scene = await run_demo(seeded_db_url, tmp_path, scenarios, say=lines.append)
    text = "\n".join(lines)
    assert "rule: not_an_approver" in text and "rule: one_vote_each" in text
    assert "Approvals: 1 of 2" in text
    assert text.count("Issued") >= 2 and "Rejected by" in text
    assert "Explained: the bill was right" in text
    assert "customer id" in text  # the bot asked for one
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
    assert statuses == {"issued": 2, "rejected": 1}
