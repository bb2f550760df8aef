"""A case's own message in its thread, read from the case: the live step list, the explanation, why it
stopped — or, once a credit note is drafted, the approver's evidence card (bot/presenters/approver.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent.cases.service import CaseService
from agent.graph.state import CaseStatus
from approvals.models import NoteStatus
from bot.cards import explanation_message, progress_message
from bot.cards.models import ExplanationView, Message, ProgressStep, ProgressView
from bot.presenters.approver import credit_note_card_message
from bot.presenters.model_cost import model_line
from bot.presenters.notes import args_summary, customer_view, without_evidence_refs
from bot.presenters.other_findings import other_finding_views_of

# ---- the case's message in its thread ---------------------------------------------------------------------

_STEP_TEXT = {
    "intake": "Reading the complaint",
    "investigate": "Auditing the ledger against the billing rules",
    "verify": "Checking the findings against a fresh recomputation",
    "write_up": "Writing the reply",
    "request_approval": "Drafting the credit note",
}


def progress_step(event: Mapping[str, Any]) -> ProgressStep | None:
    """One line of the live step list for a progress event of the investigation graph."""
    kind = event.get("type")
    if kind == "step":
        text = _STEP_TEXT.get(str(event.get("step")), str(event.get("step")))
        return ProgressStep("note", text)
    if kind == "tool":
        mark = "" if event.get("ok", True) else " ✗"
        return ProgressStep("tool", f"{event.get('tool')}({args_summary(event.get('args'))}){mark}")
    if kind == "finding":
        f = event.get("findings") or {}
        where = ", ".join(f.get("invoice_ids") or []) or "the account"
        cause = str(f.get("root_cause", "")).replace("_", " ")
        return ProgressStep("finding", f"{cause} on {where}, overcharge {f.get('overcharge', '0.00')}")
    if kind == "credit_note":
        return ProgressStep("finding", f"Drafted credit note {event.get('credit_note_id')}")
    return None


def stopped_message(
    case_id: str, customer_id: str, requested_by: str, steps: Sequence[ProgressStep], why: str, revision: int
) -> Message:
    """The case's message when it ends without a result to act on (escalated, unknown customer, error)."""
    view = ProgressView(
        case_id, customer_id, requested_by, [*steps, ProgressStep("error", why)], "failed", revision
    )
    return progress_message(view)


async def explanation(service: CaseService, case: Mapping[str, Any], revision: int) -> Message:
    row = await service.case_row(case["case_id"])
    findings = case.get("findings") or {}
    reply = case.get("reply") or {}
    root_cause = findings.get("root_cause")
    view = ExplanationView(
        case_id=case["case_id"],
        customer=await customer_view(service.engine, row.customer_id),
        complaint=row.question,
        root_cause=None if root_cause in (None, "no_error") else root_cause,
        explanation=without_evidence_refs(reply.get("internal_note") or findings.get("reasoning") or ""),
        customer_reply=reply.get("customer_message") or "",
        invoice_ids=findings.get("invoice_ids") or [],
        revision=revision,
        other_findings=await other_finding_views_of(
            service.engine, case["case_id"], case.get("other_findings") or []
        ),
        model_line=model_line(case.get("investigator_note"), case.get("model_cost")),
    )
    return explanation_message(view)


async def case_message(
    service: CaseService, case: Mapping[str, Any], *, steps: Sequence[ProgressStep] = (), revision: int = 0
) -> Message:
    """What the case's message in its thread shows once the investigation has ended (or paused)."""
    row = await service.case_row(case["case_id"])
    customer_id = row.customer_id or "?"
    note = case.get("credit_note")
    status = case["status"]
    if note is not None and (status != CaseStatus.ESCALATED or note["status"] == NoteStatus.APPROVED):
        # An escalated case whose note was approved (refused at issue) keeps its card: its Cancel button
        # is the way to end the note.
        return await credit_note_card_message(service, note["id"])
    if status == CaseStatus.EXPLAINED:
        return await explanation(service, case, revision)
    if status == CaseStatus.ESCALATED:
        why = f"Escalated to a person: {case.get('escalation_reason') or 'no reason recorded'}"
    elif status == CaseStatus.NEEDS_CUSTOMER:
        why = (case.get("reply") or {}).get("internal_note") or "Which customer is this?"
    else:
        why = f"The investigation stopped with status {status}; a person should look at it."
    return stopped_message(case["case_id"], customer_id, row.requester, steps, why, revision)
