"""The investigation graph (thread_id = case id).

intake → investigate → verify → write_up → END                       (explained / escalated)
                                          ↘ request_approval → await_approval ⟲ → END   (credit cases)

request_approval holds the only side effect before the pause (drafting, idempotent by key), because a node
that calls interrupt() runs again from its top when resumed. await_approval pauses until a decision has been
claimed in the database, then reads the note once, under issuing's locks (the database is the source of
truth): approved → issue, and settle on the issued note; still a draft (one of two approvals so far) → wait
again; rejected, expired or cancelled → rewrite the customer reply.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from sqlalchemy import select

from agent.cases.customers import customers_quoted
from agent.cases.intake import Asked, parse_complaint
from agent.graph import prompts
from agent.graph.configuration import CaseContext
from agent.graph.grounding import EvidenceBook, ungrounded
from agent.graph.investigators import (
    InvestigationOutcome,
    auditor_view,
    investigate_offline,
    read_what_was_asked,
)
from agent.graph.state import MAX_ROUNDS, CaseState, CaseStatus, Resume
from agent.graph.tool_context import ToolContext
from agent.graph.verify import verify_findings, verify_other_findings
from agent.graph.write_up import COMPLAINT, compose_reply, ungrounded_in_reply
from agent.model import budget
from agent.model.costs import endpoint_host
from approvals import drafting, holds, issuing, queries
from approvals.models import NO_MONEY, CreditNoteView, Decision, IssueRefused, NoteStatus, Refused, Rule
from engine import schema
from engine.db import reading
from engine.money import fmt

# Statuses go into the state as plain strings (`.value`): the checkpointer deserialises only the types it
# knows, and an enum of ours is not one of them (LangGraph warns now and will refuse it later).


def _escalate(reason: str) -> dict[str, Any]:
    return {"status": CaseStatus.ESCALATED.value, "escalation_reason": reason}


def _tools(state: CaseState, context: CaseContext, actor: str) -> ToolContext:
    return ToolContext(
        context.engine,
        state["case_id"],
        state["customer_id"] or "",
        actor,
        on_progress=context.on_progress,
        cache=context.ledger_cache,
    )


async def intake(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    context = runtime.context
    context.progress({"type": "step", "step": "intake"})
    complaint = parse_complaint(state["question"])
    customer_id = state.get("customer_id")
    name: str | None = None
    currency: str | None = None
    opened_from: str | None = None
    async with reading(context.engine) as conn:
        if not customer_id:  # an id the words quote, as the ledger holds it
            quoted = await customers_quoted(conn, state["question"])
            customer_id = quoted[0].id if len(quoted) == 1 else None
        if customer_id:
            customers = schema.customers.c
            found = await conn.execute(
                select(customers.name, customers.currency).where(customers.id == customer_id)
            )
            name, currency = found.one_or_none() or (None, None)
        if name is not None:  # a name quoted in the words does not set the reply's language
            invoices = schema.invoices.c
            ids = await conn.execute(select(invoices.id).where(invoices.customer_id == customer_id))
            complaint = parse_complaint(state["question"], (name,), ids.scalars().all())
        else:
            cases = schema.cases.c
            door = await conn.execute(select(cases.opened_from).where(cases.id == state["case_id"]))
            opened_from = door.scalar_one_or_none()
    update: dict[str, Any] = {
        "language": complaint.language,
        "language_fallback": complaint.language_fallback,
        "currency": currency,
        "month": complaint.month,
        "year": complaint.year,
        "months_back": complaint.months_back,
        "amount": fmt(complaint.amount) if complaint.amount is not None else None,
        "invoice_id": complaint.invoice_id,
        "customer_id": customer_id,
        "evidence": [],
        "decisions": [],
    }
    if name is None:
        from_cli = (opened_from or "").startswith("cli:")
        ask = prompts.ask_for_customer(complaint.language, from_cli=from_cli)
        if customer_id:
            ask = f"I can't find customer {customer_id} in the ledger. " + ask
        reply = {"customer_message": "", "internal_note": ask}
        return {**update, "status": CaseStatus.NEEDS_CUSTOMER.value, "reply": reply}
    return {**update, "status": CaseStatus.INVESTIGATING.value}


def after_intake(state: CaseState) -> Literal["investigate", "__end__"]:
    return "investigate" if state.get("status") == CaseStatus.INVESTIGATING else END


async def investigate(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    context = runtime.context
    configuration = context.configuration
    investigator, note = configuration.investigator, None
    run: budget.ModelRun | None = None
    if investigator == "llm":  # the month's model budget first: spent, or held by runs under way?
        run = await _admit_model_run(state, context)
        if run.refused is not None:
            investigator, note = "offline", run.refused
    context.progress({"type": "step", "step": "investigate", "investigator": investigator})
    evidence = EvidenceBook()
    month = state.get("month")
    amount = Decimal(state["amount"]) if state.get("amount") else None
    asked = Asked(month, amount, state.get("invoice_id"), state.get("year"), state.get("months_back"))
    auditor: dict[str, Any] = {}
    outcome = InvestigationOutcome(None)
    if run is not None and investigator == "llm":
        # Whatever the end (a failure, the case time limit, a cancelled task, even before the first
        # call), what the run reserved is free again.
        try:
            async with _tools(state, context, "agent:llm") as tools:  # the calls' audit rows go together
                from agent.model.investigator import (
                    investigate_with_model,  # the openai SDK only with a model configured
                )

                question = prompts.with_answers(state["question"], list(state.get("rounds", [])))
                outcome = await investigate_with_model(
                    tools,
                    evidence,
                    configuration,
                    question,
                    month,
                    state.get("amount"),
                    run,
                    state.get("language", "en"),
                )
        finally:
            await budget.release(run)
        if outcome.budget_stop is None:
            auditor = await auditor_view(_tools(state, context, "system:auditor"), asked)
            await read_what_was_asked(_tools(state, context, "system:auditor"), evidence, auditor)
        if outcome.budget_stop is not None:  # no further model call: the auditor takes the case over
            investigator, note, evidence = "offline", outcome.budget_stop, EvidenceBook()
    if investigator == "offline":
        async with _tools(state, context, "agent:offline") as tools:
            outcome, auditor = await investigate_offline(tools, evidence, asked)
    update: dict[str, Any] = {
        "investigator": investigator,
        "investigator_note": f"Investigated by the offline auditor: {note}" if note else None,
        "findings": outcome.findings,
        "auditor": auditor,
        "variant": auditor.get("variant"),
        "evidence": evidence.items,
    }
    if outcome.findings is None:
        return {**update, **_escalate(outcome.escalation_reason or "the investigator reached no conclusion")}
    context.progress({"type": "finding", "findings": outcome.findings})
    return update


async def _admit_model_run(state: CaseState, context: CaseContext) -> budget.ModelRun:
    configuration = context.configuration
    return await budget.admit(
        context.engine,
        configuration.spend,
        case_id=state["case_id"],
        model=configuration.model,
        endpoint=endpoint_host(configuration.base_url),
        max_tokens=configuration.max_tokens,
        max_calls=configuration.max_steps,
        reserve_input_tokens=configuration.reserve_input_tokens,
    )


async def verify(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    context = runtime.context
    context.progress({"type": "step", "step": "verify"})
    evidence = EvidenceBook(state.get("evidence", []))
    findings = state.get("findings")
    assert findings is not None
    auditor = state.get("auditor") or {}
    async with _tools(state, context, "system:verify") as tools:
        verdict = await verify_findings(tools, findings, auditor, evidence)
        # The rest of the account comes from the auditor (code), each recomputed on the record.
        others = await verify_other_findings(tools, auditor.get("other_findings") or [], evidence)
    update: dict[str, Any] = {
        "evidence": evidence.items,
        "target_invoice_id": verdict.target_invoice_id,
        "other_findings": others,
    }
    if not verdict.ok:
        return {**update, **_escalate(verdict.reason or "the findings could not be verified")}
    target = verdict.target_invoice_id
    others = [i for i in findings["invoice_ids"] if i != target]
    reasoning = findings["reasoning"]
    # Whose words the approver reads: a model's only when every figure in them is in the evidence.
    written_by = "model" if state.get("investigator") == "llm" else "auditor"
    # The approver reads it: no figure the ledger did not give. The customer's own amount is on the record
    # only to be quoted back to them, so it grounds nothing the model says.
    ledger_items = [item for item in evidence.items if item["tool"] != COMPLAINT]
    if ungrounded(reasoning, ledger_items, state.get("language", "en")):  # told to write in that language
        reasoning, written_by = (state.get("auditor") or {}).get("reasoning") or "", "auditor"
    # From here on the findings are what BillSleuth stands behind: the verified target invoice first.
    verified = {
        **findings,
        "invoice_ids": [target, *others],
        "reasoning": reasoning,
        "reasoning_by": written_by,
    }
    return {**update, "verified": True, "findings": verified}


def after_check(state: CaseState) -> Literal["continue", "__end__"]:
    return END if state.get("status") == CaseStatus.ESCALATED else "continue"


async def write_up(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    context = runtime.context
    context.progress({"type": "step", "step": "write_up"})
    evidence = EvidenceBook(state.get("evidence", []))
    findings = state["findings"]
    target = state["target_invoice_id"]
    assert findings is not None and target is not None
    reply = compose_reply(
        state.get("language", "en"),
        findings,
        target,
        state.get("variant"),
        evidence,
        state.get("investigator", ""),
        (state.get("auditor") or {}).get("asked"),
        others=state.get("other_findings") or [],
        currency=state.get("currency") or "USD",
        language_fallback=state.get("language_fallback"),
    )
    stray = ungrounded_in_reply(reply, evidence, state.get("language", "en"))
    if stray:
        return _escalate(f"the write-up states numbers the ledger does not support: {', '.join(stray)}")
    credit = findings["expected_action"] == "credit_note"
    status = (CaseStatus.AWAITING_APPROVAL if credit else CaseStatus.EXPLAINED).value
    return {"reply": reply, "status": status}


def after_write_up(state: CaseState) -> Literal["request_approval", "__end__"]:
    return "request_approval" if state.get("status") == CaseStatus.AWAITING_APPROVAL else END


async def request_approval(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    """Code drafts the credit note for exactly the verified amount, on the invoice the evidence names."""
    context = runtime.context
    context.progress({"type": "step", "step": "request_approval"})
    findings = state["findings"]
    assert findings is not None
    try:
        note, created = await drafting.draft_credit_note(
            context.engine,
            case_id=state["case_id"],
            invoice_id=state["target_invoice_id"] or "",
            amount=Decimal(findings["overcharge"]),
            root_cause=findings["root_cause"],
            memo=(state.get("reply") or {}).get("customer_message", ""),
            settings=context.approval_settings,
            round_=state.get("round", 1),
        )
    except Refused as refusal:
        return _escalate(f"the credit note could not be drafted ({refusal.rule}): {refusal.message}")
    context.progress({"type": "credit_note", "credit_note_id": note.id, "created": created})
    return {"credit_note": note.summary()}


async def await_approval(state: CaseState, runtime: Runtime[CaseContext]) -> dict[str, Any]:
    context = runtime.context
    note = state["credit_note"]
    assert note is not None
    asked = {"credit_note_id": note["id"], "amount": note["amount"], "needed": note["needed"]}
    decision = Resume.from_dict(interrupt(asked))
    decisions = [*state.get("decisions", []), decision.to_dict()]
    try:
        # The note as the database has it now, issued first when it is approved: one read, under
        # issuing's locks, and the case settles on what issuing left.
        current = await issuing.issue_if_approved(
            context.engine, note["id"], context.approval_settings, invoice_id=note.get("invoice_id")
        )
        context.notes_read[current.id] = current
    except IssueRefused as refusal:
        refused = refusal.note or await queries.get_credit_note(context.engine, note["id"])
        context.notes_read[refused.id] = refused
        held = refusal.rule == Rule.DAILY_CREDIT_LIMIT and holds.fits_a_day(
            refused.amount, refused.currency, context.approval_settings
        )
        if held or refusal.rule == Rule.STRIPE_UNAVAILABLE:
            # A hard stop holds the approved note, it does not undo the approvals: the case keeps
            # waiting, and the sweep resumes it once the day's limit has room (the next UTC day, or
            # a raised limit). A note larger than a whole day's limit escalates like any refusal.
            # Stripe out of reach or failing likewise: the sweep tries again, with the same key.
            return {
                "decisions": decisions,
                "credit_note": refused.summary(),
                "status": CaseStatus.AWAITING_APPROVAL.value,
            }
        return {
            "decisions": decisions,
            "credit_note": refused.summary(),
            **_escalate(f"issuing {note['id']} was refused ({refusal.rule}): {refusal.message}"),
        }
    if decision.decision == Decision.REQUEST_CHANGES and current.status == NoteStatus.REJECTED:
        sent_back = _changes_requested(state, decision)
        return {"decisions": decisions, "credit_note": current.summary(), **sent_back}
    return {"decisions": decisions, **settled_on_note(state, current)}


def _changes_requested(state: CaseState, decision: Resume) -> dict[str, Any]:
    """The approver sent the note back with a question: the case waits for the requester's answer — or,
    after the last round, escalates to a person, its reply promising no money."""
    note = state["credit_note"]
    assert note is not None
    round_ = state.get("round", 1)
    asked = {"round": round_, "credit_note_id": note["id"], "asked_by": decision.approver}
    rounds = [*state.get("rounds", []), {**asked, "question": decision.comment}]
    if round_ < MAX_ROUNDS:
        return {"rounds": rounds, "status": CaseStatus.REVISION_REQUESTED.value}
    findings = state["findings"]
    assert findings is not None
    reply = {
        **(state.get("reply") or {}),
        "customer_message": prompts.rejected_reply(state.get("language", "en"), findings["invoice_ids"][:1]),
    }
    why = f"changes were requested in all {MAX_ROUNDS} rounds; a person takes it from here"
    return {"rounds": rounds, "reply": reply, **_escalate(why)}


def settled_on_note(state: CaseState, note: CreditNoteView) -> dict[str, Any]:
    """The case once its credit note has this status: issued → the reply gains the amount; rejected,
    expired or cancelled → the reply is rewritten with no amount and no promise of money back; still a
    draft (or held) → the case keeps waiting."""
    language = state.get("language", "en")
    reply = dict(state.get("reply") or {})
    findings = state["findings"]
    assert findings is not None
    if note.status == NoteStatus.ISSUED:
        # Issued in Stripe: the customer's credit note is Stripe's (its id names it); the dashboard link
        # is for staff, so it goes in the internal note.
        named = f"{note.id} ({note.stripe_credit_note_id})" if note.stripe_credit_note_id else note.id
        reply["customer_message"] = (
            reply.get("customer_message", "").rstrip()
            + "\n\n"
            + prompts.issued_addendum(language, named, note.amount, note.currency)
        )
        if note.stripe_url:
            internal = reply.get("internal_note", "").rstrip()
            reply["internal_note"] = f"{internal}\n\nStripe credit note: {note.stripe_url}".lstrip()
    elif note.status in NO_MONEY:
        reply["customer_message"] = prompts.rejected_reply(language, findings["invoice_ids"][:1])
    # The case takes its note's ending (the two share those names); any other note status keeps it waiting.
    ended = note.status in (NoteStatus.ISSUED, *NO_MONEY)
    status = (CaseStatus(note.status) if ended else CaseStatus.AWAITING_APPROVAL).value
    return {"credit_note": note.summary(), "reply": reply, "status": status}


def after_approval(state: CaseState) -> Literal["await_approval", "__end__"]:
    return "await_approval" if state.get("status") == CaseStatus.AWAITING_APPROVAL else END


def build_graph(checkpointer: Any = None) -> Any:
    graph = StateGraph(CaseState, context_schema=CaseContext)
    graph.add_node("intake", intake)
    graph.add_node("investigate", investigate)
    graph.add_node("verify", verify)
    graph.add_node("write_up", write_up)
    graph.add_node("request_approval", request_approval)
    graph.add_node("await_approval", await_approval)
    graph.add_edge(START, "intake")
    graph.add_conditional_edges("intake", after_intake, ["investigate", END])
    graph.add_conditional_edges("investigate", after_check, {"continue": "verify", END: END})
    graph.add_conditional_edges("verify", after_check, {"continue": "write_up", END: END})
    graph.add_conditional_edges("write_up", after_write_up, ["request_approval", END])
    graph.add_conditional_edges("request_approval", after_check, {"continue": "await_approval", END: END})
    graph.add_conditional_edges("await_approval", after_approval, ["await_approval", END])
    return graph.compile(checkpointer=checkpointer)
