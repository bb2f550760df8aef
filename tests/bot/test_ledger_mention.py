"""A mention about a customer of an imported ledger (issue 28): its ids look nothing like the seed's
(`cus_8f3aQz`, `in_1Ab`), yet the mention is understood as one quoting `C-0007` is, and the known
overcharge reaches the card."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from approvals.ledger_import import import_ledger
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from engine.db import create_engine
from engine.ledger_load import InputFile
from tests.bot.helpers import CARD_BUTTONS, CHANNEL, all_text, bot_replies, buttons, mention

FIXTURE = Path(__file__).parents[1] / "fixtures" / "ledger" / "acme_billing.jsonl"


@pytest.fixture
async def ready_db_url(db_url: str) -> str:
    """The hand-written ledger, imported into an empty database (no seed at all)."""
    engine = create_engine(db_url)
    try:
        await import_ledger(engine, [InputFile(str(FIXTURE), lambda: FIXTURE.open("rb"))], actor="tester")
    finally:
        await engine.dispose()
    return db_url


async def test_a_mention_quoting_an_imported_customer_id_drafts_the_known_credit(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "cus_8f3aQz says September was billed twice, 120.51 each time")
    assert (await client.send(event)).status == 200
    await bot.settled()
    (card,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    words = all_text(card.blocks)
    assert buttons(card) == CARD_BUTTONS
    assert "System recomputation of `in_1Ab`" in words
    assert "120.51" in words
    async with bot.runtime.engine.connect() as conn:
        case = (await conn.execute(select(schema.cases))).one()
        note = (
            await conn.execute(select(schema.credit_notes).where(schema.credit_notes.c.case_id == case.id))
        ).one()
    assert (case.customer_id, case.found_by, case.status) == ("cus_8f3aQz", "id", "awaiting_approval")
    assert (note.invoice_id, str(note.amount), note.imported) == ("in_1Ab", "120.51", False)


async def test_a_mention_quoting_an_imported_invoice_id_is_answered_about_that_invoice(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "cus_B71x: why was in_DE_0815 charged after we cancelled?")
    assert (await client.send(event)).status == 200
    await bot.settled()
    async with bot.runtime.engine.connect() as conn:
        case = (await conn.execute(select(schema.cases))).one()
    assert case.customer_id == "cus_B71x"
    assert case.findings["invoice_ids"] == ["in_DE_0815"]
    assert case.findings["root_cause"] == "cancel_not_respected"
    assert case.findings["overcharge"] == "92.82"


async def test_an_import_that_refunds_the_overcharge_under_an_open_note_says_so_on_its_card(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "cus_8f3aQz says September was billed twice, 120.51 each time")
    await client.send(event)
    await bot.settled()
    (card,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    # The billing system refunded the second September payment itself: nothing is owed back any more.
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    refunded = [dict(r, status="refunded") if r.get("id") == "py_1Ab" else r for r in lines]
    data = "".join(json.dumps(r) + "\n" for r in refunded).encode()
    report = await import_ledger(
        bot.runtime.engine, [InputFile("refund.jsonl", lambda: io.BytesIO(data))], actor="finance-desk"
    )
    [note] = report.notes
    assert (note["invoice_id"], note["status"], note["covered"], note["rule"]) == (
        "in_1Ab",
        "draft",
        False,
        "overcharge_changed",
    )
    assert note["still_owed"] == "0.00"

    def says_the_ledger_changed() -> bool:
        updates = [c for c in slack.calls("chat.update") if c.args["ts"] == card.ts]
        return bool(updates) and "the ledger changed on" in all_text(updates[-1].args["blocks"])

    await slack.wait_until(says_the_ledger_changed, timeout=10)
    words = all_text([c for c in slack.calls("chat.update") if c.args["ts"] == card.ts][-1].args["blocks"])
    assert "0.00 is still owed back on in_1Ab" in words and "issuing it will be refused" in words
    async with bot.runtime.engine.connect() as conn:
        rows = (
            await conn.execute(
                select(schema.activity_log).where(schema.activity_log.c.action == "ledger.changed_under_note")
            )
        ).all()
    assert [(r.entity_id, r.details["covered"], r.actor_id) for r in rows] == [
        (note["credit_note_id"], False, "finance-desk")
    ]
