"""Request changes, through Slack: an approver sends the note back with a question (a modal); the thread asks
the requester; the requester's answer — a mention in the thread, or Resubmit and its modal — starts a new
round that ends in a new card. Every round is on the new card and in activity_log."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from bot.cards.ids import (
    ANSWER_ACTION_ID,
    ANSWER_BLOCK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
    REQUEST_CHANGES_ACTION_ID,
    REQUEST_CHANGES_MODAL_CALLBACK_ID,
    RESUBMIT_ACTION_ID,
    RESUBMIT_MODAL_CALLBACK_ID,
)
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    SUPPORT,
    OpenedCase,
    all_text,
    assert_valid_blocks,
    assert_valid_view,
    bot_replies,
    buttons,
    card_of,
    first_scenario,
    open_case,
    snapshot,
)

ALICE, BOB, _ = FINANCE
QUESTION = "Did they still use the seats after the cancellation?"
ANSWER = "No: the account was closed on the day they cancelled, nobody logged in after."


async def send_back(slack: SlackRecorder, client: SignedClient, bot: RunningBot) -> OpenedCase:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    card = snapshot(card_of(slack, opened))
    assert buttons(card) == ["Approve", "Reject", "Request changes"]
    clicked = p.click(card, user=BOB, channel=CHANNEL, action_id=REQUEST_CHANGES_ACTION_ID)
    assert (await client.send(clicked)).status == 200
    await bot.settled()
    (modal,) = slack.views("modal")
    assert modal.view["callback_id"] == REQUEST_CHANGES_MODAL_CALLBACK_ID
    assert_valid_view(modal.view)
    blank = await client.send(p.view_submission(modal.view, user=BOB, values=question("  ")))
    assert blank.json()["response_action"] == "errors"
    asked = p.view_submission(modal.view, user=BOB, values=question(QUESTION))
    assert (await client.send(asked)).status == 200
    await bot.settled()
    return opened


def question(text: str) -> dict[str, dict[str, str]]:
    return {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: text}}


def thread(slack: SlackRecorder, opened: OpenedCase) -> list[StoredMessage]:
    return bot_replies(slack, CHANNEL, opened.thread_ts)


def asking(slack: SlackRecorder, opened: OpenedCase) -> StoredMessage:
    (found,) = [
        m
        for m in thread(slack, opened)
        if "sent" in all_text(m.blocks) and RESUBMIT_ACTION_ID in str(m.blocks)
    ]
    return found


async def test_an_approver_sends_the_note_back_and_the_answer_in_the_thread_starts_a_new_card(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await send_back(slack, client, bot)
    old = card_of(slack, opened)
    assert buttons(old) == [] and f"Changes requested* by <@{BOB}>: “{QUESTION}”" in all_text(old.blocks)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "revision_requested" and case["credit_note"]["status"] == "rejected"
    question_message = asking(slack, opened)
    assert QUESTION in all_text(question_message.blocks) and f"<@{SUPPORT}>" in all_text(
        question_message.blocks
    )
    assert len(thread(slack, opened)) == 2  # the card and the question: no customer reply, nothing settled

    # Someone else's mention in the thread is not the answer (and names no customer: it is asked for one).
    other = p.app_mention(
        p.mention_text("they never logged in"), user=ALICE, channel=CHANNEL, thread_ts=opened.thread_ts
    )
    assert (await client.send(other)).status == 200
    await bot.settled()
    assert (await bot.runtime.service.show_case(opened.case_id))["status"] == "revision_requested"

    answer = slack.post_user_message(
        CHANNEL, p.mention_text(ANSWER), user=SUPPORT, thread_ts=opened.thread_ts
    )
    event = p.app_mention(
        answer.text, user=SUPPORT, channel=CHANNEL, ts=answer.ts, thread_ts=opened.thread_ts
    )
    assert (await client.send(event)).status == 200
    await bot.settled()
    again = await bot.runtime.service.show_case(opened.case_id)
    assert again["status"] == "awaiting_approval"
    new_note = again["credit_note"]["id"]
    assert new_note != opened.credit_note_id
    new_card = thread(slack, opened)[-1]
    assert new_card.ts not in (opened.card_ts, question_message.ts)
    assert buttons(new_card) == ["Approve", "Reject", "Request changes"] and new_note in all_text(
        new_card.blocks
    )
    history = all_text(new_card.blocks)
    assert "Round 2 of 3" in history and QUESTION in history and ANSWER in history
    assert_valid_blocks(new_card.blocks)
    assert card_of(slack, opened).blocks == old.blocks  # the old card still shows what was sent back

    assert (await client.send(event)).status == 200  # Slack redelivers the answer: nothing more happens
    await bot.settled()
    assert (await bot.runtime.service.show_case(opened.case_id))["credit_note"]["id"] == new_note
    log = schema.activity_log.c
    async with bot.runtime.engine.connect() as conn:
        actions = list(
            (
                await conn.execute(select(log.action).where(log.entity_id == opened.case_id).order_by(log.id))
            ).scalars()
        )
    assert actions.count("case.revision_requested") == 1 and actions.count("case.resubmitted") == 1


async def test_resubmit_asks_the_requester_alone_for_the_answer(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await send_back(slack, client, bot)
    message = snapshot(asking(slack, opened))

    by_someone_else = p.click(message, user=ALICE, channel=CHANNEL, action_id=RESUBMIT_ACTION_ID)
    assert (await client.send(by_someone_else)).status == 200
    await bot.settled()
    (refused,) = slack.ephemerals(ALICE)
    assert "only_the_requester_answers" in refused.text
    assert len(slack.views("modal")) == 1  # only the question's modal so far

    mine = p.click(message, user=SUPPORT, channel=CHANNEL, action_id=RESUBMIT_ACTION_ID)
    assert (await client.send(mine)).status == 200
    await bot.settled()
    modal = next(v for v in slack.views("modal") if v.view["callback_id"] == RESUBMIT_MODAL_CALLBACK_ID)
    assert QUESTION in all_text(modal.view["blocks"])
    assert_valid_view(modal.view)
    blank = await client.send(p.view_submission(modal.view, user=SUPPORT, values=answer_values(" ")))
    assert blank.json()["response_action"] == "errors"
    sent = await client.send(p.view_submission(modal.view, user=SUPPORT, values=answer_values(ANSWER)))
    assert sent.status == 200
    await bot.settled()
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "awaiting_approval" and case["credit_note"]["id"] != opened.credit_note_id
    assert buttons(thread(slack, opened)[-1]) == ["Approve", "Reject", "Request changes"]


def answer_values(text: str) -> dict[str, Any]:
    return {ANSWER_BLOCK_ID: {ANSWER_ACTION_ID: text}}
