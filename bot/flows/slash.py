"""`/billsleuth …` after its ack: run the parsed request and answer the person who typed it, ephemerally
(through the command's response_url, which works in any channel and in DMs)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from slack_sdk.errors import SlackApiError

from agent.cases.record import CaseNotFound
from approvals.models import Rule, UnknownCreditNote
from bot import store
from bot.access import NOT_ALLOWED_TO_OPEN, NOT_ALLOWED_TO_READ
from bot.cards.models import Message
from bot.flows.chores import sweep
from bot.flows.decide import decide
from bot.flows.investigate import investigate
from bot.flows.one_person import refusal
from bot.flows.operations import execute
from bot.grammar import Command, Decide, ListNotes, OpenCase, OperationError, ShowNote
from bot.presenters.approver import credit_note_card_message, waiting_for
from bot.presenters.notes import CardUnavailable
from bot.runtime import BotRuntime
from bot.store import CaseRequest
from engine.money import fmt_amount

log = logging.getLogger(__name__)

Respond = Callable[..., Awaitable[Any]]


async def run_command(
    runtime: BotRuntime,
    request: Command,
    *,
    user_id: str,
    channel: str,
    respond: Respond,
    source: str | None = None,
    delivery_key: str | None = None,
) -> None:
    """`source`: the workspace the command came from (`slack:<team id>`), recorded with a vote.
    `delivery_key` names this signed delivery: a replay of the same payload is claimed already and
    does nothing (a case opened twice would be two investigations and two cards)."""
    if delivery_key is not None and not await store.claim(runtime.engine, delivery_key):
        log.info("%s was delivered before; ignoring the replay", delivery_key)
        return

    async def say(text: str, message: Message | None = None) -> None:
        blocks = {"blocks": message.blocks} if message is not None else {}
        await respond(text=text, response_type="ephemeral", replace_original=False, **blocks)

    refused = _refusal_for(runtime, request, user_id)
    if refused is not None:
        await say(refused.text, refused)
        return
    try:
        match request:
            case ListNotes():
                await sweep(runtime)  # so expired cards are redrawn, not just listed
                await say(_list_text((await execute(runtime.service, request)).payload["credit_notes"]))
            case ShowNote():
                card = await credit_note_card_message(runtime.service, request.credit_note_id)
                await say(card.text, card)
            case OpenCase():
                await _open_case(runtime, request, user_id=user_id, channel=channel, say=say)
            case Decide():
                report = await decide(
                    runtime,
                    request.credit_note_id,
                    user_id=user_id,
                    decision=request.decision,
                    comment=request.comment,
                    source=source,
                )
                if report.notice is not None:
                    await say(report.notice.text, report.notice)
                elif report.outcome is not None:
                    await say(report.outcome.message)
            case _:
                await say(f"Nothing to do for {type(request).__name__}.")
    except OperationError as error:
        await say(f":warning: {error}")
    except UnknownCreditNote as error:
        await say(f":warning: there is no credit note {error.credit_note_id}")
    except (CardUnavailable, CaseNotFound) as error:
        await say(f":warning: {error}")


async def _open_case(
    runtime: BotRuntime,
    request: OpenCase,
    *,
    user_id: str,
    channel: str,
    say: Callable[..., Awaitable[None]],
) -> None:
    case_request = CaseRequest(request.customer_id or "", request.message, user_id, channel, None)
    try:
        case = await investigate(runtime, case_request)
    except SlackApiError as error:
        log.info("cannot post the case in %s: %s", channel, error.response.get("error"))
        await say(
            ":warning: I can't post in this channel; invite me (`/invite @BillSleuth`) or mention me "
            "in a channel I am in."
        )
        return
    if case is None:
        await say(":warning: The investigation stopped; its message in the channel says why.")
        return
    note = case.get("credit_note")
    tail = (
        f", credit note {note['id']} waits for approval"
        if note and case["status"] == "awaiting_approval"
        else ""
    )
    await say(
        f"{case['case_id']} for {case['customer_id']}: {case['status']}{tail}. The card is in the channel."
    )


def _refusal_for(runtime: BotRuntime, request: Command, user_id: str) -> Message | None:
    """Reading notes is for approvers and support; opening a case, once support is named, too."""
    if isinstance(request, ListNotes | ShowNote) and not runtime.may_read(user_id):
        return refusal(Rule.NOT_ALLOWED_TO_READ, NOT_ALLOWED_TO_READ)
    if isinstance(request, OpenCase) and not runtime.may_open_cases(user_id):
        return refusal(Rule.NOT_ALLOWED_TO_OPEN, NOT_ALLOWED_TO_OPEN)
    return None


def _list_text(notes: list[dict[str, Any]]) -> str:
    if not notes:
        return "No credit notes are waiting for a decision."
    rows = [
        f"• *{n['id']}* · {fmt_amount(Decimal(n['amount']), n['currency'])} on `{n['invoice_id']}`"
        f" · Approvals: {n['approvals']} of {n['needed']} · case `{n['case_id']}` · {waiting_for(n)}"
        for n in notes[:40]
    ]
    if len(notes) > 40:
        rows.append(f"_…and {len(notes) - 40} more_")
    return f"*Credit notes waiting for a decision* ({len(notes)})\n" + "\n".join(rows)
