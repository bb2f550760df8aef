"""The approver's view of a credit note, read once and shown three ways: the Slack evidence card, the
CLI's `show --json`, and the CLI's `show` text.

It is the SYSTEM's fresh recomputation of the invoice (audited under the viewer: `system:card` for a card,
`approver:<who>` for `show`), the votes from the approvals tables and the agent's own tool calls from
audit_log — never a copy of what the agent said about them. The views' own recomputations are not part of
the trail: they are someone looking, not evidence the investigation gathered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases.record import case_row_in
from agent.cases.service import CaseService
from agent.graph.state import MAX_ROUNDS, CaseStatus, refused_at_issue
from agent.graph.tool_context import ToolContext, ToolError
from agent.graph.tool_json import check_json
from agent.graph.tools import call_tool, recompute
from agent.model.costs import case_model_cost
from approvals import queries
from approvals.holds import held_by_daily_limit
from approvals.ledger_import import ledger_change
from approvals.models import OPEN_NOTES, NoteStatus, Vote
from approvals.models import CreditNoteView as Note
from bot import store
from bot.cards import credit_note_card
from bot.cards.credit_note import LEAVES_WITH_THE_SWEEP
from bot.cards.models import (
    ConclusionView,
    CreditNoteCardView,
    CustomerView,
    Message,
    OtherFindingView,
    RecomputationView,
    RoundView,
    ToolCallView,
)
from bot.presenters.model_cost import model_line
from bot.presenters.notes import (
    CardUnavailable,
    args_summary,
    customer_of_invoice_in,
    decision_views,
    note_model,
)
from bot.presenters.other_findings import other_finding_views
from bot.presenters.rounds import rounds_in
from engine import schema
from engine.db import reading
from engine.diff import InvoiceCheck
from engine.model import Payment
from engine.money import fmt_amount

CARD_VIEWER = "system:card"  # who a card's own recomputation is audited as
AGENT_ACTOR_PREFIX = "agent:"


@dataclass(frozen=True)
class ToolCall:
    """One of the agent's tool calls, as audit_log recorded it."""

    at: datetime
    actor: str  # agent:offline | agent:llm
    tool: str
    args: dict[str, Any]
    ok: bool
    result_digest: str | None


@dataclass(frozen=True)
class CaseFacts:
    """What the note's case says: who asked, what, and what the investigation concluded."""

    case_id: str
    status: str
    question: str
    requester: str
    findings: dict[str, Any]
    escalation_reason: str | None
    found_by: str | None = None  # how the customer was found in the complaint (None: given as an id)
    model_cost: dict[str, Any] | None = (
        None  # the model's tokens and cost for the case (agent/model/costs.py)
    )


@dataclass(frozen=True)
class ApproverView:
    note: Note
    customer: CustomerView
    case: CaseFacts | None  # None for a note drafted outside a case
    check: InvoiceCheck  # the fresh recomputation
    payments: tuple[Payment, ...]  # the ledger's payments of the invoice
    votes: tuple[Vote, ...]
    tool_trail: tuple[ToolCall, ...]
    held_by_budget: bool  # approved, waiting for room under the daily credit limit
    issue_refused: str | None  # approved, but issuing it was refused: why
    ledger_changed: str | None = None  # open, and an import changed its invoice since: what is owed now
    rounds: tuple[RoundView, ...] = ()  # the case's notes sent back with a question, and the answers
    other_findings: tuple[OtherFindingView, ...] = ()  # the account's other overpaid invoices

    @property
    def revision(self) -> int:
        return self.note.revision


async def read_approver_view(
    service: CaseService,
    credit_note_id: str,
    *,
    viewer: str,
    conn: AsyncConnection | None = None,
    as_left: Note | None = None,
) -> ApproverView:
    """Everything an approver sees, read now. All reads share one connection — the caller's (say, the
    one holding the card's lock) or one from the pool: under load a card costs one checkout, not six.
    `as_left`: the note as the caller's own committed change left it, taken instead of reading the note
    again while nothing can have moved it since (`_nothing_since`).
    Unknown note → UnknownCreditNote; invoice or customer gone → CardUnavailable."""
    if conn is None:
        async with reading(service.engine) as own:
            return await _read(service, own, credit_note_id, viewer, as_left)
    return await _read(service, conn, credit_note_id, viewer, as_left)


