"""Cancel on the evidence card, and `/billsleuth cancel`: the end for an approved note that was never
issued — held by the daily credit limit, or refused at issue (its case escalated)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from approvals.models import Rule
from bot.cards import (
    APPROVE_ACTION_ID,
    CANCEL_ACTION_ID,
    CANCEL_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
)
from bot.flows.chores import sweep
from bot.flows.operations import execute
from bot.flows.show import show_case_result
from bot.grammar import ListNotes
from bot.presenters.approver import waiting_for
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SECRET,
    SUPPORT,
    OpenedCase,
    all_text,
    assert_valid_blocks,
    assert_valid_view,
    bot_replies,
    buttons,
    card_of,
    count,
    open_case,
    scenario,
    snapshot,
)

ALICE, BOB, CAROL = FINANCE
EARLIER, HELD_BACK = "C-0011", "C-0001"  # 26.02, then 174.90: past a 190.00 day together, not alone


async def bot_with_daily_limit(
    ready_db_url: str, slack: SlackRecorder, limit: str
) -> AsyncIterator[tuple[RunningBot, SignedClient]]:
    settings = ApprovalSettings(approvers=frozenset(FINANCE), daily_credit_limit=Decimal(limit))
    async with (
        running_bot(
            ready_db_url,
            slack.settings(signing_secret=SECRET),
            configuration=Configuration(investigator="offline"),
            approval_settings=settings,
            recover=False,
            expiry_interval=None,
        ) as running,
        SignedClient(running.url, SECRET) as client,
    ):
        yield running, client


@pytest.fixture
async def tight(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[tuple[RunningBot, SignedClient]]:
    """A bot whose daily credit limit (190.00) holds the second of two approved notes."""
    async for pair in bot_with_daily_limit(ready_db_url, slack, "190.00"):
        yield pair


@pytest.fixture
async def tiny(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[tuple[RunningBot, SignedClient]]:
    """A bot whose daily credit limit (100.00) never fits 174.90: issuing is refused, the case escalates."""
    async for pair in bot_with_daily_limit(ready_db_url, slack, "100.00"):
        yield pair


async def click(
    client: SignedClient, bot: RunningBot, card: dict[str, Any], user: str, action_id: str
) -> None:
    assert (await client.send(p.click(card, user=user, channel=CHANNEL, action_id=action_id))).status == 200
    await bot.settled()


async def approved_note(slack: SlackRecorder, client: SignedClient, bot: RunningBot) -> OpenedCase:
    opened = await open_case(slack, client, bot, scenario(HELD_BACK))
    await click(client, bot, snapshot(card_of(slack, opened)), ALICE, APPROVE_ACTION_ID)
    return opened


async def held_note(slack: SlackRecorder, client: SignedClient, bot: RunningBot) -> OpenedCase:
    issued = await open_case(slack, client, bot, scenario(EARLIER))
    await click(client, bot, snapshot(card_of(slack, issued)), ALICE, APPROVE_ACTION_ID)
    return await approved_note(slack, client, bot)


def customer_replies(slack: SlackRecorder, opened: OpenedCase) -> list[str]:
    posted = [all_text(m.blocks) for m in bot_replies(slack, CHANNEL, opened.thread_ts)]
    return [words for words in posted if "Reply to the customer" in words]


def reason(text: str) -> dict[str, dict[str, str]]:
    return {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: text}}


def cancel_button(card: Any) -> dict[str, Any]:
    (found,) = [
        e
        for b in card.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == CANCEL_ACTION_ID
    ]
    return found


async def note_status(bot: RunningBot, opened: OpenedCase) -> str:
    case = await bot.runtime.service.show_case(opened.case_id)
    return str(case["credit_note"]["status"])


async def test_a_held_note_offers_cancel_which_asks_for_a_reason_then_ends_the_case(
    slack: SlackRecorder, tight: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tight
    opened = await held_note(slack, client, bot)
    held = card_of(slack, opened)
    assert "Approved" in all_text(held.blocks) and "held" in all_text(held.blocks)
    assert buttons(held) == ["Cancel"]
    confirm = cancel_button(held)["confirm"]
    assert opened.credit_note_id in confirm["text"]["text"] and "174.90" in confirm["text"]["text"]
    assert_valid_blocks(held.blocks)
    seen = snapshot(held)

    await click(client, bot, seen, BOB, CANCEL_ACTION_ID)
    (modal,) = slack.views("modal")
    assert modal.view["callback_id"] == CANCEL_MODAL_CALLBACK_ID
    assert_valid_view(modal.view)
    assert await note_status(bot, opened) == "approved"  # opening the modal decides nothing

    blank = await client.send(p.view_submission(modal.view, user=BOB, values=reason("  ")))
    assert blank.json()["response_action"] == "errors"
    assert "reason" in blank.json()["errors"][REJECT_REASON_BLOCK_ID]
    await bot.settled()
    assert await note_status(bot, opened) == "approved"

    why = "the customer was refunded by hand"
    submit = p.view_submission(modal.view, user=BOB, values=reason(why))
    assert (await client.send(submit)).status == 200
    await bot.settled()
    card = card_of(slack, opened)
    words = all_text(card.blocks)
    assert card.blocks[0]["text"]["text"].endswith("· cancelled")
    assert buttons(card) == [] and f"Cancelled by <@{BOB}>: {why}" in words
    assert_valid_blocks(card.blocks)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "cancelled" and case["credit_note"]["status"] == "cancelled"
    (reply,) = customer_replies(slack, opened)
    assert case["reply"]["customer_message"] in reply
    assert scenario(HELD_BACK)["truth"]["overcharge"] not in reply  # no amount, no promise of money back
    assert (await client.send(p.app_home_opened(user=SUPPORT))).status == 200
    await bot.settled()
    home = slack.home(SUPPORT)
    assert home is not None and opened.case_id not in all_text(home["blocks"])  # not open any more

    assert (await client.send(submit)).status == 200  # the same modal submitted again
    await bot.settled()
    await click(client, bot, seen, ALICE, CANCEL_ACTION_ID)  # a screen that still shows the button
    (again,) = slack.ephemerals(BOB)
    (late,) = slack.ephemerals(ALICE)
    assert "already cancelled; nothing changed" in again.text
    assert "already cancelled; nothing changed" in late.text
    assert len(slack.views("modal")) == 1 and len(customer_replies(slack, opened)) == 1
    cancels = schema.activity_log.c.action == "credit_note.cancelled"
    assert await count(bot, schema.activity_log, cancels) == 1


async def test_a_cancel_by_someone_not_on_the_approvers_list_is_refused_privately(
    slack: SlackRecorder, tight: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tight
    opened = await held_note(slack, client, bot)
    before = snapshot(card_of(slack, opened))
    await click(client, bot, before, OUTSIDER, CANCEL_ACTION_ID)
    (modal,) = slack.views("modal")
    submit = p.view_submission(modal.view, user=OUTSIDER, values=reason("not needed"))
    assert (await client.send(submit)).status == 200
    await bot.settled()
    (refusal,) = slack.ephemerals(OUTSIDER)
    assert Rule.NOT_AN_APPROVER.value in refusal.text
    assert refusal.channel == CHANNEL
    assert await note_status(bot, opened) == "approved"
    assert card_of(slack, opened).blocks == before["blocks"]
    assert customer_replies(slack, opened) == []


async def test_a_note_refused_at_issue_shows_why_and_can_be_cancelled(
    slack: SlackRecorder, tiny: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tiny
    opened = await approved_note(slack, client, bot)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "escalated" and case["credit_note"]["status"] == "approved"
    card = card_of(slack, opened)
    assert "not issued" in all_text(card.blocks) and Rule.DAILY_CREDIT_LIMIT.value in all_text(card.blocks)
    assert buttons(card) == ["Cancel"]
    # However the escalated case is drawn again (say, recovered after a restart), the button stays.
    await show_case_result(bot.runtime, case)
    assert buttons(card_of(slack, opened)) == ["Cancel"]

    await click(client, bot, snapshot(card_of(slack, opened)), BOB, CANCEL_ACTION_ID)
    (modal,) = slack.views("modal")
    submit = p.view_submission(modal.view, user=BOB, values=reason("too large for any day"))
    assert (await client.send(submit)).status == 200
    await bot.settled()
    assert buttons(card_of(slack, opened)) == []
    assert (await bot.runtime.service.show_case(opened.case_id))["status"] == "cancelled"
    assert len(customer_replies(slack, opened)) == 1


async def test_a_note_refused_at_issue_is_on_an_approvers_home_and_in_list_with_cancel(
    slack: SlackRecorder, tiny: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tiny
    opened = await approved_note(slack, client, bot)
    note_id = opened.credit_note_id
    assert note_id is not None
    assert (await client.send(p.app_home_opened(user=CAROL))).status == 200
    await bot.settled()
    home = slack.home(CAROL)
    assert home is not None
    assert_valid_view(home)
    words = all_text(home["blocks"])
    assert note_id in words and "refused" in words
    cancels = [
        e
        for b in home["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == CANCEL_ACTION_ID
    ]
    assert [e["value"] for e in cancels] == [note_id]
    payload = p.slash_command("list", user=CAROL, channel=CHANNEL, response_url=slack.response_url())
    assert (await client.send(payload)).status == 200
    await bot.settled()
    listed = slack.calls("response_url")[-1].args["text"]
    assert note_id in listed and "refused" in listed


async def test_cancel_through_the_slash_command_needs_a_reason(
    slack: SlackRecorder, tight: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tight
    opened = await held_note(slack, client, bot)
    note_id = opened.credit_note_id

    async def slash(words: str, user: str) -> dict[str, Any]:
        before = len(slack.calls("response_url"))
        payload = p.slash_command(words, user=user, channel=CHANNEL, response_url=slack.response_url())
        assert (await client.send(payload)).status == 200
        await bot.settled()
        (answer,) = [c.args for c in slack.calls("response_url")[before:]]
        assert answer["response_type"] == "ephemeral"
        return answer

    assert Rule.REASON_REQUIRED.value in (await slash(f"cancel {note_id}", BOB))["text"]
    assert Rule.NOT_AN_APPROVER.value in (await slash(f"cancel {note_id} no", OUTSIDER))["text"]
    assert await note_status(bot, opened) == "approved"
    done = await slash(f"cancel {note_id} paid by hand", ALICE)  # she voted for it; she may cancel it
    assert done["text"] == f"{note_id} cancelled: paid by hand"
    card = card_of(slack, opened)
    assert buttons(card) == [] and f"Cancelled by <@{ALICE}>: paid by hand" in all_text(card.blocks)
    assert len(customer_replies(slack, opened)) == 1
    assert "already cancelled; nothing changed" in (await slash(f"cancel {note_id} again", BOB))["text"]


async def test_an_approvers_home_shows_held_notes_with_cancel_and_todays_room_under_the_limit(
    slack: SlackRecorder, tight: tuple[RunningBot, SignedClient]
) -> None:
    bot, client = tight
    opened = await held_note(slack, client, bot)
    assert (await client.send(p.app_home_opened(user=CAROL))).status == 200
    await bot.settled()
    home = slack.home(CAROL)
    assert home is not None
    assert_valid_view(home)
    words = all_text(home["blocks"])
    assert "held by the daily credit limit" in words and opened.credit_note_id in words
    issued_first = Decimal(scenario(EARLIER)["truth"]["overcharge"])
    assert f"{Decimal('190.00') - issued_first:.2f} USD of 190.00 USD" in words  # today's room, per currency
    (cancel,) = [e for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert cancel["action_id"] == CANCEL_ACTION_ID and cancel["value"] == opened.credit_note_id
    assert opened.credit_note_id in cancel["confirm"]["text"]["text"]


async def test_card_home_list_and_sweep_agree_on_which_approved_notes_the_daily_limit_holds(
    slack: SlackRecorder, tight: tuple[RunningBot, SignedClient]
) -> None:
    """One meaning of "held" (approvals.holds): issuing the note now would pass today's limit. A note whose
    case still waits but that today's room would take is not held anywhere: no Cancel, not on the hold
    limit's list, and the sweep issues it."""
    bot, client = tight
    service = bot.runtime.service
    earlier = await open_case(slack, client, bot, scenario(EARLIER))
    await click(client, bot, snapshot(card_of(slack, earlier)), ALICE, APPROVE_ACTION_ID)
    opened = await approved_note(slack, client, bot)  # 26.02 issued today + 174.90 > 190.00
    note_id = opened.credit_note_id
    assert note_id is not None

    async def home_of_an_approver() -> tuple[str, list[str]]:
        assert (await client.send(p.app_home_opened(user=CAROL))).status == 200
        await bot.settled()
        home = slack.home(CAROL)
        assert home is not None
        assert_valid_view(home)
        cancels = [
            e["value"]
            for b in home["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == CANCEL_ACTION_ID
        ]
        return all_text(home["blocks"]), cancels

    async def listed() -> dict[str, Any]:
        """`billsleuth list --json`'s entry for the note (the CLI's door, which does not sweep first)."""
        notes = (await execute(service, ListNotes())).payload["credit_notes"]
        (entry,) = [n for n in notes if n["id"] == note_id]
        return dict(entry)

    async def cancelled_by_the_hold_limit() -> list[str]:
        eight_days_on = datetime.now(UTC) + timedelta(days=8)
        held, refused = await service.held_too_long(await service.settings_in_force(), eight_days_on)
        assert refused == {}
        return held

    async def card() -> Any:
        await show_case_result(bot.runtime, await service.show_case(opened.case_id))  # drawn as it is now
        return card_of(slack, opened)

    # Held: issuing it today would pass the limit. Every door says so, and offers Cancel.
    held_card = await card()
    assert "held: issuing it today would pass the daily credit limit" in all_text(held_card.blocks)
    assert buttons(held_card) == ["Cancel"]
    words, cancels = await home_of_an_approver()
    assert note_id in words and "Held by the daily credit limit" in words and cancels == [note_id]
    entry = await listed()
    assert entry["held_by_daily_limit"] is True
    assert waiting_for(entry) == "approved, held by the daily credit limit"
    assert await cancelled_by_the_hold_limit() == [note_id]

    # The UTC day turns over (the earlier note was issued yesterday): its case still waits, but today's
    # room takes it. Nothing calls it held, nothing offers Cancel, and the hold limit does not end it.
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.credit_notes.update()
            .where(schema.credit_notes.c.id == earlier.credit_note_id)
            .values(issued_at=schema.credit_notes.c.issued_at - timedelta(days=1))
        )
    assert (await service.show_case(opened.case_id))["status"] == "awaiting_approval"
    room_card = await card()
    assert "held" not in all_text(room_card.blocks) and "issuing now" in all_text(room_card.blocks)
    assert buttons(room_card) == []
    words, cancels = await home_of_an_approver()
    assert note_id in words and "Held by the daily credit limit" not in words and cancels == []
    entry = await listed()
    assert entry["held_by_daily_limit"] is False and entry["issue_refused"] is None
    assert waiting_for(entry).startswith("approved, not held: today's limit has room for it")
    assert await cancelled_by_the_hold_limit() == []

    # The sweep agrees: it issues the note rather than keeping or cancelling it.
    await sweep(bot.runtime)
    assert await note_status(bot, opened) == "issued"
    assert "Issued" in all_text(card_of(slack, opened).blocks)
