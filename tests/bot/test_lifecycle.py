"""Starting and stopping: recovery of interrupted cases at start-up, and `billsleuth bot` as real processes
— two of them on one Postgres act as one, and SIGTERM stops them cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from agent.graph.configuration import Configuration
from approvals import decisions
from bot.cards import APPROVE_ACTION_ID
from bot.runtime import Pacer
from bot.server import run_bot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from bot.slack_testing.processes import wait_until_serving
from engine import schema
from engine.db import create_engine
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    FINANCE,
    SECRET,
    SUPPORT,
    all_text,
    approval_settings,
    bot_processes,
    bot_replies,
    buttons,
    eventually,
    first_scenario,
    mention,
    open_case,
)

BILLSLEUTH = Path(sys.executable).with_name("billsleuth")
ALICE, BOB, _ = FINANCE


# ---- recovery at start-up ------------------------------------------------------------------------------


async def test_an_investigation_interrupted_by_a_stop_is_finished_and_shown_at_start(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    asked = slack.post_user_message(
        CHANNEL, p.mention_text(f"{sc['customer_id']} {sc['question']}"), user=SUPPORT
    )
    # What a stop leaves behind: the case row and its "investigating…" message, no checkpoint yet.
    progress = slack.post_user_message(
        CHANNEL, "Case CASE-0042: Investigating…", user=slack.workspace.bot_user_id, thread_ts=asked.ts
    )
    engine = create_engine(ready_db_url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(schema.cases).values(
                id="CASE-0042",
                customer_id=sc["customer_id"],
                question=sc["question"],
                requester=SUPPORT,
                status="investigating",
                channel=CHANNEL,
                thread_ts=asked.ts,
                message_ts=progress.ts,
            )
        )
    await engine.dispose()
    async with running_bot(
        ready_db_url,
        slack.settings(signing_secret=SECRET),
        configuration=Configuration(investigator="offline"),
        approval_settings=approval_settings(),
        expiry_interval=None,
    ) as bot:
        await bot.settled()
        case = await bot.runtime.service.show_case("CASE-0042")
    assert case["status"] == "awaiting_approval"
    card = slack.message(CHANNEL, progress.ts)
    assert buttons(card) == CARD_BUTTONS
    assert sc["truth"]["overcharge"] in all_text(card.blocks)
    assert len(bot_replies(slack, CHANNEL, asked.ts)) == 1  # drawn in its own message, not a new one


async def test_a_decision_claimed_but_not_applied_before_a_stop_is_applied_at_start(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = dict(
        configuration=Configuration(investigator="offline"),
        approval_settings=approval_settings(),
        recover=False,
        expiry_interval=None,
    )
    sc = first_scenario(action="credit_note", single_approver=True)
    async with (
        running_bot(ready_db_url, slack.settings(signing_secret=SECRET), **settings) as first,
        SignedClient(first.url, SECRET) as client,
    ):
        opened = await open_case(slack, client, first, sc)
        # The vote is claimed in the database; the process stops before resuming the graph.
        await decisions.decide(
            first.runtime.engine,
            opened.credit_note_id or "",
            approver=ALICE,
            decision="approve",
            requester=SUPPORT,
            settings=approval_settings(),
        )
    settings["recover"] = True
    async with running_bot(ready_db_url, slack.settings(signing_secret=SECRET), **settings) as second:
        await second.settled()
        case = await second.runtime.service.show_case(opened.case_id)
    assert case["status"] == "issued"
    card = slack.message(CHANNEL, opened.card_ts)
    assert buttons(card) == [] and "Issued" in all_text(card.blocks)
    replies = [
        m
        for m in bot_replies(slack, CHANNEL, opened.thread_ts)
        if "Reply to the customer" in all_text(m.blocks)
    ]
    assert len(replies) == 1 and sc["truth"]["overcharge"] in all_text(replies[0].blocks)


# ---- Socket Mode ------------------------------------------------------------------------------------------


async def test_socket_mode_runs_the_same_bot_and_stops_cleanly(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    stop = asyncio.Event()
    ready: list[str] = []
    running = asyncio.create_task(
        run_bot(
            ready_db_url,
            slack.settings(),  # the app-level token, no signing secret
            mode="socket",
            stop=stop,
            on_ready=ready.append,
            configuration=Configuration(investigator="offline"),
            approval_settings=approval_settings(),
            recover=False,
            expiry_interval=None,
        )
    )
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    ack = await slack.socket_send(event, timeout=10)
    assert set(ack) == {"envelope_id"}
    thread = event["event"]["ts"]
    await eventually(lambda: any(buttons(m) for m in bot_replies(slack, CHANNEL, thread)))
    assert ready == ["socket mode"]
    stop.set()
    await asyncio.wait_for(running, 10)
    assert not slack.socket_connected


def test_the_pacer_hands_out_at_most_its_rate() -> None:
    pacer = Pacer(2.0)
    assert [pacer.try_take() for _ in range(3)] == [True, False, False]
    unlimited = Pacer(None)
    assert all(unlimited.try_take() for _ in range(100))
    with pytest.raises(ValueError, match="above zero"):
        Pacer(0)


# ---- `billsleuth bot` as processes ------------------------------------------------------------------------


@pytest.fixture
async def two_bots(
    ready_db_url: str, slack: SlackRecorder
) -> AsyncIterator[list[tuple[subprocess.Popen, str]]]:
    with bot_processes(ready_db_url, slack, 2) as bots:
        await asyncio.gather(*(wait_until_serving(url, process) for process, url in bots))
        yield bots


async def test_two_bot_processes_on_one_postgres_act_as_one(
    ready_db_url: str, slack: SlackRecorder, two_bots: list[tuple[subprocess.Popen, str]]
) -> None:
    urls = [url + "/slack/events" for _, url in two_bots]
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    thread = event["event"]["ts"]
    async with SignedClient(urls[0], SECRET) as a, SignedClient(urls[1], SECRET) as b:
        # Slack delivers the same event to both (a retry that landed on the other process).
        answers = await asyncio.gather(a.send(event), b.send(event, retry_num=1))
        assert [x.status for x in answers] == [200, 200]
        await eventually(lambda: any(buttons(m) for m in bot_replies(slack, CHANNEL, thread)))
        await asyncio.sleep(0.5)  # time for a second case, if there were going to be one
        (card,) = bot_replies(slack, CHANNEL, thread)

        # Two approvers click at once, each landing on a different process.
        clicks = [
            p.click(card.to_slack(), user=who, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
            for who in (ALICE, BOB)
        ]
        answers = await asyncio.gather(a.send(clicks[0]), b.send(clicks[1]))
        assert [x.status for x in answers] == [200, 200]

        def reply_posted() -> bool:
            return any(
                "Reply to the customer" in all_text(m.blocks) for m in bot_replies(slack, CHANNEL, thread)
            )

        await eventually(lambda: reply_posted() and len(slack.ephemerals()) == 1)
        await asyncio.sleep(0.5)

    engine = create_engine(ready_db_url)
    async with engine.connect() as conn:
        cases = (await conn.execute(select(schema.cases))).all()
        votes = (await conn.execute(select(schema.approvals))).all()
        notes = (await conn.execute(select(schema.credit_notes.c.status))).scalars().all()
    await engine.dispose()
    assert len(cases) == 1 and cases[0].status == "issued"
    assert len(votes) == 1 and notes == ["issued"]
    messages = bot_replies(slack, CHANNEL, thread)
    assert len(messages) == 2  # the card and one customer reply
    assert buttons(slack.message(CHANNEL, card.ts)) == []
    (loser,) = slack.ephemerals()
    assert loser.user in (ALICE, BOB) and loser.user != votes[0].approver

    for process, _ in two_bots:
        process.send_signal(signal.SIGTERM)
    for process, _ in two_bots:
        assert process.wait(30) == 0  # a clean shutdown


def test_bot_command_says_what_is_missing_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "BILLSLEUTH_"))}
    env["BILLSLEUTH_HOME"] = str(tmp_path)
    done = subprocess.run(
        [str(BILLSLEUTH), "bot", "--http"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "billsleuth: error: HTTP mode needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (not set)"
    )