async def _read(
    service: CaseService, conn: AsyncConnection, credit_note_id: str, viewer: str, as_left: Note | None
) -> ApproverView:
    votes = await queries.votes_in(conn, credit_note_id)
    case_row = await case_row_in(conn, as_left.case_id) if as_left and as_left.case_id else None
    if as_left is not None and case_row is not None and _nothing_since(as_left, votes, case_row.drawn_state):
        note = as_left
    else:
        note = queries.to_view(await queries.note_row_in(conn, credit_note_id), votes)
        if note.case_id and case_row is None:
            case_row = await case_row_in(conn, note.case_id)
    customer = await customer_of_invoice_in(conn, note.invoice_id)
    case = await _case_facts(conn, case_row) if case_row is not None else None
    held = case is not None and await held_by_daily_limit(
        conn, note, case_waits=case.status == CaseStatus.AWAITING_APPROVAL, settings=service.approval_settings
    )
    # An approved note whose case escalated was refused at issue: it waits for a person, not for room.
    refused = case is not None and refused_at_issue(note.status, case.status)
    check, payments = await _fresh_recomputation(service, conn, note, customer.id, viewer)
    return ApproverView(
        note=note,
        customer=customer,
        case=case,
        check=check,
        payments=payments,
        votes=tuple(votes),
        tool_trail=tuple(await _agent_trail_in(conn, note.case_id)) if note.case_id else (),
        held_by_budget=held,
        issue_refused=(case.escalation_reason or "issuing it was refused") if refused and case else None,
        ledger_changed=await ledger_change(conn, note.id) if note.status in OPEN_NOTES else None,
        rounds=await rounds_in(conn, note.case_id) if note.case_id else (),
        other_findings=tuple(
            await other_finding_views(conn, case.case_id, case.findings.get("other_findings") or [])
        )
        if case is not None
        else (),
    )


def _nothing_since(as_left: Note, votes: Sequence[Vote], drawn: str | None) -> bool:
    """Whether `as_left`, a note as its changer committed it under the note's lock, is still the note, so
    the card need not read it again. Every later change raises the note's revision and is drawn by its
    own changer after it commits: a later vote shows in the votes (they only accrue), and a later change
    already drawn shows in the case's drawn state. The exception is an approved note, which issuing can
    reopen as a draft when its approvers left the list — the one change that lowers the revision, so the
    drawn state cannot tell that it came later: an approved note is always read."""
    if as_left.status == NoteStatus.APPROVED:
        return False
    approvers, rejection = queries.ballot(votes)
    if (approvers, rejection.approver if rejection else None) != (as_left.approvers, as_left.rejected_by):
        return False
    shown = store.drawn_note(drawn)
    return shown is None or shown[0] != as_left.id or shown[1] <= as_left.revision


async def _case_facts(conn: AsyncConnection, row: Any) -> CaseFacts:
    case_id = row.id
    return CaseFacts(
        case_id=row.id,
        status=row.status,
        question=row.question,
        requester=row.requester,
        findings=row.findings or {},
        escalation_reason=row.escalation_reason,
        found_by=row.found_by,
        model_cost=await case_model_cost(conn, case_id),
    )


async def _fresh_recomputation(
    service: CaseService, conn: AsyncConnection, note: Note, customer_id: str, viewer: str
) -> tuple[InvoiceCheck, tuple[Payment, ...]]:
    """The system's own recomputation of the invoice, now (read on `conn`), audited under `viewer`."""
    tools = ToolContext(service.engine, note.case_id or "", customer_id, viewer, connection=conn)
    audited = await call_tool(tools, "recompute_invoice", {"invoice_id": note.invoice_id})
    if not audited.ok:
        raise CardUnavailable(f"cannot recompute {note.invoice_id}: {audited.error}")
    try:
        check = await recompute(tools, note.invoice_id)  # the ledger is cached: no second read
    except ToolError as error:
        raise CardUnavailable(f"cannot recompute {note.invoice_id}: {error}") from None
    ledger = tools.cached_ledger
    payments = tuple(p for p in (ledger.payments if ledger else ()) if p.invoice_id == note.invoice_id)
    return check, payments


_audit = schema.audit_log.c
# Built once, as every statement a card draw runs: building one costs about as much CPU as running it.
_AGENT_TRAIL = (
    select(_audit.at, _audit.actor, _audit.tool, _audit.args, _audit.ok, _audit.result_digest)
    .where(_audit.case_id == bindparam("case_id"), _audit.actor.startswith(AGENT_ACTOR_PREFIX))
    .order_by(_audit.id)
)


async def _agent_trail_in(conn: AsyncConnection, case_id: str) -> list[ToolCall]:
    """The agent's own tool calls for the case, in order (the system's checks are not the agent's)."""
    rows = await conn.execute(_AGENT_TRAIL, {"case_id": case_id})
    return [ToolCall(r.at, r.actor, r.tool, r.args or {}, bool(r.ok), r.result_digest) for r in rows]


# ---- shown three ways -------------------------------------------------------------------------------------


