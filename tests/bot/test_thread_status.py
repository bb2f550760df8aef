"""While a case is investigated the thread shows it: as its own status line where the workspace lets the app
set one (assistant.threads.setStatus), cleared by the card landing as a reply; elsewhere as today's progress
message, after asking Slack once per process."""

from __future__ import annotations

from sqlalchemy import select

from agent.graph.configuration import Configuration
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    SECRET,
    approval_settings,
    bot_replies,
    buttons,
    first_scenario,
    mention,
)

STATUS = "assistant.threads.setStatus"


async def mention_and_wait(slack: SlackRecorder, client: SignedClient, bot: RunningBot, sc: dict) -> str:
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    assert (await client.send(event)).status == 200
    await bot.settled()
    return str(event["event"]["ts"])


async def test_the_thread_status_shows_the_investigation_and_the_card_clears_it(ready_db_url: str) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    async with (
        SlackRecorder(assistant_status=True) as slack,
        running_bot(
            ready_db_url, slack.settings(signing_secret=SECRET), approval_settings=approval_settings(),
            configuration=Configuration(investigator="offline"), recover=False, expiry_interval=None,
        ) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):  # fmt: skip
        thread = await mention_and_wait(slack, client, bot, sc)
        (status,) = slack.calls(STATUS)
        assert status.args["thread_ts"] == thread and status.args["channel_id"] == CHANNEL
        assert status.args["status"] == f"is investigating {sc['customer_id']}…"
        (card,) = bot_replies(slack, CHANNEL, thread)  # no progress message: the card is the only reply
        assert buttons(card) == CARD_BUTTONS and card.updates == 0
        assert slack.thread_status(CHANNEL, thread) == ""  # the card's reply cleared it
        cases = schema.cases.c
        async with bot.runtime.engine.connect() as conn:
            row = (
                await conn.execute(select(cases.status, cases.message_ts).where(cases.thread_ts == thread))
            ).one()
        assert tuple(row) == ("awaiting_approval", card.ts)  # the card is the case's message from here on


async def test_without_thread_statuses_the_progress_message_is_used_and_slack_asked_once(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    first = await mention_and_wait(
        slack, client, bot, first_scenario(action="credit_note", single_approver=True)
    )
    second = await mention_and_wait(slack, client, bot, first_scenario(action="explain_only"))
    assert len(slack.calls(STATUS)) == 1  # unknown_method once: this process does not ask again
    for thread in (first, second):
        (message,) = bot_replies(slack, CHANNEL, thread)
        assert message.updates >= 1  # the progress message, then its result drawn over it
