"""Investigations as Slack sees them: a mention (or the shortcut's modal, or `/billsleuth case`) becomes a
case whose progress and result live in one threaded message.

All of this runs after the ack, as background work. A Slack event is claimed in Postgres by its event_id
first, so a retried event, or one delivered to two bot processes, opens one case.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from slack_sdk.errors import SlackApiError

from agent.cases import CaseNotFound, CaseService
from agent.intake import parse_complaint
from agent.prompts import ask_for_customer
from agent.state import UNFINISHED
from bot.cards import progress_message
from bot.cards.models import ProgressView
from bot.case_messages import redraw_behind, show_case_result
from bot.grammar import parse_mention
from bot.presenters import stopped_message
from bot.progress import LiveProgress
from bot.runtime import EVENT_SEEN, MESSAGE_SEEN, BotRuntime, CaseRequest
from engine.db import is_connection_error, wait_until_reachable

log = logging.getLogger(__name__)

RECOVERY_RETRIES = (0.5, 1.0, 2.0, 4.0)  # seconds between start-up rounds for cases still locked

ASK_FOR_WORDS = (
    "What did the customer write? Mention me with their id and their words: `C-0007 <their words>`."
)

ALREADY_INVESTIGATING = (
    "I'm already investigating this message, so the edit changes nothing. To start another case, mention "
    "me in a new message."
)


async def handle_mention(
    runtime: BotRuntime, event: Mapping[str, Any], event_id: str, bot_user_id: str | None
) -> dict[str, Any] | None:
    """`@BillSleuth C-0007 <the customer's words>` → a case in the mention's thread (once per event, once
    per message)."""
    channel, user = str(event["channel"]), str(event["user"])
    thread_ts = str(event.get("thread_ts") or event["ts"])
    mention = parse_mention(str(event.get("text") or ""), bot_user_id)
    if mention.customer_id is None or not mention.words:
        if not await runtime.claim(event_id):
            log.info("event %s was already handled; ignoring this delivery", event_id)
            return None
        language = parse_complaint(mention.words).language
        ask = ask_for_customer(language) if mention.customer_id is None else ASK_FOR_WORDS
        await runtime.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=ask)
        return None
    request = CaseRequest(mention.customer_id, mention.words, user, channel, thread_ts)
    # The message is claimed only once a case is to be opened, so a mention edited to add the missing
    # customer id still opens one.
    claim = await runtime.claim_case(event_id, f"mention:{channel}:{event['ts']}", request)
    if claim.outcome == MESSAGE_SEEN:
        log.info("message %s:%s already has a case; ignoring its edit", channel, event["ts"])
        await runtime.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=ALREADY_INVESTIGATING
        )
        return None
    if claim.outcome == EVENT_SEEN:
        log.info("event %s was delivered again", event_id)
        return await resume_unfinished(runtime, claim.case_id) if claim.case_id else None
    assert claim.case_id is not None
    return await investigate(runtime, request, case_id=claim.case_id)


async def investigate(
    runtime: BotRuntime, request: CaseRequest, *, case_id: str | None = None
) -> dict[str, Any] | None:
    """Post the progress message, run the investigation (bounded), draw the result in that message.

    `case_id`: the case recorded when the request was claimed; else it is recorded here, queued, before
    anything else, so recovery finds it whatever happens next. Raises the Web API error when the progress
    message cannot be posted (the bot is not in the channel): the case is then escalated with that
    reason. Returns the case JSON, or None when the run failed or another run took the case up."""
    service, client = runtime.service, runtime.client
    case_id = case_id or await runtime.new_case(request)
    live_view = progress_message(_first_view(case_id, request))
    try:
        posted = await client.chat_postMessage(
            channel=request.channel, thread_ts=request.thread_ts, **live_view.as_kwargs()
        )
    except SlackApiError as error:
        await service.abandon(case_id, f"could not post in {request.channel}: {error.response.get('error')}")
        raise
    ts = str(posted["ts"])
    thread_ts = request.thread_ts or ts
    await runtime.record_message(case_id, request.channel, ts, thread_ts)
    live = LiveProgress(
        client,
        pacer=runtime.progress_pacer,
        channel=request.channel,
        ts=ts,
        case_id=case_id,
        customer_id=request.customer_id,
        requested_by=request.requester,
        interval=runtime.progress_interval,
    )
    try:
        async with runtime.investigations:
            open_it = functools.partial(
                service.open_case,
                request.words,
                requester=request.requester,
                customer_id=request.customer_id,
                channel=request.channel,
                thread_ts=thread_ts,
                message_ts=ts,
                on_progress=live.on_progress,
                case_id=case_id,
            )
            case = await _retrying_once_on_a_lost_connection(service, case_id, open_it)
    except Exception as error:
        revision = await live.finish()
        log.exception("investigation %s failed", case_id)
        why = f"Something went wrong, so a person should take this one: {type(error).__name__}"
        failed = stopped_message(case_id, request.customer_id, request.requester, live.steps, why, revision)
        await client.chat_update(channel=request.channel, ts=ts, **failed.as_kwargs())
        return None
    revision = await live.finish()
    if case["status"] in UNFINISHED:
        return None  # another run (recovery, another process) took it up, and draws it when it ends
    await show_case_result(runtime, case, steps=live.steps, revision=revision)
    return case


async def resume_unfinished(runtime: BotRuntime, case_id: str) -> dict[str, Any] | None:
    """A redelivered event whose case a stop left queued or investigating: run it to its end here and draw
    it (unless a live process is running it right now)."""
    service = runtime.service
    if (await service.case_row(case_id)).status not in UNFINISHED:
        return None
    case = await service.retry_interrupted(case_id)
    if case["status"] in UNFINISHED:
        return None
    await show_case_result(runtime, case)
    return case


async def _retrying_once_on_a_lost_connection(
    service: CaseService, case_id: str, open_it: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Open the case; when a database connection is lost on the way (a Postgres restart ends them all),
    run it once more on fresh ones, once the database answers again, instead of leaving it
    `investigating`: from its last checkpoint when its row was written, else from the top."""
    try:
        return await open_it()
    except Exception as error:
        if not is_connection_error(error):
            raise
        log.warning("investigation %s lost its database connection (%s); running it again", case_id, error)
    await wait_until_reachable(service.engine)  # a restarting server refuses connections for a while
    try:
        return await service.retry_interrupted(case_id)
    except CaseNotFound:
        return await open_it()


