"""Seals reach Slack: `billsleuth activity seal` posts the chain's head to the finance channel (or each
approver by DM) and records where it went; the bot posts one once a day while the log grows and after every
change of the policy, whoever made it."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy import select

from approvals import seals
from approvals.policy_store import policy_in_force
from bot.flows.seals import seal_when_due
from bot.server import running_bot
from bot.slack_testing import SlackRecorder
from bot.slack_testing.recorder import dm_channel
from engine import schema
from engine.db import create_engine
from tests.bot.helpers import (
    FINANCE,
    SECRET,
    all_text,
    approval_settings,
    assert_valid_blocks,
    offline_bot,
)
from tests.cli import Done, billsleuth_async
from tests.test_activity_log import insert_rows

FINANCE_CHANNEL = "C0FINANCE"


def seal_posts(slack: SlackRecorder, channel: str) -> list[Any]:
    return [m for m in slack.messages(channel) if m.text.startswith("Activity log seal: ")]


def posted_line(message: Any) -> str:
    return str(message.text.removeprefix("Activity log seal: "))


async def sealed_rows(url: str) -> list[Any]:
    log = schema.activity_log.c
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            query = select(log.actor_type, log.actor_id, log.entity_id, log.details).where(
                log.action == seals.SEALED
            )
            return list((await conn.execute(query.order_by(log.id))).all())
    finally:
        await engine.dispose()


async def seal_cli(url: str, slack: SlackRecorder, **env: str) -> Done:
    """`billsleuth activity seal`, off this loop: the recorder keeps serving on it meanwhile."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "BILLSLEUTH_"))}
    environment |= {
        "DATABASE_URL": url,
        "SLACK_API_URL": slack.api_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        **env,
    }
    return await billsleuth_async("activity", "seal", env=environment)


async def test_activity_seal_posts_to_the_finance_channel_and_records_it(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    insert_rows(ready_db_url, 3)
    sealed = await seal_cli(ready_db_url, slack, BILLSLEUTH_FINANCE_CHANNEL=FINANCE_CHANNEL)
    assert sealed.returncode == 0, sealed.stderr
    line = sealed.stdout.strip()
    [post] = seal_posts(slack, FINANCE_CHANNEL)
    assert posted_line(post) == line
    assert f"billsleuth activity verify --anchor {line}" in all_text(post.blocks)
    assert_valid_blocks(post.blocks)
    [(actor_type, actor_id, entity_id, details)] = await sealed_rows(ready_db_url)
    row, hash_ = line.split(":")
    assert (actor_type, entity_id) == ("user", row) and actor_id.startswith("cli:")
    assert details == {"row": int(row), "hash": hash_, "why": seals.BY_HAND, "posted_to": [FINANCE_CHANNEL]}


async def test_without_a_finance_channel_each_approver_gets_the_seal_by_dm(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    engine = create_engine(ready_db_url)
    try:
        await policy_in_force(engine, approval_settings(), actor_type="user", actor_id="ops")  # first policy
    finally:
        await engine.dispose()
    sealed = await seal_cli(ready_db_url, slack)
    assert sealed.returncode == 0, sealed.stderr
    assert [[posted_line(m) for m in seal_posts(slack, dm_channel(u))] for u in FINANCE] == [
        [sealed.stdout.strip()]
    ] * len(FINANCE)
    [(_, _, _, details)] = await sealed_rows(ready_db_url)
    assert details["posted_to"] == sorted(FINANCE)


async def test_a_seal_slack_refused_is_not_recorded(ready_db_url: str, slack: SlackRecorder) -> None:
    slack.fail_next("chat.postMessage", "channel_not_found")
    refused = await seal_cli(ready_db_url, slack, BILLSLEUTH_FINANCE_CHANNEL=FINANCE_CHANNEL)
    assert refused.returncode == 1 and "channel_not_found" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "nothing was recorded" in refused.stderr
    assert await sealed_rows(ready_db_url) == []


async def test_the_bot_seals_after_every_policy_change_whoever_made_it(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"finance_channel": FINANCE_CHANNEL})
    async with running_bot(
        ready_db_url, settings, approval_settings=approval_settings(), recover=False, expiry_interval=None,
        seal_check=0.1,
    ) as bot:  # fmt: skip
        # Its start stored the policy (the database's db.policy rows): a seal follows.
        await slack.wait_until(lambda: len(seal_posts(slack, FINANCE_CHANNEL)) == 1)
        first = seal_posts(slack, FINANCE_CHANNEL)[0]
        assert "after a change of the approval policy" in all_text(first.blocks)
        await asyncio.sleep(0.5)
        assert len(seal_posts(slack, FINANCE_CHANNEL)) == 1  # nothing new since: no second seal

        with psycopg.connect(ready_db_url, application_name="psql") as conn:  # a change behind its back
            conn.execute("UPDATE policy SET value = '500.00' WHERE name = 'BILLSLEUTH_TWO_PERSON_THRESHOLD'")
        await slack.wait_until(lambda: len(seal_posts(slack, FINANCE_CHANNEL)) == 2)
        second = seal_posts(slack, FINANCE_CHANNEL)[1]
        assert int(posted_line(second).split(":")[0]) > int(posted_line(first).split(":")[0])
        for post in seal_posts(slack, FINANCE_CHANNEL):
            assert (await seals.verify_anchor(bot.runtime.engine, seals.parse_seal(posted_line(post)))).intact
    whys = [details["why"] for *_, details in await sealed_rows(ready_db_url)]
    assert whys == [seals.POLICY_CHANGE, seals.POLICY_CHANGE]


async def test_the_daily_seal_is_posted_once_a_day_while_the_log_grows(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    async with offline_bot(ready_db_url, slack) as bot:  # no seal loop: the test looks itself
        now = datetime.now(UTC)
        first = await seal_when_due(bot.runtime, now)  # the start stored the policy
        assert first is not None and await seal_when_due(bot.runtime, now) is None
        tomorrow = now + timedelta(days=1)
        assert await seal_when_due(bot.runtime, tomorrow) is None  # a quiet log: the last row is the seal
        insert_rows(ready_db_url, 1)
        assert await seal_when_due(bot.runtime, now) is None  # today's seal was posted
        daily = await seal_when_due(bot.runtime, tomorrow)
        assert daily is not None and daily.row > first.row
        assert await seal_when_due(bot.runtime, tomorrow) is None
    posts = [m for u in FINANCE for m in seal_posts(slack, dm_channel(u))]  # no finance channel: DMs
    assert [posted_line(m) for m in posts] == [first.line(), daily.line()] * len(FINANCE)
    assert "the daily seal" in all_text(posts[-1].blocks)
    whys = [details["why"] for *_, details in await sealed_rows(ready_db_url)]
    assert whys == [seals.POLICY_CHANGE, seals.DAILY]
