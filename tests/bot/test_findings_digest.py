"""The findings digest in Slack: the daily run posts once a day, lists at most ten findings with an
`Open case` button each and counts the rest; a click opens the case as a mention would, in the digest's
thread, once per finding."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.cards.ids import SWEEP_OPEN_CASE_ACTION_ID
from bot.flows.digest import daily_findings_digest
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    FINANCE,
    OUTSIDER,
    SECRET,
    SUPPORT,
    all_text,
    assert_valid_blocks,
    bot_replies,
    buttons,
    count,
    offline_bot,
    open_case,
    scenario,
    snapshot,
)
from tests.test_audit_cli import injected

SWEEP = "C0SWEEP"
FINDINGS = len(injected())  # every overcharge in the default dataset


def at(day: int, hour: int) -> datetime:
    return datetime(2026, 12, day, hour, 5, tzinfo=UTC)


def open_case_buttons(message: StoredMessage) -> list[dict]:
    return [
        b["accessory"]
        for b in message.blocks
        if (b.get("accessory") or {}).get("action_id") == SWEEP_OPEN_CASE_ACTION_ID
    ]


@pytest.fixture
async def digest_bot(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[RunningBot]:
    """A bot with BILLSLEUTH_SWEEP_CHANNEL set and support staff named (so an outsider is refused); the
    daily loop is off: each test runs the day's digest itself, at the time it chooses."""
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"sweep_channel": SWEEP})
    policy = ApprovalSettings(approvers=frozenset(FINANCE), support=frozenset({SUPPORT}))
    async with offline_bot(
        ready_db_url, slack, settings=settings, policy=policy, digest_check=None
    ) as running:
        yield running


@pytest.fixture
async def signed(digest_bot: RunningBot) -> AsyncIterator[SignedClient]:
    async with SignedClient(digest_bot.url, SECRET) as client:
        yield client


async def test_the_daily_digest_goes_out_once_a_day_at_its_hour(
    slack: SlackRecorder, digest_bot: RunningBot
) -> None:
    runtime = digest_bot.runtime
    assert runtime.slack.sweep_hour == 6
    assert await daily_findings_digest(runtime, now=at(2, 5)) is None  # before the hour: not yet
    assert slack.messages(SWEEP) == []

    posted = await daily_findings_digest(runtime, now=at(2, 7))
    assert posted is not None and posted.findings == FINDINGS
    (digest,) = slack.messages(SWEEP)
    assert_valid_blocks(digest.blocks)
    text = all_text(digest.blocks)
    assert f"Findings sweep: {FINDINGS} new overcharges" in text and f"*USD*: {FINDINGS} findings" in text
    assert len(open_case_buttons(digest)) == 10
    assert f"…and {FINDINGS - 10} more not shown (USD {FINDINGS - 10})" in text
    amounts = [Decimal(b["value"].split()[1]) for b in open_case_buttons(digest)]
    assert amounts == sorted(amounts, reverse=True)  # the largest, largest first

    assert await daily_findings_digest(runtime, now=at(2, 9)) is None  # later the same day: done
    assert await daily_findings_digest(runtime, now=at(3, 7)) is None  # next day: nothing new
    assert len(slack.messages(SWEEP)) == 1
    runs = schema.activity_log.c
    assert await count(digest_bot, schema.activity_log, runs.action == "sweep.daily_run") == 2
    assert await count(digest_bot, schema.activity_log, runs.action == "sweep.posted") == 1


async def test_open_case_opens_it_in_the_digests_thread_once(
    slack: SlackRecorder, digest_bot: RunningBot, signed: SignedClient
) -> None:
    await daily_findings_digest(digest_bot.runtime, now=at(2, 7))
    (digest,) = slack.messages(SWEEP)
    seen = snapshot(digest)
    value = open_case_buttons(digest)[0]["value"]
    invoice_id = value.split()[0]

    refused = p.click(seen, user=OUTSIDER, channel=SWEEP, action_id=SWEEP_OPEN_CASE_ACTION_ID, value=value)
    assert (await signed.send(refused)).status == 200
    await digest_bot.settled()
    assert "not_allowed_to_open" in slack.ephemerals(OUTSIDER)[-1].text
    assert bot_replies(slack, SWEEP, digest.ts) == []

    click = p.click(seen, user=SUPPORT, channel=SWEEP, action_id=SWEEP_OPEN_CASE_ACTION_ID, value=value)
    assert (await signed.send(click)).status == 200
    await digest_bot.settled()
    (card,) = bot_replies(slack, SWEEP, digest.ts)
    assert buttons(card) == CARD_BUTTONS and invoice_id in all_text(card.blocks)
    sf, cases = schema.sweep_findings.c, schema.cases.c
    async with digest_bot.runtime.engine.connect() as conn:
        case_id = (await conn.execute(select(sf.case_id).where(sf.invoice_id == invoice_id))).scalar_one()
        case = (await conn.execute(select(schema.cases).where(cases.id == case_id))).one()
        note = (
            await conn.execute(select(schema.credit_notes).where(schema.credit_notes.c.case_id == case_id))
        ).one()
    assert (case.requester, case.channel, case.thread_ts) == (SUPPORT, SWEEP, digest.ts)
    assert note.invoice_id == invoice_id and f"{note.amount:.2f}" == value.split()[1]
    assert_valid_blocks(digest.blocks)  # redrawn: the finding shows its case instead of a button
    assert f"case `{case_id}` opened" in all_text(digest.blocks)
    assert (
        value not in [b["value"] for b in open_case_buttons(digest)] and len(open_case_buttons(digest)) == 9
    )

    again = p.click(seen, user=FINANCE[0], channel=SWEEP, action_id=SWEEP_OPEN_CASE_ACTION_ID, value=value)
    assert (await signed.send(again)).status == 200
    await digest_bot.settled()
    assert f"already has case `{case_id}`" in slack.ephemerals(FINANCE[0])[-1].text
    assert len(bot_replies(slack, SWEEP, digest.ts)) == 1
    assert await count(digest_bot, schema.cases) == 1