def _first_view(case_id: str, request: CaseRequest) -> ProgressView:
    return ProgressView(case_id, request.customer_id, request.requester)


async def recover_interrupted(runtime: BotRuntime, *, idle_for: timedelta | None = None) -> list[str]:
    """Finish the investigations a stop interrupted (queued or investigating), deliver decisions not yet
    applied, and show their results in their threads. One bot process does it; the others skip it.

    At start-up (`idle_for` None) every unfinished case is taken up, and those still locked are tried
    again for a few seconds: a killed process's database sessions may hold their case locks a moment
    after it died. The periodic sweep passes `idle_for` and takes up only cases left idle that long."""
    recovered = await _recover_once(runtime, idle_for)
    for delay in RECOVERY_RETRIES if idle_for is None else ():
        if not await runtime.service.unfinished_cases():
            break
        await asyncio.sleep(delay)
        recovered += await _recover_once(runtime, None)
    if recovered:
        log.info("recovered %d interrupted case(s): %s", len(recovered), ", ".join(recovered))
    redrawn = await redraw_behind(runtime)
    if redrawn:
        log.info("redrew %d case(s) Slack was behind on: %s", len(redrawn), ", ".join(redrawn))
    return recovered


async def _recover_once(runtime: BotRuntime, idle_for: timedelta | None) -> list[str]:
    async with runtime.leading("billsleuth:recover") as leader:
        if not leader:
            return []
        recovered = await runtime.service.recover(idle_for=idle_for)
    for case_id in recovered:
        try:
            await show_case_result(runtime, await runtime.service.show_case(case_id))
        except Exception:
            log.exception("could not show the recovered case %s in Slack", case_id)
    return recovered
