"""Investigations as Slack sees them: a mention (or the shortcut's modal, or `/billsleuth case`) becomes a
case whose progress and result live in one threaded message.

All of this runs after the ack, as background work. A Slack event is claimed in Postgres by its event_id
first, so a retried event, or one delivered to two bot processes, opens one case.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError

from agent.cases.customers import Candidate, FoundBy, find_customer
from agent.cases.intake import parse_complaint
from agent.cases.record import CaseNotFound
from agent.cases.service import CaseService
from agent.graph.prompts import ask_for_customer
from agent.graph.state import UNFINISHED, CaseStatus
from approvals.models import Rule
from bot import store
from bot.access import NOT_ALLOWED_TO_OPEN
from bot.cards import (
    InvestigateMetadata,
    investigate_modal,
    read_investigate_submission,
)
from bot.cards.customer_choice import customer_choice_message, customer_chosen_message
from bot.cards.investigate_modal import CUSTOMER_BLOCK_ID, WORDS_BLOCK_ID
from bot.cards.models import CandidateView, ProgressView
from bot.flows.one_person import refusal, tell
from bot.flows.progress import start_progress
from bot.flows.rounds import answer_in_thread
from bot.flows.show import put_case_message, show_case_result
from bot.grammar import Mention, OperationError, check_customer_id, parse_mention
from bot.presenters.cases import stopped_message
from bot.presenters.notes import customer_exists, customer_view
from bot.runtime import BotRuntime
from bot.store import CaseRequest, ClaimOutcome
from engine.db import is_connection_error, wait_until_reachable

log = logging.getLogger(__name__)

ASK_FOR_WORDS = (
    "What did the customer write? Mention me with their id and their words: `C-0007 <their words>`."
)

ALREADY_INVESTIGATING = (
    "I'm already investigating this message, so the edit changes nothing. To start another case, mention "
    "me in a new message."
)


async def on_mention(
    runtime: BotRuntime, event: Mapping[str, Any], event_id: str, bot_user_id: str | None
) -> None:
    """A person mentioned the bot: answer an approver's question (in the case's thread, as its requester),
    open a case, or tell them (alone) that they may not."""
    if await answer_in_thread(runtime, event, event_id, bot_user_id):
        return
    if runtime.may_open_cases(str(event["user"])):
        await handle_mention(runtime, event, event_id, bot_user_id)
    else:
        await refuse_to_open(runtime, event, event_id)


async def refuse_to_open(runtime: BotRuntime, event: Mapping[str, Any], event_id: str) -> None:
    """Politely, to the person alone, in the mention's thread; once, however often Slack retries."""
    if await store.claim(runtime.engine, event_id):
        thread_ts = str(event.get("thread_ts") or event["ts"])
        await tell_not_allowed_to_open(runtime, str(event["user"]), str(event["channel"]), thread_ts)


async def tell_not_allowed_to_open(
    runtime: BotRuntime, user_id: str, channel: str, thread_ts: str | None
) -> None:
    message = refusal(Rule.NOT_ALLOWED_TO_OPEN, NOT_ALLOWED_TO_OPEN)
    await tell(runtime, user_id, message, channel=channel, thread_ts=thread_ts)


# ---- the "Investigate billing" shortcut and its modal --------------------------------------------------


async def offer_investigation(
    runtime: BotRuntime,
    user_id: str,
    message: Mapping[str, Any],
    meta: InvestigateMetadata,
    *,
    trigger_id: str,
    bot_user_id: str | None,
) -> None:
    """The shortcut was run on a message: open the confirm modal at once (the trigger_id lives three
    seconds), pre-filled with the customer id the message names, if any, and its words — or, for someone
    who may not open cases, no modal but a word to them alone."""
    if not runtime.may_open_cases(user_id):
        runtime.start(
            tell_not_allowed_to_open(runtime, user_id, meta.channel, meta.thread_ts or None),
            name=f"refuse shortcut by {user_id}",
        )
        return
    found = parse_mention(str(message.get("text") or ""), bot_user_id)
    view = investigate_modal(meta, customer_id=found.customer_id, words=found.words)
    await runtime.client.views_open(trigger_id=trigger_id, view=view)


