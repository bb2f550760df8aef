"""Two `billsleuth bot --http` processes on one database share the work with no coordinator but Postgres:
an event or a click delivered to both is handled once (the event claims, the case locks), every change in
the outbox reaches Slack once (FOR UPDATE SKIP LOCKED), and the daily findings sweep is split into shards
that each process takes by advisory lock — every shard audited once, one digest."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from sqlalchemy import insert, text

from agent.auditor import sweep as findings_sweep
from agent.cases.service import case_service
from agent.graph.configuration import Configuration
from bot import store
from bot.cards import APPROVE_ACTION_ID
from bot.config import SlackConfigError, SlackSettings
from bot.flows.digest import daily_findings_digest
from bot.server import create_app, running_bot, start_http
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from bot.slack_testing.processes import wait_until_serving
from engine import schema
from engine.db import create_engine
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    SECRET,
    all_text,
    approval_settings,
    bot_processes,
    bot_replies,
    buttons,
    eventually,
    mention,
)
from tests.bot.test_crash_recovery import sixteen_customers
from tests.test_audit_cli import injected

SWEEP = "C0SWEEP"
Bots = list[tuple[subprocess.Popen, str]]


def rows(db_url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


def small_credits(count: int) -> list[dict[str, Any]]:
    """Complaints whose credit one approver settles (under the two-person threshold)."""
    credits = [
        sc
        for sc in sixteen_customers()
        if sc["truth"]["expected_action"] == "credit_note" and Decimal(sc["truth"]["overcharge"]) < 300
    ]
    assert len(credits) >= count
    return credits[:count]


@pytest.fixture
async def two_bots(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[Bots]:
    with bot_processes(ready_db_url, slack, 2) as bots:
        await asyncio.gather(*(wait_until_serving(url, process) for process, url in bots))
        yield bots


async def send_to_both(bots: Bots, payloads: list[dict[str, Any]]) -> None:
    """Each payload delivered to both processes at once, as Slack does when a retry lands elsewhere."""
    a_url, b_url = (url + "/slack/events" for _, url in bots)
    async with SignedClient(a_url, SECRET) as a, SignedClient(b_url, SECRET) as b:
        sent = [a.send(x) for x in payloads] + [b.send(x, retry_num=1) for x in payloads]
        answers = await asyncio.gather(*sent)
    assert [x.status for x in answers] == [200] * len(sent)


async def cards_for(slack: SlackRecorder, threads: list[str]) -> list[Any]:
    await eventually(lambda: all(any(buttons(m) for m in bot_replies(slack, CHANNEL, t)) for t in threads))
    return [next(m for m in bot_replies(slack, CHANNEL, t) if buttons(m)) for t in threads]


async def test_every_event_delivered_to_both_processes_opens_one_case(
    ready_db_url: str, slack: SlackRecorder, two_bots: Bots
) -> None:
    events = [mention(slack, f"{sc['customer_id']} {sc['question']}") for sc in small_credits(6)]
    threads = [event["event"]["ts"] for event in events]
    await send_to_both(two_bots, events)
    await cards_for(slack, threads)
    await asyncio.sleep(1.0)  # time for a second case, if there were going to be one
    per_thread = rows(ready_db_url, "SELECT thread_ts, count(*) FROM cases GROUP BY thread_ts")
    assert sorted(per_thread) == sorted((t, 1) for t in threads)
    assert [len(bot_replies(slack, CHANNEL, t)) for t in threads] == [1] * len(threads)  # one card each


async def test_a_click_delivered_to_both_processes_is_one_vote_and_one_decision(
    ready_db_url: str, slack: SlackRecorder, two_bots: Bots
) -> None:
    events = [mention(slack, f"{sc['customer_id']} {sc['question']}") for sc in small_credits(3)]
    threads = [event["event"]["ts"] for event in events]
    await send_to_both(two_bots, events)
    cards = await cards_for(slack, threads)
    clicks = [
        p.click(card.to_slack(), user=FINANCE[0], channel=CHANNEL, action_id=APPROVE_ACTION_ID)
        for card in cards
    ]
    await send_to_both(two_bots, clicks)

    def replied(thread: str) -> bool:
        return any("Reply to the customer" in all_text(m.blocks) for m in bot_replies(slack, CHANNEL, thread))

    await eventually(lambda: all(replied(t) for t in threads))
    await asyncio.sleep(1.0)  # time for a second vote or reply, if there were going to be one
    votes = rows(ready_db_url, "SELECT credit_note_id, approver FROM approvals")
    assert len(votes) == len(threads) and len({v[0] for v in votes}) == len(threads)
    decided = rows(
        ready_db_url,
        "SELECT action, count(*) FROM activity_log WHERE action IN (%s, %s) GROUP BY action ORDER BY action",
        "credit_note.approved",
        "credit_note.issued",
    )
    assert decided == [("credit_note.approved", len(threads)), ("credit_note.issued", len(threads))]
    # The copy that lost the race tells the clicker the note is already decided: once per click.
    assert sorted(e.user for e in slack.ephemerals()) == [FINANCE[0]] * len(threads)
    assert [len(bot_replies(slack, CHANNEL, t)) for t in threads] == [2] * len(threads)  # card + one reply
    assert all(buttons(slack.message(CHANNEL, card.ts)) == [] for card in cards)


async def test_the_outbox_drained_by_both_processes_delivers_each_change_once(
    ready_db_url: str, slack: SlackRecorder, two_bots: Bots
) -> None:
    events = [mention(slack, f"{sc['customer_id']} {sc['question']}") for sc in small_credits(10)]
    threads = [event["event"]["ts"] for event in events]
    await send_to_both(two_bots, events)
    cards = await cards_for(slack, threads)
    await asyncio.sleep(1.0)  # the cards' own outbox rows delivered before the changes below
    updates_before = len(slack.calls("chat.update"))
    notes = rows(ready_db_url, "SELECT id FROM credit_notes WHERE status = 'draft' ORDER BY id")
    assert len(notes) == len(threads)
    # Decided outside either bot: only the outbox (woken in both processes by NOTIFY) brings it to Slack.
    async with case_service(ready_db_url, Configuration(investigator="offline"), approval_settings()) as svc:
        await asyncio.gather(
            *(svc.decide(note_id, approver=FINANCE[0], decision="approve") for (note_id,) in notes)
        )

    def shown(card_ts: str) -> bool:
        return "· issued" in str(slack.message(CHANNEL, card_ts).blocks[0]["text"]["text"])

    await eventually(lambda: all(shown(card.ts) for card in cards))
    await eventually(lambda: not rows(ready_db_url, "SELECT id FROM outbox"))
    await asyncio.sleep(1.0)
    # Each approver's notice told once of each step (approved, then issued), never one step twice.
    notices = [
        (c.args["channel"], c.args["ts"], json.dumps(c.args["blocks"], sort_keys=True))
        for c in slack.calls("chat.update")[updates_before:]
        if c.args.get("channel") != CHANNEL
    ]
    twice = [(where, ts) for (where, ts, _), n in Counter(notices).items() if n > 1]
    assert notices and not twice, twice
    assert all(buttons(slack.message(CHANNEL, card.ts)) == [] for card in cards)
    replies = [
        [m for m in bot_replies(slack, CHANNEL, t) if "Reply to the customer" in all_text(m.blocks)]
        for t in threads
    ]
    assert [len(r) for r in replies] == [1] * len(threads)


async def test_two_processes_taking_changes_at_once_take_different_ones(ready_db_url: str) -> None:
    """What each process takes from the outbox is locked until it commits; the other skips those rows
    instead of waiting for them or taking them too."""
    engine = create_engine(ready_db_url)
    try:
        async with engine.begin() as conn:
            for n in range(4):
                await conn.execute(
                    insert(schema.outbox).values(
                        entity_type="case", entity_id=f"C-{n}", case_id=f"C-{n}", change="status"
                    )
                )
        async with engine.begin() as first, engine.begin() as second:
            mine = await store.take_changes(first, 2)
            theirs = await asyncio.wait_for(store.take_changes(second, 100), timeout=5)
    finally:
        await engine.dispose()
    assert len(mine) == 2 and len(theirs) == 2
    assert not {c.id for c in mine} & {c.id for c in theirs}


async def test_with_reuse_port_two_bots_listen_on_one_port_and_both_answer(slack: SlackRecorder) -> None:
    settings = slack.settings(signing_secret=SECRET)
    first = await start_http(create_app(settings), host="127.0.0.1", port=0, reuse_port=True)
    try:
        second = await start_http(create_app(settings), host="127.0.0.1", port=first.port, reuse_port=True)
        await second.stop()
    finally:
        await first.stop()
    assert SlackSettings.from_env({"BILLSLEUTH_REUSE_PORT": "1"}).reuse_port
    assert not SlackSettings.from_env({}).reuse_port
    with pytest.raises(SlackConfigError, match=r"^BILLSLEUTH_REUSE_PORT must be 1 or 0, got 'yes please'$"):
        SlackSettings.from_env({"BILLSLEUTH_REUSE_PORT": "yes please"})


# ---- the daily findings sweep, sharded -------------------------------------------------------------------


def shard_records(db_url: str) -> list[dict[str, Any]]:
    found = rows(
        db_url,
        "SELECT details FROM activity_log WHERE action = %s ORDER BY id",
        findings_sweep.SHARD_DONE,
    )
    return [r[0] for r in found]


def assert_swept_once(db_url: str) -> None:
    """Every shard audited once, together every customer once, every finding recorded once."""
    records = shard_records(db_url)
    assert sorted(r["shard"] for r in records) == list(range(records[0]["shards"]))
    ((customers,),) = rows(db_url, "SELECT count(*) FROM customers")
    assert sum(r["customers"] for r in records) == customers
    found = [(f[1], f[2]) for r in records for f in r["findings"]]
    assert len(found) == len(set(found)) == len(injected())
    assert rows(db_url, "SELECT count(*) FROM sweep_findings") == [(len(injected()),)]


async def test_two_processes_share_the_daily_sweep_shard_by_shard_and_post_one_digest(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    sweeping = {"BILLSLEUTH_SWEEP_CHANNEL": SWEEP, "BILLSLEUTH_SWEEP_HOUR": "0"}
    with bot_processes(ready_db_url, slack, 2, **sweeping) as bots:
        # Both start the day's run as they start serving: at the same time, on one database.
        await asyncio.gather(*(wait_until_serving(url, process) for process, url in bots))
        await slack.wait_until(lambda: len(slack.messages(SWEEP)) == 1, timeout=60)
        await asyncio.sleep(1.0)  # time for a second digest, if there were going to be one
    assert len(slack.messages(SWEEP)) == 1
    assert_swept_once(ready_db_url)
    daily_runs = "SELECT count(*) FROM activity_log WHERE action = %s"
    daily = rows(ready_db_url, daily_runs, findings_sweep.DAILY_RUN)
    assert daily == [(1,)]
    posted = rows(ready_db_url, "SELECT count(*) FROM sweep_findings WHERE posted_at IS NOT NULL")
    assert posted == [(len(injected()),)]


async def test_a_shard_whose_process_died_is_taken_by_another_and_then_the_digest_goes_out(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    """A process holding a shard (mid-audit) blocks the digest, not the other shards; when it dies its lock
    goes with its connection, and the next look audits that shard alone and posts the day's digest."""
    now = datetime(2026, 12, 2, 7, 5, tzinfo=UTC)
    dying = create_engine(ready_db_url)
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"sweep_channel": SWEEP})
    async with running_bot(
        ready_db_url,
        settings,
        configuration=Configuration(investigator="offline"),
        recover=False,
        expiry_interval=None,
        digest_check=None,
    ) as bot:
        conn = await dying.connect()
        await conn.execute(
            text("SELECT pg_advisory_lock(hashtext(:key))"), {"key": "billsleuth:sweep-shard:2026-12-02:3"}
        )
        assert await daily_findings_digest(bot.runtime, now=now) is None  # shard 3 still "being audited"
        others = [s for s in range(findings_sweep.SHARDS) if s != 3]
        assert sorted(r["shard"] for r in shard_records(ready_db_url)) == others
        assert slack.messages(SWEEP) == []
        await conn.close()  # the holder dies: its session's locks go with it
        await dying.dispose()
        posted = await daily_findings_digest(bot.runtime, now=now.replace(hour=8))
        assert posted is not None and posted.findings == len(injected())
        assert await daily_findings_digest(bot.runtime, now=now.replace(hour=9)) is None  # done for the day
    assert len(slack.messages(SWEEP)) == 1
    assert_swept_once(ready_db_url)