async def test_a_finding_someone_is_already_crediting_is_not_in_the_digest(
    slack: SlackRecorder, digest_bot: RunningBot, signed: SignedClient
) -> None:
    opened = await open_case(slack, signed, digest_bot, scenario("C-0011"))  # drafts a note on INV-0011-03
    assert opened.credit_note_id is not None
    posted = await daily_findings_digest(digest_bot.runtime, now=at(2, 7))
    assert posted is not None and posted.findings == FINDINGS - 1
    sf = schema.sweep_findings.c
    assert (
        await count(digest_bot, schema.sweep_findings, sf.invoice_id == "INV-0011-03", sf.posted_at.is_(None))
        == 1
    )
    assert "INV-0011-03" not in all_text(slack.messages(SWEEP)[0].blocks)


async def test_the_running_bot_posts_the_days_digest_by_itself_once(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = slack.settings(signing_secret=SECRET).model_copy(
        update={"sweep_channel": SWEEP, "sweep_hour": 0}
    )
    async with running_bot(
        ready_db_url,
        settings,
        configuration=Configuration(investigator="offline"),
        approval_settings=ApprovalSettings(approvers=frozenset(FINANCE)),
        recover=False,
        expiry_interval=None,
        digest_check=0.05,  # looks every 50 ms: many looks, one digest
    ):
        await slack.wait_until(lambda: len(slack.messages(SWEEP)) == 1, timeout=30)
        await asyncio.sleep(0.5)
    assert len(slack.messages(SWEEP)) == 1


async def test_a_day_whose_digest_could_not_be_posted_is_tried_again(
    slack: SlackRecorder, digest_bot: RunningBot
) -> None:
    slack.fail_next("chat.postMessage", "not_in_channel")
    with pytest.raises(SlackApiError):
        await daily_findings_digest(digest_bot.runtime, now=at(2, 7))
    sf = schema.sweep_findings.c
    assert await count(digest_bot, schema.sweep_findings, sf.posted_at.is_not(None)) == 0
    posted = await daily_findings_digest(digest_bot.runtime, now=at(2, 8))
    assert posted is not None and posted.findings == FINDINGS and len(slack.messages(SWEEP)) == 1


async def test_two_clicks_at_once_on_one_finding_open_one_case(
    slack: SlackRecorder, digest_bot: RunningBot, signed: SignedClient
) -> None:
    await daily_findings_digest(digest_bot.runtime, now=at(2, 7))
    (digest,) = slack.messages(SWEEP)
    seen, value = snapshot(digest), open_case_buttons(digest)[-1]["value"]
    clicks = [
        p.click(seen, user=who, channel=SWEEP, action_id=SWEEP_OPEN_CASE_ACTION_ID, value=value)
        for who in (SUPPORT, FINANCE[1])
    ]
    assert [d.status for d in await asyncio.gather(*(signed.send(c) for c in clicks))] == [200, 200]
    await digest_bot.settled()
    assert await count(digest_bot, schema.cases) == 1
    assert len(bot_replies(slack, SWEEP, digest.ts)) == 1
    told = [e.text for who in (SUPPORT, FINANCE[1]) for e in slack.ephemerals(who)]
    assert len(told) == 1 and "already has case" in told[0]


async def test_a_click_on_a_finding_someone_began_crediting_since_opens_nothing_and_shows_the_note(
    slack: SlackRecorder, digest_bot: RunningBot, signed: SignedClient
) -> None:
    """The digest was right when posted; a mention then drafted a note on one of its invoices. Its `Open
    case` says so instead of opening a case that drafting would refuse, and the digest shows the note."""
    await daily_findings_digest(digest_bot.runtime, now=at(2, 7))
    (digest,) = slack.messages(SWEEP)
    seen = snapshot(digest)
    sf = schema.sweep_findings.c
    for value in [b["value"] for b in open_case_buttons(digest)]:
        async with digest_bot.runtime.engine.connect() as conn:
            customer_id = (
                await conn.execute(select(sf.customer_id).where(sf.invoice_id == value.split()[0]))
            ).scalar_one()
        sc = scenario(customer_id)
        if sc["truth"]["invoice_ids"][0] == value.split()[0]:
            break
    opened = await open_case(slack, signed, digest_bot, sc)  # a mention: drafts the note on that invoice
    assert opened.credit_note_id is not None

    click = p.click(seen, user=SUPPORT, channel=SWEEP, action_id=SWEEP_OPEN_CASE_ACTION_ID, value=value)
    assert (await signed.send(click)).status == 200
    await digest_bot.settled()
    assert await count(digest_bot, schema.cases) == 1
    assert bot_replies(slack, SWEEP, digest.ts) == []
    told = slack.ephemerals(SUPPORT)[-1].text
    assert f"`{value.split()[0]}` is already being credited by `{opened.credit_note_id}`" in told
    assert f"case `{opened.case_id}`" in told
    assert_valid_blocks(digest.blocks)  # redrawn: that finding shows its note instead of a button
    assert f"being credited by `{opened.credit_note_id}`" in all_text(digest.blocks)
    assert value not in [b["value"] for b in open_case_buttons(digest)]
