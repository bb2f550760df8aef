"""Settling the whole account in Slack: a two-fault account's card lists the other overpaid invoice with
an `Open a case` button; the click opens a linked case (same customer, same requester, same thread) that
drafts its own note, once however often it is clicked; approved, that note is issued."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from bot.cards import APPROVE_ACTION_ID
from bot.cards.ids import OPEN_LINKED_CASE_ACTION_ID
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing import payloads as p
from bot.slack_testing.recorder import dm_channel
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SECRET,
    SUPPORT,
    all_text,
    assert_valid_blocks,
    bot_replies,
    buttons,
    mention,
    snapshot,
)
from tests.two_faults import TwoFaults, two_fault_account

CLICKER = FINANCE[2]  # may open cases (an approver); not the requester


def open_a_case_buttons(message: StoredMessage) -> list[str]:
    return [
        b["accessory"]["value"]
        for b in message.blocks
        if (b.get("accessory") or {}).get("action_id") == OPEN_LINKED_CASE_ACTION_ID
    ]


async def mention_two_faults(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> tuple[TwoFaults, str, StoredMessage]:
    """The two-fault account's complaint, mentioned by SUPPORT: (account, thread, the case's card)."""
    account = await two_fault_account(bot.runtime.engine)
    event = mention(slack, f"{account.customer_id} {account.question}")
    assert (await client.send(event)).status == 200
    await bot.settled()
    thread = str(event["event"]["ts"])
    (card,) = bot_replies(slack, CHANNEL, thread)
    return account, thread, card


async def cases_linked_from(bot: RunningBot, case_id: str) -> list[dict]:
    c = schema.cases.c
    async with bot.runtime.engine.connect() as conn:
        rows = await conn.execute(select(schema.cases).where(c.linked_from == case_id))
        return [dict(r._mapping) for r in rows]


def notified(slack: SlackRecorder, user: str, credit_note_id: str) -> bool:
    """Whether `user` got a direct message (an approver notice) about the note."""
    return any(credit_note_id in all_text(m.blocks) for m in slack.messages(dm_channel(user)))


async def original_case_id(bot: RunningBot, card: StoredMessage) -> str:
    c = schema.cases.c
    async with bot.runtime.engine.connect() as conn:
        return (await conn.execute(select(c.id).where(c.message_ts == card.ts))).scalar_one()


async def test_a_two_fault_account_end_to_end_the_second_case_credited(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    account, thread, card = await mention_two_faults(slack, bot, client)
    case_id = await original_case_id(bot, card)
    assert buttons(card) == CARD_BUTTONS
    assert open_a_case_buttons(card) == [f"{case_id} {account.other_invoice}"]
    assert "Open a case" in all_text(card.blocks) and account.other_invoice in all_text(card.blocks)
    assert_valid_blocks(card.blocks)

    # Two signed clicks on the same button (a double click, or two people at once): one linked case.
    click = p.click(snapshot(card), user=CLICKER, channel=CHANNEL, action_id=OPEN_LINKED_CASE_ACTION_ID)
    answers = await asyncio.gather(client.send(click), client.send(click))
    assert [a.status for a in answers] == [200, 200]
    await bot.settled()
    (linked,) = await cases_linked_from(bot, case_id)
    assert linked["customer_id"] == account.customer_id
    assert linked["requester"] == SUPPORT  # the original case's requester, not the clicker
    assert (linked["channel"], linked["thread_ts"]) == (CHANNEL, thread)
    assert account.other_invoice in linked["question"]
    assert "linked_case_opened_already" in slack.ephemerals(CLICKER)[-1].text

    linked_case = await bot.runtime.service.show_case(linked["id"])
    assert linked_case["status"] == "awaiting_approval"
    note = linked_case["credit_note"]
    assert (note["invoice_id"], note["amount"]) == (account.other_invoice, account.other_overcharge)

    # The thread: the original card, now naming the linked case instead of the button, and the new card.
    original, second = bot_replies(slack, CHANNEL, thread)
    assert original.ts == card.ts and open_a_case_buttons(original) == []
    assert f"case `{linked['id']}`" in all_text(original.blocks)
    assert buttons(second) == CARD_BUTTONS and note["id"] in all_text(second.blocks)
    assert_valid_blocks(original.blocks)
    # The linked case sees the original's invoice as overpaid too, but its open note credits it already:
    # no button that could only escalate (open_note_on_invoice).
    first_note = (await bot.runtime.service.show_case(case_id))["credit_note"]["id"]
    assert [o["invoice_id"] for o in linked_case["other_findings"]] == [account.asked_invoice]
    assert open_a_case_buttons(second) == []
    assert f"being credited by `{first_note}`" in all_text(second.blocks)

    for approver in FINANCE[: note["needed"]]:
        vote = p.click(snapshot(second), user=approver, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
        assert (await client.send(vote)).status == 200
        await bot.settled()
        second = slack.message(CHANNEL, second.ts)
    settled = await bot.runtime.service.show_case(linked["id"])
    assert (settled["status"], settled["credit_note"]["status"]) == ("issued", "issued")
    assert "Issued" in all_text(slack.message(CHANNEL, second.ts).blocks)
    # The original case's own note is untouched: still waiting for its approver.
    assert (await bot.runtime.service.show_case(case_id))["credit_note"]["status"] == "draft"


async def test_a_click_after_the_linked_case_exists_opens_no_second_one(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    _, thread, card = await mention_two_faults(slack, bot, client)
    case_id = await original_case_id(bot, card)
    stale = snapshot(card)  # the card as a second person's client still shows it
    for user in (CLICKER, SUPPORT):
        click = p.click(stale, user=user, channel=CHANNEL, action_id=OPEN_LINKED_CASE_ACTION_ID)
        assert (await client.send(click)).status == 200
        await bot.settled()
    assert len(await cases_linked_from(bot, case_id)) == 1
    assert len(bot_replies(slack, CHANNEL, thread)) == 2
    assert "linked_case_opened_already" in slack.ephemerals(SUPPORT)[-1].text


async def test_someone_who_may_not_open_cases_cannot_open_a_linked_one(
    slack: SlackRecorder, guarded: RunningBot
) -> None:
    async with SignedClient(guarded.url, SECRET) as client:
        _, thread, card = await mention_two_faults(slack, guarded, client)
        case_id = await original_case_id(guarded, card)
        click = p.click(snapshot(card), user=OUTSIDER, channel=CHANNEL, action_id=OPEN_LINKED_CASE_ACTION_ID)
        assert (await client.send(click)).status == 200
        await guarded.settled()
    assert await cases_linked_from(guarded, case_id) == []
    assert "support staff" in slack.ephemerals(OUTSIDER)[-1].text
    assert open_a_case_buttons(slack.message(CHANNEL, card.ts)) != []
    assert len(bot_replies(slack, CHANNEL, thread)) == 1


async def test_whoever_opened_the_linked_case_cannot_approve_its_note_and_is_on_record(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    """The requester stays the original case's, but the approver who clicked `Open a case` opened this one:
    they may not also approve its credit note, are not asked to by an approver notice, and the history says
    they opened it."""
    _, thread, card = await mention_two_faults(slack, bot, client)
    case_id = await original_case_id(bot, card)
    click = p.click(snapshot(card), user=CLICKER, channel=CHANNEL, action_id=OPEN_LINKED_CASE_ACTION_ID)
    assert (await client.send(click)).status == 200
    await bot.settled()
    (linked,) = await cases_linked_from(bot, case_id)
    linked_note = (await bot.runtime.service.show_case(linked["id"]))["credit_note"]["id"]
    await slack.wait_until(lambda: all(notified(slack, a, linked_note) for a in FINANCE[:2]))
    await bot.settled()
    assert not notified(slack, CLICKER, linked_note)
    _, second = bot_replies(slack, CHANNEL, thread)
    vote = p.click(snapshot(second), user=CLICKER, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
    assert (await client.send(vote)).status == 200
    await bot.settled()
    assert "requester_cannot_approve" in slack.ephemerals(CLICKER)[-1].text
    note = (await bot.runtime.service.show_case(linked["id"]))["credit_note"]
    assert (note["status"], note["approvals"]) == ("draft", 0)
    log = schema.activity_log.c
    async with bot.runtime.engine.connect() as conn:
        opened = await conn.execute(
            select(log.details).where(log.action == "case.opened", log.entity_id == linked["id"])
        )
        assert opened.scalar_one()["opened_from"] == CLICKER
