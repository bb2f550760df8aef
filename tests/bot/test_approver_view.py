"""One read model of the approver's view: the Slack card, `show --json` and the CLI's `show` text show
the same note, the same fresh recomputation, the same votes and the same tool trail (the agent's own)."""

from __future__ import annotations

from sqlalchemy import select

from bot.cards import APPROVE_ACTION_ID
from bot.flows.operations import execute
from bot.grammar import ShowNote
from bot.presenters.approver import CARD_VIEWER, card_view, read_approver_view
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import CHANNEL, FINANCE, all_text, card_of, first_scenario, open_case, snapshot

ALICE, BOB, _ = FINANCE


async def test_card_show_json_and_show_text_agree_and_the_trail_is_the_agents_own(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=False))
    assert opened.credit_note_id is not None
    card = snapshot(card_of(slack, opened))
    vote = p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
    assert (await client.send(vote)).status == 200
    await bot.settled()  # one of two votes: the card was drawn again, auditing another recomputation

    service = bot.runtime.service
    shown = await execute(service, ShowNote(opened.credit_note_id, BOB))
    view = await read_approver_view(service, opened.credit_note_id, viewer=CARD_VIEWER)
    drawn = card_view(view)

    trail = shown.payload["tool_trail"]
    assert trail, "the investigation's tool calls are part of the approver's view"
    assert {call["actor"] for call in trail} == {"agent:offline"}  # not the viewers' own recomputations
    assert [(t.tool, t.ok) for t in drawn.tool_trail] == [(c["tool"], c["ok"]) for c in trail]
    async with bot.runtime.engine.connect() as conn:
        lookers = await conn.execute(
            select(schema.audit_log.c.actor).where(schema.audit_log.c.case_id == opened.case_id).distinct()
        )
        assert {CARD_VIEWER, f"approver:{BOB}"} <= set(lookers.scalars())  # audited, just not evidence

    truth = opened.scenario["truth"]["overcharge"]
    assert shown.payload["recompute"]["overcharge"] == truth == f"{view.check.overcharge:.2f}"
    assert [v["approver"] for v in shown.payload["approvals"]] == [ALICE]
    assert [d.user_id for d in drawn.decisions] == [ALICE]
    assert shown.payload["credit_note"]["held_by_daily_limit"] is False

    text = shown.text
    assert "approvals 1 of 2" in text and f"approve by {ALICE}" in text
    assert f"overcharge {truth}" in text
    for call in trail:
        assert f"{call['tool']}(" in text
    assert opened.credit_note_id in all_text(card_of(slack, opened).blocks)
