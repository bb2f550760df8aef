"""The findings digest in Slack: the new overcharges the findings sweep found, posted once to
BILLSLEUTH_SWEEP_CHANNEL (by `billsleuth sweep --post` or the bot's daily run), and a case opened from a
finding's `Open case` button exactly as a mention would open it, in the digest's thread.

Not the expiry chore (bot.flows.chores.sweep): that one expires overdue notes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.auditor import sweep as findings_sweep
from agent.auditor.sweep import SweepFinding, SweepResult
from agent.cases.customers import FoundBy
from approvals import activity, queries
from approvals.models import OpenNote
from bot import store
from bot.cards.digest import (
    digest_message,
    finding_being_credited,
    finding_had_case,
    finding_notice,
    read_finding_value,
)
from bot.flows.investigate import investigate, tell_not_allowed_to_open
from bot.flows.one_person import tell
from bot.presenters.digest import digest_view, posted_digest_view
from bot.runtime import BotRuntime
from bot.store import CaseRequest
from engine import locks
from engine.db import libpq_url_of
from engine.money import fmt

log = logging.getLogger(__name__)

DEFAULT_DAILY_CHECK_SECONDS = 60.0  # how often the bot looks whether the day's run is due
RETRY_AFTER_FAILURE_SECONDS = 600.0  # a day's run that failed (the bot not in the channel) is tried again


@dataclass(frozen=True)
class PostedDigest:
    channel: str
    ts: str
    findings: int


async def post_findings_digest(
    client: AsyncWebClient,
    engine: AsyncEngine,
    channel: str,
    result: SweepResult,
    *,
    actor_type: str,
    actor_id: str,
) -> PostedDigest | None:
    """One digest of the current findings no digest listed before; None when there is nothing new.

    The findings are claimed (locked) before posting and marked posted in the same transaction after
    Slack took the message: two digests never list one finding, and a post that fails marks nothing."""
    async with engine.begin() as conn:
        claimed = await findings_sweep.claim_unposted(conn, result.keys)
        if not claimed:
            return None
        message = digest_message(await digest_view(conn, claimed, result.as_of))
        response = await client.chat_postMessage(channel=channel, **message.as_kwargs())
        ts = str(response["ts"])
        await findings_sweep.mark_posted(
            conn, claimed, channel, ts, actor_type=actor_type, actor_id=actor_id, as_of=result.as_of
        )
    log.info("posted a findings digest of %d finding(s) to %s", len(claimed), channel)
    return PostedDigest(channel, ts, len(claimed))


def _shards_in_a_thread(url: str, day: date) -> list[int]:
    return asyncio.run(findings_sweep.audit_free_shards(url, day))


async def daily_findings_digest(runtime: BotRuntime, now: datetime | None = None) -> PostedDigest | None:
    """Once a UTC day, at or after BILLSLEUTH_SWEEP_HOUR: sweep every customer and post the digest of what
    is new. Every bot process audits the shards of customers it can lock and no one has done today
    (agent.auditor.sweep); once all are done, one process posts the digest. The day's run is on record,
    so a restart the same day does not run it again."""
    channel = runtime.slack.sweep_channel
    now = now or datetime.now(UTC)
    if not channel or now.hour < runtime.slack.sweep_hour:
        return None
    day = now.astimezone(UTC).date()
    async with runtime.engine.connect() as conn:
        if await findings_sweep.ran_today(conn, day):
            return None
    # The audit is CPU-bound: its own loop in a thread keeps this loop answering Slack meanwhile.
    await asyncio.to_thread(_shards_in_a_thread, libpq_url_of(runtime.engine), day)
    # Each process looks at the day in turn, waiting rather than skipping: one that finished the last
    # shard while another was looking (and saw that shard not done) must still look, or no one posts.
    async with runtime.locks.locked(locks.DAILY_FINDINGS_SWEEP) as conn:
        if await findings_sweep.ran_today(conn, day):
            return None
        result = await findings_sweep.day_result(conn, day)
        if result is None:  # a shard is still being audited (its process posts), or its process died
            return None  # (the next look takes that shard over)
        posted = await post_findings_digest(
            runtime.client, runtime.engine, channel, result, actor_type=activity.SYSTEM, actor_id="bot"
        )
        # On record in the look's transaction: whoever looks next sees the day done.
        await findings_sweep.record_daily_run(conn, day, posted.findings if posted else 0)
    return posted


def sweep_question(finding: SweepFinding) -> str:
    """The complaint a finding's case investigates: the intake reads the invoice id from it."""
    return f"Sweep finding: {finding.invoice_id} overcharged {fmt(finding.overcharge)} ({finding.root_cause})"


async def open_case_from_finding(
    runtime: BotRuntime, user_id: str, value: str, channel: str, digest_ts: str, thread_ts: str
) -> None:
    """A finding's `Open case`: the clicker opens a case for its customer, in the digest's thread, as a
    mention would (same access rule, progress, card and approvals) — once per finding."""
    if not runtime.may_open_cases(user_id):
        await tell_not_allowed_to_open(runtime, user_id, channel, thread_ts)
        return
    clicked = read_finding_value(value)
    if clicked is None:
        await tell(runtime, user_id, finding_notice("This button is out of date."), channel=channel)
        return
    request: CaseRequest | None = None
    crediting: OpenNote | None = None
    async with runtime.engine.begin() as conn:  # the finding stays locked until its case is linked
        finding = await findings_sweep.finding_for_case(conn, clicked.invoice_id, clicked.overcharge)
        if finding is not None and finding.case_id is None:
            # Since the digest was posted, a mention may have drafted a note on this invoice: a case
            # opened now would only have its draft refused.
            crediting = (await queries.open_notes_on(conn, [finding.invoice_id])).get(finding.invoice_id)
        if finding is not None and finding.case_id is None and crediting is None:
            request = CaseRequest(
                finding.customer_id, sweep_question(finding), user_id, channel, thread_ts, FoundBy.ID
            )
            case_id = await store.new_case_in(conn, runtime.service, request)
            await findings_sweep.link_case(conn, finding, case_id)
    if finding is None:
        gone = finding_notice(f"There is no finding {clicked.invoice_id} {clicked.overcharge} any more.")
        await tell(runtime, user_id, gone, channel=channel, thread_ts=thread_ts)
    elif crediting is not None:
        told = finding_being_credited(finding.invoice_id, crediting.id, crediting.case_id)
        await tell(runtime, user_id, told, channel=channel, thread_ts=thread_ts)
        await redraw_digest(runtime, channel, digest_ts, clicked.as_of)
    elif request is None:
        assert finding.case_id is not None
        had = finding_had_case(finding.invoice_id, finding.case_id)
        await tell(runtime, user_id, had, channel=channel, thread_ts=thread_ts)
    else:
        await redraw_digest(runtime, channel, digest_ts, clicked.as_of)
        await investigate(runtime, request, case_id=case_id)


async def redraw_digest(runtime: BotRuntime, channel: str, ts: str, as_of: date) -> None:
    """The digest again, the finding whose case was just opened showing its case instead of a button."""
    # Read and drawn under the digest's lock: two cases opened at once from one digest both show, the
    # second redraw reading after the first was drawn.
    async with runtime.locks.locked(locks.digest_message(channel, ts)):
        view = await posted_digest_view(runtime.engine, channel, ts, as_of)
        if view is None:
            return
        try:
            await runtime.client.chat_update(channel=channel, ts=ts, **digest_message(view).as_kwargs())
        except SlackApiError as error:  # the case matters more than the digest's look: go on without it
            log.warning("could not redraw the findings digest %s: %s", ts, error.response.get("error"))