async def test_a_process_that_finishes_its_shards_while_another_checks_the_day_posts_the_digest(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    """Two processes finish their shards at about the same time: the first to look at the day saw a shard
    still being audited and is about to let go of the look; the second, whose shard was the last, must
    wait for that look and post the digest, not skip because someone was looking (which left the day's
    digest to the next look, an hour later)."""
    now = datetime(2026, 12, 2, 7, 5, tzinfo=UTC)
    other = create_engine(ready_db_url)
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"sweep_channel": SWEEP})
    async with running_bot(
        ready_db_url,
        settings,
        configuration=Configuration(investigator="offline"),
        recover=False,
        expiry_interval=None,
        digest_check=None,
    ) as bot:
        looking = await other.connect()
        await looking.execute(
            text("SELECT pg_advisory_lock(hashtext(:key))"), {"key": "billsleuth:daily-findings-sweep"}
        )
        digest = asyncio.create_task(daily_findings_digest(bot.runtime, now=now))
        waiting = asyncio.create_task(_someone_waits_for_an_advisory_lock(ready_db_url))
        await asyncio.wait({digest, waiting}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert waiting.done() and not digest.done(), "the digest skipped the day instead of waiting its turn"
        await looking.close()  # the other process's look ends (it had seen a shard not done)
        await other.dispose()
        posted = await asyncio.wait_for(digest, 30)
    assert posted is not None and posted.findings == len(injected())
    assert len(slack.messages(SWEEP)) == 1
    assert_swept_once(ready_db_url)


async def _someone_waits_for_an_advisory_lock(db_url: str) -> None:
    """Returns once a session of this database is queued on an advisory lock (pg_locks, not granted)."""
    query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    while rows(db_url, query) == [(0,)]:
        await asyncio.sleep(0.05)
