"""The operations people run from the CLI and the /billsleuth slash command, in one place.

Both front ends parse their words into the same request objects (bot/grammar.py) and run them here, so a
rule (who may approve, what a reject needs) is enforced identically wherever the click or keystroke came
from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from agent.cases import CaseNotFound, CaseService
from agent.tools import ToolContext, check_json, recompute
from approvals import queries
from approvals.models import CreditNoteView, Refused, UnknownCreditNote
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
from engine import schema
from engine.money import fmt_amount


@dataclass
class Result:
    payload: dict[str, Any]
    message: str  # one line for people ("CN-0001 approved (1 of 2)")
    extra: dict[str, Any] = field(default_factory=dict)


def note_json(note: CreditNoteView) -> dict[str, Any]:
    return {
        **note.summary(),
        "case_id": note.case_id,
        "expires_at": note.expires_at.isoformat() if note.expires_at else None,
    }


async def execute(service: CaseService, request: Request) -> Result:
    try:
        match request:
            case OpenCase():
                return await _open_case(service, request)
            case ShowCase():
                case = await service.show_case(check_case_id(request.case_id))
                return Result(case, f"{case['case_id']}: {case['status']}")
            case ListNotes():
                await service.expire_overdue()
                notes = await queries.list_pending(service.engine)
                return Result(
                    {"credit_notes": [note_json(n) for n in notes]}, f"{len(notes)} waiting for a decision"
                )
            case ShowNote():
                return await _show_note(service, request)
            case Decide():
                return await _decide(service, request)
    except (CaseNotFound, UnknownCreditNote) as error:
        raise OperationError(str(error).strip("'\"")) from None
    except Refused as refusal:
        raise OperationError(f"refused ({refusal.rule}): {refusal.message}", str(refusal.rule)) from None
    raise OperationError(f"unsupported request {request!r}")


async def _open_case(service: CaseService, request: OpenCase) -> Result:
    customer_id = check_customer_id(request.customer_id) if request.customer_id else None
    if not request.message.strip():
        raise OperationError("the customer's message is empty")
    case = await service.open_case(
        request.message,
        requester=request.requester,
        customer_id=customer_id,
        channel=request.channel,
        thread_ts=request.thread_ts,
        opened_from=request.opened_from,
    )
    return Result(case, f"{case['case_id']}: {case['status']}")


async def _show_note(service: CaseService, request: ShowNote) -> Result:
    """A FRESH recomputation of the invoice, the votes so far, and the agent's tool trail — not its words."""
    note = await queries.get_credit_note(service.engine, check_credit_note_id(request.credit_note_id))
    customer_id = await _customer_of_invoice(service, note.invoice_id)
    tools = ToolContext(service.engine, note.case_id or "", customer_id, f"approver:{request.viewer}")
    fresh = check_json(await recompute(tools, note.invoice_id))
    votes = await queries.approvals_of(service.engine, note.id)
    trail = await tool_trail(service, note.case_id) if note.case_id else []
    payload = {
        "credit_note": {
            **note_json(note),
            "reason": note.reason,
            "root_cause": note.root_cause,
            "memo": note.memo,
        },
        "recompute": fresh,
        "approvals": [
            {
                "approver": v.approver,
                "decision": v.decision,
                "comment": v.comment,
                "at": v.decided_at.isoformat(),
                "source": v.source,
                "via": v.via,  # "via CLI by <os user>" for a vote cast from the CLI
            }
            for v in votes
        ],
        "tool_trail": trail,
    }
    return Result(
        payload, f"{note.id}: {note.status}, {fmt_amount(note.amount, note.currency)} on {note.invoice_id}"
    )


async def _customer_of_invoice(service: CaseService, invoice_id: str) -> str:
    async with service.engine.connect() as conn:
        found = await conn.execute(
            select(schema.invoices.c.customer_id).where(schema.invoices.c.id == invoice_id)
        )
        return found.scalar_one()


async def tool_trail(service: CaseService, case_id: str) -> list[dict[str, Any]]:
    """Every tool call recorded for the case, in order (the approver's view of what the agent looked at)."""
    log = schema.audit_log
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            select(log.c.at, log.c.actor, log.c.tool, log.c.args, log.c.ok, log.c.result_digest)
            .where(log.c.case_id == case_id)
            .order_by(log.c.id)
        )
        return [
            {
                "at": r.at.isoformat(),
                "actor": r.actor,
                "tool": r.tool,
                "args": r.args,
                "ok": r.ok,
                "result_digest": r.result_digest,
            }
            for r in rows
        ]


async def _decide(service: CaseService, request: Decide) -> Result:
    credit_note_id = check_credit_note_id(request.credit_note_id)
    if request.decision == "cancel":
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
