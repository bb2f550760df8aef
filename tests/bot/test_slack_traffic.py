"""Slack's own payload shapes, signed and sent to the real bot over HTTP: an edited mention (Slack sends the
app_mention again), mentions with a subtype, bots' messages, and event types the app has no use for, which
must still be acknowledged with 200 (anything else counts as a failed delivery: retried, then disabled)."""

from __future__ import annotations

from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    SUPPORT,
    bot_replies,
    buttons,
    count,
    first_scenario,
    mention,
)


def _complaint() -> str:
    sc = first_scenario(action="credit_note", single_approver=True)
    return f"{sc['customer_id']} {sc['question']}"


async def test_an_edited_mention_opens_no_second_case_and_says_so(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, _complaint())
    assert (await client.send(event)).status == 200
    await bot.settled()

    edited = p.edited_mention(event, event["event"]["text"] + " (they wrote again today)")
    assert edited["event_id"] != event["event_id"] and edited["event"]["ts"] == event["event"]["ts"]
    assert (await client.send(edited)).status == 200
    await bot.settled()

    assert await count(bot, schema.cases) == 1
    card, notice = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert buttons(card) == CARD_BUTTONS
    assert "already investigating this message" in notice.text
    # Slack retrying the edit's delivery changes nothing more.
    assert (await client.send(edited, retry_num=1)).status == 200
    await bot.settled()
    assert len(bot_replies(slack, CHANNEL, event["event"]["ts"])) == 2


async def test_a_mention_edited_to_add_the_customer_id_opens_the_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, sc["question"])  # no customer id: the bot asks for one
    assert (await client.send(event)).status == 200
    await bot.settled()
    assert await count(bot, schema.cases) == 0

    fixed = p.edited_mention(event, p.mention_text(f"{sc['customer_id']} {sc['question']}"))
    assert (await client.send(fixed)).status == 200
    await bot.settled()

    assert await count(bot, schema.cases) == 1
    ask, card = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert "C-0007" in ask.text and buttons(ask) == []  # the example id of the ask, in their language
    assert buttons(card) == CARD_BUTTONS


async def test_a_mention_also_sent_to_the_channel_is_handled_like_a_plain_one(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    parent = slack.post_user_message(CHANNEL, "A customer wrote in about their invoice", user=SUPPORT)
    typed = slack.post_user_message(CHANNEL, p.mention_text(_complaint()), user=SUPPORT, thread_ts=parent.ts)
    event = p.app_mention(
        typed.text,
        user=SUPPORT,
        channel=CHANNEL,
        ts=typed.ts,
        thread_ts=parent.ts,
        subtype="thread_broadcast",
    )
    assert (await client.send(event)).status == 200
    await bot.settled()
    (card,) = bot_replies(slack, CHANNEL, parent.ts)
    assert buttons(card) == CARD_BUTTONS
    assert await count(bot, schema.cases) == 1


async def test_a_mention_with_a_file_attached_is_handled_like_a_plain_one(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    typed = slack.post_user_message(CHANNEL, p.mention_text(_complaint()), user=SUPPORT)
    event = p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts, subtype="file_share")
    assert (await client.send(event)).status == 200
    await bot.settled()
    (card,) = bot_replies(slack, CHANNEL, typed.ts)
    assert buttons(card) == CARD_BUTTONS


async def test_a_bots_message_that_mentions_the_app_stays_ignored(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = p.app_mention(p.mention_text(_complaint()), user=SUPPORT, channel=CHANNEL, subtype="bot_message")
    event["event"]["bot_id"] = "B0OTHERBOT"
    assert (await client.send(event)).status == 200
    await bot.settled()
    assert await count(bot, schema.cases) == 0
    assert slack.calls("chat.postMessage") == []


async def test_event_types_the_app_does_not_handle_are_acknowledged_with_200(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    typed = slack.post_user_message(CHANNEL, "an ordinary message", user=SUPPORT)
    unhandled = [
        p.reaction_added("eyes", user=SUPPORT, channel=CHANNEL, item_ts=typed.ts),
        p.channel_message("an ordinary message", user=SUPPORT, channel=CHANNEL),
        p.channel_message("an edit", user=None, channel=CHANNEL, subtype="message_changed"),
        p.view_closed({"callback_id": "some_other_modal", "title": None}, user=SUPPORT),
    ]
    for payload in unhandled:
        answer = await client.send(payload)
        assert answer.status == 200, (payload.get("event") or payload)["type"]

    suggestion = p.block_suggestion(user=SUPPORT, action_id="customer_search", block_id="b1", value="Ac")
    answer = await client.send(suggestion)
    assert (answer.status, answer.json()) == (200, {"options": []})

    await bot.settled()
    assert await count(bot, schema.cases) == 0
    assert slack.calls("chat.postMessage") == []