async def read_submission(
    runtime: BotRuntime, user_id: str, view: Mapping[str, Any]
) -> tuple[CaseRequest | None, dict[str, str]]:
    """The investigate modal as submitted: the case to open, or the field errors to show in the modal (a
    bad or unknown customer id, no words, someone who may not open cases, a form out of date)."""
    if not runtime.may_open_cases(user_id):
        return None, {CUSTOMER_BLOCK_ID: NOT_ALLOWED_TO_OPEN}
    try:
        meta, typed_id, words = read_investigate_submission(view)
    except ValueError:
        return None, {CUSTOMER_BLOCK_ID: "This form is out of date."}
    errors: dict[str, str] = {}
    customer_id = ""
    try:
        customer_id = check_customer_id(typed_id) if typed_id else ""
        if not customer_id:
            errors[CUSTOMER_BLOCK_ID] = "Which customer? Give their id, like C-0007."
        elif not await customer_exists(runtime.engine, customer_id):
            errors[CUSTOMER_BLOCK_ID] = f"There is no customer {customer_id} in the ledger."
    except OperationError as error:
        errors[CUSTOMER_BLOCK_ID] = str(error)
    if not words:
        errors[WORDS_BLOCK_ID] = "Say what the customer wrote."
    if errors:
        return None, errors
    return CaseRequest(customer_id, words, user_id, meta.channel, meta.thread_ts), {}


async def handle_mention(
    runtime: BotRuntime, event: Mapping[str, Any], event_id: str, bot_user_id: str | None
) -> dict[str, Any] | None:
    """`@BillSleuth C-0007 <the customer's words>` → a case in the mention's thread (once per event, once
    per message)."""
    channel, user = str(event["channel"]), str(event["user"])
    thread_ts = str(event.get("thread_ts") or event["ts"])
    mention = parse_mention(str(event.get("text") or ""), bot_user_id)
    found_by: str | None = FoundBy.ID if mention.customer_id else None
    if mention.customer_id is None and mention.words:  # named, not numbered: an email, or a name
        match = await find_customer(runtime.engine, mention.words)
        if match.customer is not None:
            mention, found_by = Mention(match.customer.id, mention.words), match.found_by
        elif match.candidates:
            await ask_which_customer(runtime, event, event_id, mention.words, match.candidates)
            return None
    if mention.customer_id is None or not mention.words:
        if not await store.claim(runtime.engine, event_id):
            log.info("event %s was already handled; ignoring this delivery", event_id)
            return None
        language = parse_complaint(mention.words).language
        ask = ask_for_customer(language) if mention.customer_id is None else ASK_FOR_WORDS
        await runtime.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=ask)
        return None
    request = CaseRequest(mention.customer_id, mention.words, user, channel, thread_ts, found_by)
    # The message is claimed only once a case is to be opened, so a mention edited to add the missing
    # customer id still opens one.
    claim = await store.claim_case(runtime.service, event_id, f"mention:{channel}:{event['ts']}", request)
    if claim.outcome == ClaimOutcome.MESSAGE_SEEN:
        log.info("message %s:%s already has a case; ignoring its edit", channel, event["ts"])
        await runtime.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=ALREADY_INVESTIGATING
        )
        return None
    if claim.outcome == ClaimOutcome.EVENT_SEEN:
        log.info("event %s was delivered again", event_id)
        return await resume_unfinished(runtime, claim.case_id) if claim.case_id else None
    assert claim.case_id is not None
    return await investigate(runtime, request, case_id=claim.case_id)


