"""Approvers are told: one message each (a DM, or one post in the finance channel) when a note needs them,
with the amount, the customer and a link to the card; one reminder at half the approval time to those who
have not voted; and those messages updated to say who decided."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing.recorder import dm_channel
from tests.bot.helpers import FINANCE, SECRET, SUPPORT, all_text, first_scenario, open_case

ALICE, BOB, CAROL = FINANCE
FINANCE_CHANNEL = "C0FINANCE"
OPTIONS: dict[str, Any] = dict(
    configuration=Configuration(investigator="offline"), recover=False, expiry_interval=None, outbox_poll=0.2
)


def policy(ttl_hours: str = "72") -> ApprovalSettings:
    return ApprovalSettings(approvers=frozenset(FINANCE), approval_ttl_hours=Decimal(ttl_hours))


def dms(slack: SlackRecorder, user: str) -> list[StoredMessage]:
    return slack.messages(dm_channel(user))


def texts(messages: list[StoredMessage]) -> list[str]:
    return [all_text(m.blocks) for m in messages]


async def test_each_approver_gets_one_notice_one_reminder_and_sees_who_decided(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    sc = first_scenario(action="credit_note", single_approver=False)  # two approvers needed
    # 0.002 h: the reminder comes after 3.6 s, the note expires after 7.2 s.
    async with (
        running_bot(
            ready_db_url, slack.settings(signing_secret=SECRET), approval_settings=policy("0.002"), **OPTIONS
        ) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        opened = await open_case(slack, client, bot, sc)
        note_id = opened.credit_note_id or ""
        await slack.wait_until(lambda: all(dms(slack, a) for a in FINANCE))
        for approver in FINANCE:
            (notice,) = texts(dms(slack, approver))
            assert note_id in notice and sc["truth"]["overcharge"] in notice and sc["customer_id"] in notice
            assert f"/archives/C0BILLING/p{opened.card_ts.replace('.', '')}|Open the card" in notice
            assert "Approvals: 0 of 2" in notice
        assert dms(slack, SUPPORT) == []  # the requester is not an approver and is told nothing here

        await bot.runtime.service.decide(note_id, approver=BOB, decision="approve", source="slack:T0")
        await slack.wait_until(lambda: len(dms(slack, ALICE)) == 2, timeout=6.0)
        await slack.wait_until(lambda: len(dms(slack, CAROL)) == 2, timeout=1.0)
        assert (
            "Reminder" in texts(dms(slack, ALICE))[1] and "Approvals: 1 of 2" in texts(dms(slack, ALICE))[1]
        )
        assert len(dms(slack, BOB)) == 1  # BOB voted: no reminder

        await bot.runtime.service.decide(note_id, approver=CAROL, decision="approve", source="slack:T0")
        await slack.wait_until(lambda: all("Decided" in t for a in FINANCE for t in texts(dms(slack, a))))
        assert f"approved by <@{BOB}>, <@{CAROL}> and issued" in texts(dms(slack, ALICE))[0]
        await _quiet(bot)
        assert [len(dms(slack, a)) for a in FINANCE] == [2, 1, 2]  # nothing more was posted


async def test_with_a_finance_channel_one_post_names_the_approvers_and_says_who_rejected(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"finance_channel": FINANCE_CHANNEL})
    async with (
        running_bot(ready_db_url, settings, approval_settings=policy(), **OPTIONS) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        opened = await open_case(slack, client, bot, sc)
        await slack.wait_until(lambda: len(slack.messages(FINANCE_CHANNEL)) == 1)
        (post,) = texts(slack.messages(FINANCE_CHANNEL))
        assert all(f"<@{a}>" in post for a in FINANCE) and opened.credit_note_id in post
        assert all(dms(slack, a) == [] for a in FINANCE)
        await bot.runtime.service.decide(
            opened.credit_note_id or "",
            approver=ALICE,
            decision="reject",
            comment="paid by wire",
            source="slack:T0",
        )
        await slack.wait_until(lambda: "Decided" in texts(slack.messages(FINANCE_CHANNEL))[0])
        assert f"rejected by <@{ALICE}>: paid by wire" in texts(slack.messages(FINANCE_CHANNEL))[0]
        await _quiet(bot)
        assert len(slack.messages(FINANCE_CHANNEL)) == 1


async def _quiet(bot: RunningBot) -> None:
    """Let a few outbox polls pass: anything still to be posted would be by now."""
    await bot.settled()
    await asyncio.sleep(1.0)
