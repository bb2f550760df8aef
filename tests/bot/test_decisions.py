"""Approve and Reject on the evidence card: refusals to the clicker only and naming the rule, two-person
approval, the reject-reason modal, double clicks, stale cards, concurrent approvers, expiry."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select, update

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from approvals.models import Rule
from bot.cards import (
    APPROVE_ACTION_ID,
    REJECT_ACTION_ID,
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
)
from bot.cards.models import RejectModalMetadata
from bot.flows.chores import sweep
from bot.server import RunningBot, running_bot
from bot.slack_testing import EphemeralMessage, SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SECRET,
    SUPPORT,
    OpenedCase,
    all_text,
    approval_settings,
    assert_valid_blocks,
    assert_valid_view,
    bot_replies,
    buttons,
    card_of,
    consent_to_policy_change,
    count,
    first_scenario,
    open_case,
    scenario,
    snapshot,
)

ALICE, BOB, CAROL = FINANCE


async def click(
    client: SignedClient, bot: RunningBot, card: dict, user: str, action_id: str = APPROVE_ACTION_ID
) -> None:
    assert (await client.send(p.click(card, user=user, channel=CHANNEL, action_id=action_id))).status == 200
    await bot.settled()


def ephemerals_to(slack: SlackRecorder, user: str) -> list[EphemeralMessage]:
    return slack.ephemerals(user)


async def votes(bot: RunningBot, opened: OpenedCase) -> int:
    return await count(bot, schema.approvals, schema.approvals.c.credit_note_id == opened.credit_note_id)


def customer_replies(slack: SlackRecorder, opened: OpenedCase) -> list[str]:
    """The texts of the bot's customer-reply messages in the case's thread."""
    posted = [all_text(m.blocks) for m in bot_replies(slack, CHANNEL, opened.thread_ts)]
    return [words for words in posted if "Reply to the customer" in words]


# ---- refusals ---------------------------------------------------------------------------------------------


async def test_someone_not_on_the_approvers_list_is_refused_privately_by_name_of_the_rule(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    before = snapshot(card_of(slack, opened))
    await click(client, bot, before, OUTSIDER)
    (refusal,) = ephemerals_to(slack, OUTSIDER)
    assert Rule.NOT_AN_APPROVER.value in refusal.text
    assert refusal.channel == CHANNEL and refusal.thread_ts == opened.thread_ts
    assert await votes(bot, opened) == 0
    assert card_of(slack, opened).blocks == before["blocks"]  # nothing changed for anyone
    assert slack.ephemerals(SUPPORT) == []


async def test_the_requester_cannot_approve_their_own_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    opened = await open_case(slack, client, bot, sc, user=ALICE)  # finance opened it herself
    await click(client, bot, snapshot(card_of(slack, opened)), ALICE)
    (refusal,) = ephemerals_to(slack, ALICE)
    assert Rule.REQUESTER_CANNOT_APPROVE.value in refusal.text
    assert await votes(bot, opened) == 0
    assert buttons(card_of(slack, opened)) == CARD_BUTTONS


async def test_the_same_person_cannot_vote_twice_on_a_two_person_note(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=False))
    await click(client, bot, snapshot(card_of(slack, opened)), ALICE)
    await click(client, bot, snapshot(card_of(slack, opened)), ALICE)  # on the card as it is now
    (refusal,) = ephemerals_to(slack, ALICE)
    assert Rule.ONE_VOTE_EACH.value in refusal.text
    assert await votes(bot, opened) == 1
    assert "Approvals: 1 of 2" in all_text(card_of(slack, opened).blocks)


# ---- two people -------------------------------------------------------------------------------------------


async def test_two_person_approval_issues_and_posts_the_reply_with_the_amount(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=False)
    opened = await open_case(slack, client, bot, sc)
    amount = sc["truth"]["overcharge"]
    await click(client, bot, snapshot(card_of(slack, opened)), ALICE)

    halfway = card_of(slack, opened)
    assert "Approvals: 1 of 2" in all_text(halfway.blocks)
    assert buttons(halfway) == CARD_BUTTONS
    assert f"<@{ALICE}> :white_check_mark: approved" in all_text(halfway.blocks)
    assert customer_replies(slack, opened) == []
    assert_valid_blocks(halfway.blocks)

    await click(client, bot, snapshot(halfway), BOB)
    done = card_of(slack, opened)
    words = all_text(done.blocks)
    assert buttons(done) == []
    assert "Issued" in words and "Approvals: 2 of 2" in words
    assert f"<@{ALICE}>" in words and f"<@{BOB}>" in words
    assert_valid_blocks(done.blocks)

    (reply,) = customer_replies(slack, opened)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "issued"
    assert amount in reply
    assert case["reply"]["customer_message"] in reply  # the same text `case show` gives
    for message in bot_replies(slack, CHANNEL, opened.thread_ts):
        assert_valid_blocks(message.blocks)
    assert slack.ephemerals() == []
    issued = schema.credit_notes.c.status == "issued"
    assert await count(bot, schema.credit_notes, issued) == 1


# ---- reject via the modal --------------------------------------------------------------------------------


async def test_reject_asks_for_a_reason_in_a_modal_then_posts_the_rewritten_reply(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    opened = await open_case(slack, client, bot, sc)
    await click(client, bot, snapshot(card_of(slack, opened)), BOB, REJECT_ACTION_ID)
    (modal,) = slack.views("modal")
    view = modal.view
    assert view["callback_id"] == REJECT_MODAL_CALLBACK_ID
    assert_valid_view(view)
    meta = RejectModalMetadata.from_json(view["private_metadata"])
    assert (meta.channel, meta.message_ts, meta.credit_note_id) == (
        CHANNEL,
        opened.card_ts,
        opened.credit_note_id,
    )
    assert await votes(bot, opened) == 0  # opening the modal decides nothing

    blank = p.view_submission(
        view, user=BOB, values={REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: "   "}}
    )
    answer = await client.send(blank)
    assert answer.json()["response_action"] == "errors"
    assert "reason" in answer.json()["errors"][REJECT_REASON_BLOCK_ID]
    await bot.settled()
    assert await votes(bot, opened) == 0

    reason = "the customer agreed to this price in writing"
    submit = p.view_submission(
        view, user=BOB, values={REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: reason}}
    )
    assert (await client.send(submit)).status == 200
    await bot.settled()

    card = card_of(slack, opened)
    words = all_text(card.blocks)
    assert buttons(card) == [] and "Rejected" in words and reason in words
    (reply,) = customer_replies(slack, opened)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "rejected"
    assert case["reply"]["customer_message"] in reply
    assert sc["truth"]["overcharge"] not in reply  # no amount, no promise of money back
    async with bot.runtime.engine.connect() as conn:
        vote = (await conn.execute(select(schema.approvals))).one()
    assert (vote.approver, vote.decision, vote.comment) == (BOB, "reject", reason)


async def test_a_reject_submitted_by_someone_not_allowed_is_refused_privately(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    await click(client, bot, snapshot(card_of(slack, opened)), OUTSIDER, REJECT_ACTION_ID)
    (modal,) = slack.views("modal")
    values = {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: "looks wrong"}}
    assert (await client.send(p.view_submission(modal.view, user=OUTSIDER, values=values))).status == 200
    await bot.settled()
    (refusal,) = ephemerals_to(slack, OUTSIDER)
    assert Rule.NOT_AN_APPROVER.value in refusal.text
    assert await votes(bot, opened) == 0
    assert buttons(card_of(slack, opened)) == CARD_BUTTONS


# ---- exactly one outcome ----------------------------------------------------------------------------------


async def test_a_double_click_counts_once(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    card = snapshot(card_of(slack, opened))
    payload = p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
    answers = await asyncio.gather(client.send(payload), client.send(payload))
    assert [a.status for a in answers] == [200, 200]
    await bot.settled()
    assert await votes(bot, opened) == 1
    assert (await bot.runtime.service.show_case(opened.case_id))["status"] == "issued"
    assert len(customer_replies(slack, opened)) == 1
    (notice,) = ephemerals_to(slack, ALICE)  # the second click changed nothing, and says so
    assert "nothing" in notice.text or "out of date" in notice.text or Rule.ONE_VOTE_EACH.value in notice.text


async def test_a_click_on_a_stale_card_changes_nothing_and_says_so(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=False))
    first_revision = snapshot(card_of(slack, opened))
    await click(client, bot, first_revision, ALICE)
    current = snapshot(card_of(slack, opened))
    await click(client, bot, first_revision, BOB)  # Bob's screen still showed the first card
    (notice,) = ephemerals_to(slack, BOB)
    assert "out of date" in notice.text and opened.credit_note_id in notice.text
    assert await votes(bot, opened) == 1
    assert snapshot(card_of(slack, opened))["blocks"] == current["blocks"]


async def test_a_reject_reason_typed_against_a_card_that_moved_on_changes_nothing(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=False))
    seen = snapshot(card_of(slack, opened))
    await click(client, bot, seen, BOB, REJECT_ACTION_ID)  # Bob opens the modal and starts typing
    (modal,) = slack.views("modal")
    await click(client, bot, seen, ALICE)  # meanwhile Alice approves: "Approvals: 1 of 2"
    typed = {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: "the customer agreed to the price"}}
    assert (await client.send(p.view_submission(modal.view, user=BOB, values=typed))).status == 200
    await bot.settled()
    (notice,) = ephemerals_to(slack, BOB)
    assert "out of date" in notice.text
    assert await votes(bot, opened) == 1
    assert (await bot.runtime.service.show_case(opened.case_id))["status"] == "awaiting_approval"


async def test_a_click_on_a_decided_note_changes_nothing_and_says_so(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    before = snapshot(card_of(slack, opened))
    await click(client, bot, before, ALICE)
    await click(client, bot, before, BOB, REJECT_ACTION_ID)  # from a screen that still shows the buttons
    (notice,) = ephemerals_to(slack, BOB)
    assert f"{opened.credit_note_id} is already issued; nothing changed" in notice.text
    assert slack.views("modal") == []
    assert await votes(bot, opened) == 1


async def test_approvers_clicking_at_once_give_one_outcome(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    card = snapshot(card_of(slack, opened))
    payloads = [p.click(card, user=who, channel=CHANNEL, action_id=APPROVE_ACTION_ID) for who in FINANCE]
    assert all(a.status == 200 for a in await asyncio.gather(*(client.send(x) for x in payloads)))
    await bot.settled()
    assert await votes(bot, opened) == 1
    issued = schema.credit_notes.c.status == "issued"
    assert await count(bot, schema.credit_notes, issued) == 1
    assert len(customer_replies(slack, opened)) == 1
    assert len(slack.ephemerals()) == 2  # the two who came second were told nothing changed
    final = card_of(slack, opened)
    assert buttons(final) == [] and "Issued" in all_text(final.blocks)


# ---- the daily credit limit --------------------------------------------------------------------------------


async def test_an_approval_past_the_daily_limit_shows_held_and_the_sweep_issues_it_once_there_is_room(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    earlier, held_back = scenario("C-0011"), scenario("C-0001")  # 26.02, then 174.90
    options: dict[str, Any] = dict(
        configuration=Configuration(investigator="offline"), recover=False, expiry_interval=None
    )
    tight = ApprovalSettings(approvers=frozenset(FINANCE), daily_credit_limit=Decimal("190.00"))
    settings = slack.settings(signing_secret=SECRET)
    async with (
        running_bot(ready_db_url, settings, approval_settings=tight, **options) as first,
        SignedClient(first.url, SECRET) as client,
    ):
        issued = await open_case(slack, client, first, earlier)
        await click(client, first, snapshot(card_of(slack, issued)), ALICE)
        assert "Issued" in all_text(card_of(slack, issued).blocks)
        opened = await open_case(slack, client, first, held_back)
        await click(client, first, snapshot(card_of(slack, opened)), ALICE)
        held = card_of(slack, opened)
        assert buttons(held) == ["Cancel"]  # nothing to vote on; it can only be ended
        assert "held: issuing it today would pass the daily credit limit" in all_text(held.blocks)
        assert_valid_blocks(held.blocks)
        assert await sweep(first.runtime) == []
        assert customer_replies(slack, opened) == []  # nothing is promised while it is held
    # The limit is raised (a new value, a restarted bot, and — it widens power — an approver's consent):
    # the next sweep issues it and tells the thread.
    async with (
        running_bot(ready_db_url, settings, approval_settings=approval_settings(), **options) as second,
        SignedClient(second.url, SECRET) as client,
    ):
        assert await sweep(second.runtime) == []  # not before the consent
        await consent_to_policy_change(slack, client, second, BOB)
        await sweep(second.runtime)
    card = card_of(slack, opened)
    assert "Issued" in all_text(card.blocks) and "held" not in all_text(card.blocks)
    (reply,) = customer_replies(slack, opened)
    assert opened.credit_note_id in reply


# ---- expiry -----------------------------------------------------------------------------------------------


async def test_an_overdue_draft_expires_its_card_and_the_reply_is_rewritten(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    opened = await open_case(slack, client, bot, sc)
    stale = snapshot(card_of(slack, opened))
    async with bot.runtime.engine.begin() as conn:
        await conn.execute(
            update(schema.credit_notes).values(expires_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    assert await sweep(bot.runtime) == [opened.credit_note_id]
    card = card_of(slack, opened)
    assert buttons(card) == [] and "Expired" in all_text(card.blocks)
    (reply,) = customer_replies(slack, opened)
    assert sc["truth"]["overcharge"] not in reply
    await click(client, bot, stale, ALICE)
    (notice,) = ephemerals_to(slack, ALICE)
    assert "already expired" in notice.text
    assert await votes(bot, opened) == 0
