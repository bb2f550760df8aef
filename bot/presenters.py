"""From cases, credit notes and the ledger to the view models the cards are drawn from (bot/cards).

Reading is done here, drawing in bot/cards, talking to Slack in the flows: a card shows the SYSTEM's fresh
recomputation of the invoice (audited as `system:card`), the votes from the approvals tables and the
agent's tool calls from audit_log — never a copy of what the agent said about them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.cases import CaseService, case_row_in
from agent.state import held_by_daily_limit
from agent.tools import ToolContext, ToolError, call_tool, recompute
from approvals import queries
from approvals.config import is_slack_user_id
from approvals.issuing import over_daily_budget
from approvals.models import CreditNoteView as Note
from approvals.models import Vote
from approvals.policy import utc_now
from bot.cards import (
    credit_note_card,
    explanation_message,
    progress_message,
)
from bot.cards.models import (
    CaseSummaryView,
    ConclusionView,
    CreditNoteCardView,
    CreditNoteView,
    CustomerView,
    DecisionView,
    ExplanationView,
    HomeView,
    Message,
    PendingNoteView,
    ProgressStep,
    ProgressView,
    RecomputationView,
    ToolCallView,
)
from engine import schema

CARD_ACTOR = "system:card"  # who the card's own recomputation is audited as
AGENT_ACTOR_PREFIX = "agent:"
FINAL_CASE_STATUSES = ("explained", "issued", "rejected", "expired")
# How far each status is along its way: with the number of votes it makes the card's revision.
_STATUS_RANK = {"draft": 0, "approved": 1, "issued": 2, "rejected": 1, "expired": 1, "cancelled": 2}
_EVIDENCE_REF = re.compile(r"\s*\[E\d+\]")


class CardUnavailable(LookupError):
    """The card cannot be drawn (its invoice or customer is gone from the ledger)."""


# ---- revisions ------------------------------------------------------------------------------------------


def card_revision(note: Note) -> int:
    """The card's revision, a pure function of the note's state: every vote and every status change
    raises it, so two bot processes agree on it without storing it, and a click carrying a lower one
    (the block_id's `rN`) came from a card that is out of date."""
    votes = note.approvals + (1 if note.rejected_by else 0)
    return votes + _STATUS_RANK.get(note.status, 0)


# ---- small mappings ---------------------------------------------------------------------------------------


def note_model(
    note: Note, *, held_by_budget: bool = False, issue_refused: str | None = None
) -> CreditNoteView:
    return CreditNoteView(
        id=note.id,
        invoice_id=note.invoice_id,
        amount=note.amount,
        reason=note.reason,
        status=note.status,  # type: ignore[arg-type]
        approvals=note.approvals,
        needed=note.needed,
        # Drafting always sets it; an old row without one reads as expiring when it was made.
        expires_at=note.expires_at or note.created_at,
        held_by_budget=held_by_budget,
        issue_refused=issue_refused,
        # The sweep cancels as BillSleuth itself, not as a person the card could mention.
        cancelled_by=note.cancelled_by if is_slack_user_id(note.cancelled_by or "") else None,
        cancel_reason=note.cancel_reason or "",
    )


def decision_views(votes: Sequence[Vote]) -> list[DecisionView]:
    return [DecisionView(v.approver, v.decision, v.comment, v.decided_at, v.via) for v in votes]  # type: ignore[arg-type]


def args_summary(args: Mapping[str, Any] | None) -> str:
    """Tool arguments in short: {"invoice_id": "INV-0007-05"} → "INV-0007-05"."""
    return ", ".join(str(v) for v in (args or {}).values())


def without_evidence_refs(text: str) -> str:
    """The write-up's `[E12]` evidence references mean nothing in Slack; the card shows the evidence."""
    return _EVIDENCE_REF.sub("", text).strip()


# ---- reading ----------------------------------------------------------------------------------------------


async def customer_view(engine: AsyncEngine, customer_id: str) -> CustomerView:
    c = schema.customers.c
    async with engine.connect() as conn:
        row = (await conn.execute(select(c.id, c.name, c.currency).where(c.id == customer_id))).first()
    if row is None:
        raise CardUnavailable(f"no customer {customer_id!r} in the ledger")
    return CustomerView(row.id, row.name, row.currency)


async def customer_exists(engine: AsyncEngine, customer_id: str) -> bool:
    c = schema.customers.c
    async with engine.connect() as conn:
        return (await conn.execute(select(c.id).where(c.id == customer_id))).first() is not None


async def customer_of_invoice(engine: AsyncEngine, invoice_id: str) -> CustomerView:
    async with engine.connect() as conn:
        return await _customer_of_invoice_in(conn, invoice_id)


async def _customer_of_invoice_in(conn: AsyncConnection, invoice_id: str) -> CustomerView:
    inv, cust = schema.invoices.c, schema.customers.c
    row = (
        await conn.execute(
            # The invoice's currency, not the customer's: a note and its amounts are in the invoice's.
            select(cust.id, cust.name, inv.currency)
            .join_from(schema.invoices, schema.customers, inv.customer_id == cust.id)
            .where(inv.id == invoice_id)
        )
    ).first()
    if row is None:
        raise CardUnavailable(f"no invoice {invoice_id!r} in the ledger")
    return CustomerView(row.id, row.name, row.currency)


async def fresh_recomputation(
    engine: AsyncEngine, conn: AsyncConnection, case_id: str, customer_id: str, invoice_id: str
) -> Any:
    """The system's own recomputation of the invoice, now (read on `conn`), audited as `system:card`."""
    tools = ToolContext(engine, case_id, customer_id, CARD_ACTOR, connection=conn)
    audited = await call_tool(tools, "recompute_invoice", {"invoice_id": invoice_id})
    if not audited.ok:
        raise CardUnavailable(f"cannot recompute {invoice_id}: {audited.error}")
    try:
        check = await recompute(tools, invoice_id)  # the ledger is cached: no second read
    except ToolError as error:
        raise CardUnavailable(f"cannot recompute {invoice_id}: {error}") from None
    ledger = tools.cached_ledger
    return RecomputationView.from_check(check, ledger.payments if ledger else ())


async def _agent_trail_in(conn: AsyncConnection, case_id: str) -> list[ToolCallView]:
    """The agent's own tool calls for the case, in order (the system's checks are not the agent's)."""
    log = schema.audit_log.c
    rows = await conn.execute(
        select(log.tool, log.args, log.ok)
        .where(log.case_id == case_id, log.actor.startswith(AGENT_ACTOR_PREFIX))
        .order_by(log.id)
    )
    return [ToolCallView(r.tool, args_summary(r.args), bool(r.ok)) for r in rows]


# ---- the evidence card ------------------------------------------------------------------------------------


async def credit_note_card_view(
    service: CaseService, credit_note_id: str, conn: AsyncConnection | None = None
) -> CreditNoteCardView:
    """Everything the card shows, read now. All reads share one connection — the caller's (say, the one
    holding the card's lock) or one from the pool: under load a card costs one checkout, not six."""
    if conn is None:
        async with service.engine.connect() as own:
            return await _card_view(service, own, credit_note_id)
    return await _card_view(service, conn, credit_note_id)


async def _card_view(service: CaseService, conn: AsyncConnection, credit_note_id: str) -> CreditNoteCardView:
    engine = service.engine
    note_row = await queries.note_row_in(conn, credit_note_id)
    votes = await queries.votes_in(conn, credit_note_id)
    note = queries.to_view(note_row, votes)
    case_id = note.case_id or ""
    customer = await _customer_of_invoice_in(conn, note.invoice_id)
    row = await case_row_in(conn, case_id) if case_id else None
    held = (
        row is not None
        and held_by_daily_limit(note.status, row.status)
        and await over_daily_budget(conn, note.amount, note.currency, service.approval_settings, utc_now())
    )
    # An approved note whose case escalated was refused at issue: it waits for a person, not for room.
    refused = row is not None and note.status == "approved" and row.status == "escalated"
    issue_refused = (row.escalation_reason or "issuing it was refused") if refused else None
    findings = (row.findings if row is not None else None) or {}
    conclusion = ConclusionView(
        root_cause=str(findings.get("root_cause") or note.root_cause),
        overcharge=Decimal(str(findings.get("overcharge") or note.amount)),
        summary=str(findings.get("reasoning") or note.memo or ""),
        summary_by="model" if findings.get("reasoning_by") == "model" else "auditor",
    )
    return CreditNoteCardView(
        case_id=case_id or "—",
        customer=customer,
        complaint=row.question if row is not None else "",
        requested_by=row.requester if row is not None else "unknown",
        conclusion=conclusion,
        recompute=await fresh_recomputation(engine, conn, case_id, customer.id, note.invoice_id),
        tool_trail=await _agent_trail_in(conn, case_id) if case_id else [],
        credit_note=note_model(note, held_by_budget=held, issue_refused=issue_refused),
        decisions=decision_views(votes),
        revision=card_revision(note),
    )


async def credit_note_card_message(
    service: CaseService, credit_note_id: str, conn: AsyncConnection | None = None
) -> Message:
    return credit_note_card(await credit_note_card_view(service, credit_note_id, conn))


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
    if note is not None and (status != "escalated" or note["status"] == "approved"):
        # An escalated case whose note was approved (refused at issue) keeps its card: its Cancel button
        # is the way to end the note.
        return await credit_note_card_message(service, note["id"])
    if status == "explained":
        return await explanation(service, case, revision)
    if status == "escalated":
        why = f"Escalated to a person: {case.get('escalation_reason') or 'no reason recorded'}"
    elif status == "needs_customer":
        why = (case.get("reply") or {}).get("internal_note") or "Which customer is this?"
    else:
        why = f"The investigation stopped with status {status}; a person should look at it."
    return stopped_message(case["case_id"], customer_id, row.requester, steps, why, revision)


# ---- App Home ---------------------------------------------------------------------------------------------


async def home(service: CaseService, user_id: str, is_approver: bool) -> HomeView:
    engine = service.engine
    pending: list[PendingNoteView] = []
    if is_approver:
        notes = await queries.list_pending(engine)
        customers = await _customers_of_invoices(engine, [n.invoice_id for n in notes])
        pending = [
            PendingNoteView(note_model(n), n.case_id or "—", customers[n.invoice_id], card_revision(n))
            for n in notes
            if n.invoice_id in customers
        ]
    return HomeView(user_id, is_approver, pending, await open_cases_of(engine, user_id))


async def open_cases_of(engine: AsyncEngine, user_id: str) -> list[CaseSummaryView]:
    """The user's cases that still need someone: not explained and not settled, newest first."""
    cases, notes = schema.cases.c, schema.credit_notes.c
    latest_note = (
        select(notes.id)
        .where(notes.case_id == cases.id)
        .order_by(notes.created_at.desc(), notes.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(cases.id, cases.customer_id, cases.status, cases.created_at, cases.question, latest_note)
            .where(cases.requester == user_id, cases.status.not_in(FINAL_CASE_STATUSES))
            .order_by(cases.created_at.desc(), cases.id.desc())
        )
        return [
            CaseSummaryView(
                r[0], r[1] or "?", r[2], r[3], r[4], r[5]
            )  # (id, customer, status, at, words, note)
            for r in rows
        ]


async def _customers_of_invoices(engine: AsyncEngine, invoice_ids: Sequence[str]) -> dict[str, CustomerView]:
    if not invoice_ids:
        return {}
    inv, cust = schema.invoices.c, schema.customers.c
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(inv.id, cust.id, cust.name, inv.currency)  # the invoice's, as the note's card shows
            .join_from(schema.invoices, schema.customers, inv.customer_id == cust.id)
            .where(inv.id.in_(list(invoice_ids)))
        )
        return {r[0]: CustomerView(r[1], r[2], r[3]) for r in rows}
