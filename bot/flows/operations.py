"""The operations people run from the CLI and the /billsleuth slash command, in one place.

Both front ends parse their words into the same request objects (bot/grammar.py) and run them here, so a
rule (who may approve, what a reject needs) is enforced identically wherever the click or keystroke came
from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.cases.customers import find_customer
from agent.cases.record import CaseNotFound
from agent.cases.service import CaseService
from approvals import queries
from approvals.models import Decision, Refused, UnknownCreditNote
from bot.grammar import (
    Decide,
    ListNotes,
    OpenCase,
    OperationError,
    Request,
    ShowCase,
    ShowNote,
    check_case_id,
    check_credit_note_id,
    check_customer_id,
)
from bot.presenters.approver import as_json, as_text, note_json, read_approver_view
from bot.presenters.home import unissued_notes
from bot.presenters.notes import CardUnavailable
from engine.money import fmt_amount


@dataclass
class Result:
    payload: dict[str, Any]
    message: str  # one line for people ("CN-0001 approved (1 of 2)")
    text: str = ""  # the whole result for people, where one line is not enough (`show`)
    extra: dict[str, Any] = field(default_factory=dict)


async def execute(service: CaseService, request: Request) -> Result:
    try:
        match request:
            case OpenCase():
                return await _open_case(service, request)
            case ShowCase():
                case = await service.show_case(check_case_id(request.case_id))
                return Result(case, f"{case['case_id']}: {case['status']}")
            case ListNotes():
                return await _list_notes(service)
            case ShowNote():
                return await _show_note(service, request)
            case Decide():
                return await _decide(service, request)
    except (CaseNotFound, UnknownCreditNote, CardUnavailable) as error:
        raise OperationError(str(error.args[0]) if error.args else str(error)) from None  # no KeyError quotes
    except Refused as refusal:
        raise OperationError(f"refused ({refusal.rule}): {refusal.message}", str(refusal.rule)) from None
    raise OperationError(f"unsupported request {request!r}")


async def _list_notes(service: CaseService) -> Result:
    """Drafts waiting for votes, then approved notes never issued — held by the daily limit, refused at
    issue, or about to leave with the next sweep — which wait for room, for someone to cancel them, or for
    the sweep."""
    await service.expire_overdue()
    drafts = await queries.list_pending(service.engine)
    unissued = await unissued_notes(service.engine, service.approval_settings)
    listed = [
        *({**note_json(n), "held_by_daily_limit": False, "issue_refused": None} for n in drafts),
        *(
            {**note_json(n), "held_by_daily_limit": why.held, "issue_refused": why.refused}
            for n, why in unissued
        ),
    ]
    line = f"{len(drafts)} waiting for a decision" + (
        f", {len(unissued)} approved but not issued" if unissued else ""
    )
    return Result({"credit_notes": listed}, line)


async def _open_case(service: CaseService, request: OpenCase) -> Result:
    """With no customer id, the customer is found from the message (an id, an email, a name); several
    candidates are listed for the caller to pick from, and nothing is opened."""
    customer_id = check_customer_id(request.customer_id) if request.customer_id else None
    if not request.message.strip():
        raise OperationError("the customer's message is empty")
    found_by: str | None = None
    if customer_id is None:
        match = await find_customer(service.engine, request.message)
        if match.customer is None and match.candidates:
            named = ", ".join(f"{c.id} ({c.name}, {c.country})" for c in match.candidates)
            raise OperationError(f"the message could mean several customers: {named}; give one id")
        if match.customer is not None:
            customer_id, found_by = match.customer.id, match.found_by
    case = await service.open_case(
        request.message,
        requester=request.requester,
        customer_id=customer_id,
        channel=request.channel,
        thread_ts=request.thread_ts,
        opened_from=request.opened_from,
        found_by=found_by,
    )
    return Result(case, f"{case['case_id']}: {case['status']}")


async def _show_note(service: CaseService, request: ShowNote) -> Result:
    """The approver's view: a FRESH recomputation of the invoice, the votes so far, and the agent's tool
    trail — not its words. The same read model the Slack card is drawn from."""
    credit_note_id = check_credit_note_id(request.credit_note_id)
    view = await read_approver_view(service, credit_note_id, viewer=f"approver:{request.viewer}")
    note = view.note
    return Result(
        as_json(view),
        f"{note.id}: {note.status}, {fmt_amount(note.amount, note.currency)} on {note.invoice_id}",
        text=as_text(view),
    )


async def _decide(service: CaseService, request: Decide) -> Result:
    credit_note_id = check_credit_note_id(request.credit_note_id)
    if request.decision == Decision.CANCEL:
        outcome, case = await service.cancel(
            credit_note_id,
            approver=request.approver,
            reason=request.comment,
            approver_is_bot=request.approver_is_bot,
            source=request.source,
        )
    else:
        outcome, case = await service.decide(
            credit_note_id,
            approver=request.approver,
            decision=request.decision,
            comment=request.comment,
            approver_is_bot=request.approver_is_bot,
            source=request.source,
        )
    return Result(case, outcome.message, {"changed": outcome.changed, "status": outcome.status})
