"""Investigations as Slack sees them: a mention (or the shortcut's modal, or `/billsleuth case`) becomes a
case whose progress and result live in one threaded message.

All of this runs after the ack, as background work. A Slack event is claimed in Postgres by its event_id
first, so a retried event, or one delivered to two bot processes, opens one case.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.cases import CaseNotFound, CaseService
from agent.intake import parse_complaint
from agent.prompts import ask_for_customer
from bot.cards import progress_message
from bot.cards.models import ProgressView
from bot.case_messages import show_case_result
from bot.grammar import parse_mention
from bot.presenters import stopped_message
from bot.progress import LiveProgress
from bot.runtime import BotRuntime
from engine.db import is_connection_error, wait_until_reachable

log = logging.getLogger(__name__)

ASK_FOR_WORDS = (
    "What did the customer write? Mention me with their id and their words: `C-0007 <their words>`."
)

ALREADY_INVESTIGATING = (
    "I'm already investigating this message, so the edit changes nothing. To start another case, mention "
    "me in a new message."
)


@dataclass(frozen=True)
class CaseRequest:
    customer_id: str
    words: str  # the customer's words
    requester: str  # the Slack user who asked
    channel: str
    thread_ts: str | None  # the thread the case goes into; None: the case's own message starts one


async def handle_mention(
    runtime: BotRuntime, event: Mapping[str, Any], event_id: str, bot_user_id: str | None
) -> dict[str, Any] | None:
    """`@BillSleuth C-0007 <the customer's words>` → a case in the mention's thread (once per event)."""
    if not await runtime.claim(event_id):
        log.info("event %s was already handled; ignoring this delivery", event_id)
        return None
    channel, user = str(event["channel"]), str(event["user"])
    thread_ts = str(event.get("thread_ts") or event["ts"])
    mention = parse_mention(str(event.get("text") or ""), bot_user_id)
    if mention.customer_id is None or not mention.words:
        language = parse_complaint(mention.words).language
        ask = ask_for_customer(language) if mention.customer_id is None else ASK_FOR_WORDS
        await runtime.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=ask)
        return None
    # An edited mention is a new event on the same message: one message, one case. Claimed only once a
    # case is to be opened, so a mention edited to add the missing customer id still opens one.
    if not await runtime.claim(f"mention:{channel}:{event['ts']}"):
        log.info("message %s:%s already has a case; ignoring its edit", channel, event["ts"])
        await runtime.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=ALREADY_INVESTIGATING
        )
        return None
    request = CaseRequest(mention.customer_id, mention.words, user, channel, thread_ts)
    return await investigate(runtime, request, claim_key=event_id)


async def investigate(
    runtime: BotRuntime, request: CaseRequest, *, claim_key: str | None = None
) -> dict[str, Any] | None:
    """Post the progress message, run the investigation (bounded), draw the result in that message.

    Raises the Web API error when the progress message cannot be posted (the bot is not in the
    channel): nothing has been opened then. Returns the case JSON, or None when the run failed."""
    service, client = runtime.service, runtime.client
    case_id = await runtime.new_case_id(claim_key)
    live_view = progress_message(_first_view(case_id, request))
    posted = await client.chat_postMessage(
        channel=request.channel, thread_ts=request.thread_ts, **live_view.as_kwargs()
    )
    ts = str(posted["ts"])
    thread_ts = request.thread_ts or ts
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
    await show_case_result(runtime, case, steps=live.steps, revision=revision)
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


async def recover_interrupted(runtime: BotRuntime) -> list[str]:
    """At start-up: finish the investigations a stop interrupted, deliver decisions not yet applied, and
    show their results in their threads. One bot process does it; the others skip it."""
    async with runtime.leading("billsleuth:recover") as leader:
        if not leader:
            return []
        recovered = await runtime.service.recover()
    for case_id in recovered:
        try:
            await show_case_result(runtime, await runtime.service.show_case(case_id))
        except Exception:
            log.exception("could not show the recovered case %s in Slack", case_id)
    if recovered:
        log.info("recovered %d interrupted case(s): %s", len(recovered), ", ".join(recovered))
    return recovered
