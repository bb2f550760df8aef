"""Mentions and the message shortcut, through the real Bolt app over HTTP against the recording Slack Web API:
signatures, dedupe, the live progress message, and the result in the mention's thread."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import select, text

from bot.cards import INVESTIGATE_MODAL_CALLBACK_ID
from bot.cards.investigate_modal import (
    CUSTOMER_ACTION_ID,
    CUSTOMER_BLOCK_ID,
    WORDS_ACTION_ID,
    WORDS_BLOCK_ID,
)
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    SLACK_ACK_LIMIT,
    SUPPORT,
    all_text,
    assert_valid_blocks,
    assert_valid_view,
    bot_replies,
    buttons,
    count,
    first_scenario,
    mention,
    open_case,
    scenario,
)


async def test_mention_shows_live_progress_then_the_evidence_card_in_its_thread(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    answer = await client.send(event)
    assert answer.status == 200 and answer.elapsed < SLACK_ACK_LIMIT
    await bot.settled()

    thread = event["event"]["ts"]
    (card,) = bot_replies(slack, CHANNEL, thread)  # one message: progress first, the card in the end
    first = slack.calls("chat.postMessage")[0]
    assert first.args["thread_ts"] == thread
    assert "Investigating" in first.args["text"]
    updates = [c for c in slack.calls("chat.update") if c.args["ts"] == card.ts]
    live = [u for u in updates if "Investigating" in u.args["text"]]
    assert live, "the step list is updated while the tools run"
    assert any("recompute_invoice" in all_text(u.args["blocks"]) for u in live)
    assert updates[-1].args["text"].startswith("Credit note CN-")

    words = all_text(card.blocks)
    truth = sc["truth"]
    assert buttons(card) == CARD_BUTTONS
    assert "Approvals: 0 of 1" in words
    assert f"System recomputation of `{truth['invoice_ids'][0]}`" in words
    assert "Agent's tool trail" in words and "recompute_invoice" in words
    assert truth["overcharge"] in words
    assert_valid_blocks(card.blocks)
    for update in updates:
        assert_valid_blocks(update.args["blocks"])

    async with bot.runtime.engine.connect() as conn:
        row = (await conn.execute(select(schema.cases))).one()
    assert (row.channel, row.thread_ts, row.message_ts) == (CHANNEL, thread, card.ts)
    assert row.requester == SUPPORT and row.customer_id == sc["customer_id"]
    assert row.status == "awaiting_approval"


async def test_web_api_calls_share_one_kept_alive_connection(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    await client.send(mention(slack, f"{sc['customer_id']} {sc['question']}"))
    await bot.settled()
    calls = [c for c in slack.calls() if c.token == slack.bot_token]
    assert len(calls) >= 3  # auth.test, the progress message, its updates, the card
    # slack_sdk opens a new session (TCP connection, TLS handshake) per call unless it is given one.
    # Calls made at the same moment may open a second pooled connection; a dozen calls must not open more.
    assert len({c.peer for c in calls}) <= 2 < len(calls), sorted({c.peer for c in calls})


async def test_benign_mention_gets_the_explanation_and_the_reply_to_copy(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="explain_only")
    opened = await open_case(slack, client, bot, sc)
    message = slack.message(CHANNEL, opened.card_ts)
    case = await bot.runtime.service.show_case(opened.case_id)
    assert case["status"] == "explained" and opened.credit_note_id is None
    assert buttons(message) == []
    words = all_text(message.blocks)
    assert "Explained" in words and "Reply to the customer" in words
    assert case["reply"]["customer_message"] in words  # exactly the text `case show` returns
    assert "[E" not in words  # evidence references are the write-up's, not Slack's
    assert_valid_blocks(message.blocks)


async def test_mention_in_a_thread_answers_in_that_thread(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    parent = slack.post_user_message(CHANNEL, "Customer C-0006 wrote in about October", user=SUPPORT)
    sc = scenario("C-0006")
    typed = slack.post_user_message(
        CHANNEL, p.mention_text(f"C-0006 {sc['question']}"), user=SUPPORT, thread_ts=parent.ts
    )
    event = p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts, thread_ts=parent.ts)
    assert (await client.send(event)).status == 200
    await bot.settled()
    (answer,) = bot_replies(slack, CHANNEL, parent.ts)
    assert "Explained" in answer.text


async def test_mention_without_a_customer_id_is_asked_for_one_and_opens_nothing(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "a customer says we charged them twice in May")
    assert (await client.send(event)).status == 200
    await bot.settled()
    (ask,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert "customer id" in ask.text and "C-0007" in ask.text
    assert await count(bot, schema.cases) == 0


async def test_mention_of_a_customer_the_ledger_does_not_know_says_so(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "C-99999 why was I charged 10.00?")
    assert (await client.send(event)).status == 200
    await bot.settled()
    (answer,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert "can't find customer C-99999" in all_text(answer.blocks)
    assert buttons(answer) == []


async def test_bad_signature_and_stale_timestamp_are_refused_and_open_nothing(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    event = mention(slack, "C-0017 charged twice")
    forged = await client.send(event, secret="not-our-secret")
    stale = await client.send(event, timestamp=int(time.time()) - 6 * 60)
    assert (forged.status, stale.status) == (401, 401)
    await asyncio.sleep(0.2)
    await bot.settled()
    assert await count(bot, schema.cases) == 0
    assert await count(bot, schema.slack_events) == 0
    assert slack.calls("chat.postMessage") == []


async def test_a_retried_event_opens_one_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    first, *retries = await asyncio.gather(
        client.send(event),
        client.send(event, retry_num=1),
        client.send(event, retry_num=2),
    )
    late = await client.send(event, retry_num=3)
    assert [r.status for r in (first, *retries, late)] == [200, 200, 200, 200]
    await bot.settled()
    assert await count(bot, schema.cases) == 1
    assert await count(bot, schema.credit_notes) == 1
    assert len(bot_replies(slack, CHANNEL, event["event"]["ts"])) == 1
    async with bot.runtime.engine.connect() as conn:
        events = schema.slack_events
        claimed = (await conn.execute(select(events).where(events.c.event_id.not_like("mention:%")))).one()
        case_id = (await conn.execute(select(schema.cases.c.id))).scalar_one()
    assert (claimed.event_id, claimed.case_id) == (event["event_id"], case_id)


async def test_messages_from_bots_never_start_a_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    ours = mention(slack, "C-0017 charged twice", user=slack.workspace.bot_user_id)
    other_bot = mention(slack, "C-0017 charged twice", user="U0OTHERBOT")
    other_bot["event"]["bot_id"] = "B0OTHERBOT"
    for event in (ours, other_bot):
        assert (await client.send(event)).status == 200
    await asyncio.sleep(0.2)
    await bot.settled()
    assert await count(bot, schema.cases) == 0
    assert slack.calls("chat.postMessage") == []


async def test_message_shortcut_confirms_the_customer_and_investigates_in_that_thread(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    forwarded = slack.post_user_message(CHANNEL, f"{sc['customer_id']}: {sc['question']}", user="U0CUSTOMER")
    shortcut = p.message_action(forwarded.to_slack(), user=SUPPORT, channel=CHANNEL)
    assert (await client.send(shortcut)).status == 200
    await bot.settled()
    (modal,) = slack.views("modal")
    view = modal.view
    assert view["callback_id"] == INVESTIGATE_MODAL_CALLBACK_ID
    assert_valid_view(view)
    fields = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert fields[CUSTOMER_BLOCK_ID]["initial_value"] == sc["customer_id"]
    assert fields[WORDS_BLOCK_ID]["initial_value"] == sc["question"]

    wrong = p.view_submission(
        view, user=SUPPORT, values={CUSTOMER_BLOCK_ID: {CUSTOMER_ACTION_ID: "C-9999"}, WORDS_BLOCK_ID: {}}
    )
    refused = await client.send(wrong)
    assert refused.json()["response_action"] == "errors"
    assert set(refused.json()["errors"]) == {CUSTOMER_BLOCK_ID, WORDS_BLOCK_ID}
    assert "no customer C-9999" in refused.json()["errors"][CUSTOMER_BLOCK_ID]

    submit = p.view_submission(
        view,
        user=SUPPORT,
        values={
            CUSTOMER_BLOCK_ID: {CUSTOMER_ACTION_ID: sc["customer_id"]},
            WORDS_BLOCK_ID: {WORDS_ACTION_ID: sc["question"]},
        },
    )
    accepted = await client.send(submit)
    assert accepted.status == 200 and accepted.body == ""  # an empty ack closes the modal
    await bot.settled()
    (card,) = bot_replies(slack, CHANNEL, forwarded.ts)
    assert buttons(card) == CARD_BUTTONS
    async with bot.runtime.engine.connect() as conn:
        row = (await conn.execute(select(schema.cases))).one()
    assert (row.thread_ts, row.requester, row.customer_id) == (forwarded.ts, SUPPORT, sc["customer_id"])


async def test_twenty_concurrent_mentions_are_all_acked_fast_and_all_answered(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    customers = [f"C-{n:04d}" for n in range(1, 21)]
    events = [mention(slack, f"{c} {scenario(c)['question']}") for c in customers]
    answers = await asyncio.gather(*(client.send(e) for e in events))
    assert all(a.status == 200 for a in answers)
    assert max(a.elapsed for a in answers) < SLACK_ACK_LIMIT  # acks never wait for an investigation
    await bot.settled(timeout=60)
    assert await count(bot, schema.cases) == 20
    async with bot.runtime.engine.connect() as conn:
        statuses = (await conn.execute(text("SELECT count(*) FROM cases WHERE message_ts IS NULL"))).scalar()
    assert statuses == 0
    for event in events:
        (answer,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
        assert "Investigating" not in answer.text