async def ask_which_customer(
    runtime: BotRuntime,
    event: Mapping[str, Any],
    event_id: str,
    words: str,
    candidates: Sequence[Candidate],
) -> None:
    """The words could mean several customers: record the case (needs_customer, claimed with the event
    and the message as any mention) and ask in the thread, one button per candidate."""
    channel, thread_ts = str(event["channel"]), str(event.get("thread_ts") or event["ts"])
    request = CaseRequest("", words, str(event["user"]), channel, thread_ts)
    claim = await store.claim_case(
        runtime.service, event_id, f"mention:{channel}:{event['ts']}", request, CaseStatus.NEEDS_CUSTOMER
    )
    if claim.outcome != ClaimOutcome.CLAIMED or claim.case_id is None:
        log.info("event %s (which customer?) was handled already", event_id)
        return
    views = [CandidateView(c.id, c.name, c.country) for c in candidates]
    await runtime.client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, **customer_choice_message(claim.case_id, views).as_kwargs()
    )
    async with runtime.engine.begin() as conn:  # the question is what Slack shows: nothing to redraw
        await store.mark_drawn(conn, claim.case_id, store.drawn_state(CaseStatus.NEEDS_CUSTOMER, None))


async def pick_customer(runtime: BotRuntime, user_id: str, value: str, channel: str, message_ts: str) -> None:
    """A candidate's button: the case runs for that customer — once, whoever clicks first (anyone who
    may open cases); the question in the thread then says who picked whom."""
    case_id, _, customer_id = value.partition(" ")
    if not runtime.may_open_cases(user_id):
        await tell_not_allowed_to_open(runtime, user_id, channel, None)
        return
    if not await runtime.service.choose_customer(case_id, customer_id, by=user_id):
        why = refusal(Rule.CUSTOMER_CHOSEN_ALREADY, f"case {case_id} has its customer already")
        await tell(runtime, user_id, why, channel=channel)
        return
    row = await runtime.service.case_row(case_id)
    customer = await customer_view(runtime.engine, customer_id)
    picked = customer_chosen_message(CandidateView(customer.id, customer.name, ""), user_id)
    await runtime.client.chat_update(channel=channel, ts=message_ts, **picked.as_kwargs())
    request = CaseRequest(
        customer_id, row.question, row.requester, row.channel, row.thread_ts, FoundBy.CHOSEN
    )
    await investigate(runtime, request, case_id=case_id)


async def investigate(
    runtime: BotRuntime, request: CaseRequest, *, case_id: str | None = None
) -> dict[str, Any] | None:
    """Show the progress (the thread's status, or a progress message), run the investigation (bounded),
    draw the result (in that message, or as a new reply that clears the status).

    `case_id`: the case recorded when the request was claimed; else it is recorded here, queued, before
    anything else, so recovery finds it whatever happens next. Raises the Web API error when the progress
    message cannot be posted (the bot is not in the channel): the case is then escalated with that
    reason. Returns the case JSON, or None when the run failed or another run took the case up."""
    service = runtime.service
    case_id = case_id or await store.new_case(service, request)
    try:
        live = await start_progress(
            runtime,
            case_id=case_id,
            channel=request.channel,
            thread_ts=request.thread_ts,
            customer_id=request.customer_id,
            requester=request.requester,
        )
    except SlackApiError as error:
        await service.abandon(case_id, f"could not post in {request.channel}: {error.response.get('error')}")
        raise
    thread_ts = request.thread_ts or live.ts
    try:
        async with runtime.investigations:
            open_it = functools.partial(
                service.open_case,
                request.words,
                requester=request.requester,
                customer_id=request.customer_id,
                channel=request.channel,
                thread_ts=thread_ts,
                message_ts=live.ts,
                on_progress=live.on_progress,
                case_id=case_id,
            )
            case = await _retrying_once_on_a_lost_connection(service, case_id, open_it)
    except Exception as error:
        revision = await live.finish()
        log.exception("investigation %s failed", case_id)
        why = f"Something went wrong, so a person should take this one: {type(error).__name__}"
        failed = stopped_message(case_id, request.customer_id, request.requester, live.steps, why, revision)
        await put_case_message(runtime, case_id, failed)
        return None
    revision = await live.finish()
    if case["status"] in UNFINISHED:
        return None  # another run (recovery, another process) took it up, and draws it when it ends
    await show_case_result(runtime, case, steps=live.steps, revision=revision)
    return case


async def investigate_once(runtime: BotRuntime, request: CaseRequest, delivery_key: str) -> None:
    """A case from a signed delivery with no event id (the shortcut's modal): a replay of the same
    delivery is claimed already and opens no second case."""
    if await store.claim(runtime.engine, delivery_key):
        await investigate(runtime, request)


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
