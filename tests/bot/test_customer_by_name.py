"""A mention that names the customer instead of numbering it: one clear match is investigated (the card
says how it was found); several get a question in the thread with a button each, and the pick runs the
case for that customer, once."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from bot.cards.ids import PICK_CUSTOMER_ACTION_ID
from bot.flows.show import redraw_behind
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    FINANCE,
    SUPPORT,
    all_text,
    bot_replies,
    buttons,
    mention,
    scenario,
    snapshot,
)


async def names(bot: RunningBot) -> dict[str, str]:
    c = schema.customers.c
    async with bot.runtime.engine.connect() as conn:
        return dict((await conn.execute(select(c.id, c.name))).all())


async def case_of_thread(bot: RunningBot, thread: str) -> tuple[str, str | None, str, str | None]:
    c = schema.cases.c
    async with bot.runtime.engine.connect() as conn:
        row = (
            await conn.execute(select(c.id, c.customer_id, c.status, c.found_by).where(c.thread_ts == thread))
        ).one()
    return tuple(row)  # type: ignore[return-value]


async def test_a_customer_named_in_the_words_is_investigated_and_the_card_says_so(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = scenario("C-0001")
    name = (await names(bot))["C-0001"]
    event = mention(slack, f"Hi, {name} writes: {sc['question']}")
    assert (await client.send(event)).status == 200
    await bot.settled()
    thread = event["event"]["ts"]
    (card,) = bot_replies(slack, CHANNEL, thread)
    assert buttons(card) == CARD_BUTTONS and "found by name" in all_text(card.blocks)
    _, customer, status, found_by = await case_of_thread(bot, thread)
    assert (customer, status, found_by) == ("C-0001", "awaiting_approval", "name")


async def mention_a_shared_name(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> tuple[dict[str, str], str, str]:
    """Mention the bot with a name several customers share (`Helio Freight`, without its number);
    returns every customer's name, the shared name and the mention's thread."""
    everyone = await names(bot)
    base = Counter(n.rsplit("-", 1)[0] for n in everyone.values() if n.isascii())
    shared = next(b for b, count in base.most_common() if count >= 2)
    event = mention(slack, f"This is {shared}: why were we charged twice this month?")
    assert (await client.send(event)).status == 200
    await bot.settled()
    return everyone, shared, str(event["event"]["ts"])


async def test_several_candidates_get_a_button_each_and_the_pick_runs_the_case_once(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    everyone, shared, thread = await mention_a_shared_name(slack, bot, client)
    (question,) = bot_replies(slack, CHANNEL, thread)
    assert "Which customer is this?" in all_text(question.blocks)
    picks = [e for b in question.blocks if b["type"] == "actions" for e in b["elements"]]
    assert 2 <= len(picks) <= 5 and all(shared in e["text"]["text"] for e in picks)
    _, customer, status, _ = await case_of_thread(bot, thread)
    assert (customer, status) == (None, "needs_customer")

    chosen = picks[1]["value"].split()[1]
    seen = snapshot(question)
    click = p.click(
        seen, user=SUPPORT, channel=CHANNEL, action_id=PICK_CUSTOMER_ACTION_ID, value=picks[1]["value"]
    )
    assert (await client.send(click)).status == 200
    await bot.settled()
    assert f"picked {everyone[chosen]}" in all_text(question.blocks) and buttons(question) == []
    _, customer, status, found_by = await case_of_thread(bot, thread)
    assert customer == chosen and found_by == "chosen" and status not in ("needs_customer", "queued")
    replies = bot_replies(slack, CHANNEL, thread)
    assert len(replies) == 2  # the question, then the case's result

    late = p.click(
        seen, user=FINANCE[0], channel=CHANNEL, action_id=PICK_CUSTOMER_ACTION_ID, value=picks[0]["value"]
    )
    assert (await client.send(late)).status == 200
    await bot.settled()
    assert "customer_chosen_already" in slack.ephemerals(FINANCE[0])[-1].text
    assert (await case_of_thread(bot, thread))[1] == chosen and len(bot_replies(slack, CHANNEL, thread)) == 2


async def test_a_case_waiting_for_its_customer_to_be_picked_is_not_redrawn_by_recovery(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    _, _, thread = await mention_a_shared_name(slack, bot, client)
    assert await redraw_behind(bot.runtime) == []  # a restart's recovery: the question is all Slack shows
    assert len(bot_replies(slack, CHANNEL, thread)) == 1