def card_view(view: ApproverView) -> CreditNoteCardView:
    """The Slack evidence card's view model."""
    note, case = view.note, view.case
    findings = case.findings if case is not None else {}
    conclusion = ConclusionView(
        root_cause=str(findings.get("root_cause") or note.root_cause),
        overcharge=Decimal(str(findings.get("overcharge") or note.amount)),
        summary=str(findings.get("reasoning") or note.memo or ""),
        summary_by="model" if findings.get("reasoning_by") == "model" else "auditor",
    )
    return CreditNoteCardView(
        case_id=case.case_id if case is not None else "—",
        customer=view.customer,
        complaint=case.question if case is not None else "",
        requested_by=case.requester if case is not None else "unknown",
        conclusion=conclusion,
        recompute=RecomputationView.from_check(view.check, view.payments),
        tool_trail=[ToolCallView(c.tool, args_summary(c.args), c.ok) for c in view.tool_trail],
        credit_note=note_model(
            note,
            held_by_budget=view.held_by_budget,
            issue_refused=view.issue_refused,
            ledger_changed=view.ledger_changed,
        ),
        decisions=decision_views(view.votes),
        revision=view.revision,
        rounds=view.rounds,
        max_rounds=MAX_ROUNDS,
        found_by=case.found_by if case is not None else None,
        other_findings=view.other_findings,
        model_line=model_line(findings.get("investigator_note"), case.model_cost if case else None),
    )


def as_json(view: ApproverView) -> dict[str, Any]:
    """`show --json`: {credit_note, recompute, approvals, tool_trail} (DESIGN §3)."""
    note = view.note
    return {
        "credit_note": {
            **note_json(note),
            "reason": note.reason,
            "root_cause": note.root_cause,
            "memo": note.memo,
            "held_by_daily_limit": view.held_by_budget,
            "issue_refused": view.issue_refused,
        },
        "recompute": check_json(view.check),
        "approvals": [
            {
                "approver": v.approver,
                "decision": v.decision,
                "comment": v.comment,
                "at": v.decided_at.isoformat(),
                "source": v.source,
                "via": v.via,  # "via CLI by <os account>" for a vote cast from the CLI
            }
            for v in view.votes
        ],
        "tool_trail": [
            {
                "at": c.at.isoformat(),
                "actor": c.actor,
                "tool": c.tool,
                "args": c.args,
                "ok": c.ok,
                "result_digest": c.result_digest,
            }
            for c in view.tool_trail
        ],
    }


def as_text(view: ApproverView) -> str:
    """`show` without --json: the same facts, for a person at a terminal."""
    note, check = view.note, view.check
    money = fmt_amount(note.amount, note.currency)
    votes = f"approvals {note.approvals} of {note.needed}"
    lines = [
        f"{note.id}  {money} on {note.invoice_id}  {note.status}  {votes}",
        f"  customer {view.customer.id} ({view.customer.name})  case {note.case_id or '-'}",
        f"  reason: {note.reason}  root cause: {note.root_cause}",
    ]
    if view.held_by_budget:
        lines.append("  held: the daily credit limit has no room for it today")
    if view.issue_refused:
        lines.append(f"  issuing it was refused: {view.issue_refused}")
    if view.ledger_changed:
        lines.append(f"  {view.ledger_changed}")
    lines.append(
        f"  recomputed now: billed {fmt_amount(check.billed_total, note.currency)},"
        f" the rules say {fmt_amount(check.should_pay, note.currency)},"
        f" paid {fmt_amount(check.paid_total, note.currency)},"
        f" overcharge {fmt_amount(check.overcharge, note.currency)}"
    )
    lines.append("  votes:" if view.votes else "  votes: none yet")
    lines += [
        f"    {v.decision} by {v.approver} at {v.decided_at:%Y-%m-%d %H:%M}"
        + (f" ({v.via})" if v.via else "")
        + (f": {v.comment}" if v.comment else "")
        for v in view.votes
    ]
    lines.append("  the agent's tool calls:" if view.tool_trail else "  the agent's tool calls: none")
    lines += [f"    {c.tool}({args_summary(c.args)}){'' if c.ok else ' failed'}" for c in view.tool_trail]
    return "\n".join(lines)


def note_json(note: Note) -> dict[str, Any]:
    """A note as `list --json` and `show --json` print it."""
    return {
        **note.summary(),
        "case_id": note.case_id,
        "expires_at": note.expires_at.isoformat() if note.expires_at else None,
    }


def waiting_for(note: Mapping[str, Any]) -> str:
    """What a listed note (`list --json`'s shape) waits for, in a few words: the CLI's and the slash
    command's `list`."""
    if note.get("issue_refused"):
        return f"approved, issuing refused ({note['issue_refused']}): cancel it"
    if note.get("held_by_daily_limit"):
        return "approved, held by the daily credit limit"
    if note.get("status") == NoteStatus.APPROVED:
        return f"approved, not held: {LEAVES_WITH_THE_SWEEP}"
    return f"expires {note['expires_at'] or '-'}"


def card_message(view: ApproverView) -> Message:
    """The evidence card, drawn from what an approver sees."""
    return credit_note_card(card_view(view))


async def credit_note_card_message(
    service: CaseService, credit_note_id: str, conn: AsyncConnection | None = None
) -> Message:
    return card_message(await read_approver_view(service, credit_note_id, viewer=CARD_VIEWER, conn=conn))
