"""Deciding on a case's credit note: claim the decision in the database first (compare-and-set, in
approvals/), then resume the paused graph, one resumer at a time per case — a vote, a request for changes
(a reject that sends the note back with a question), a cancel of an approved note never issued."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from agent.cases.record import CaseNotFound, case_row, show_case, sync_case
from agent.cases.runner import WAITING_NODE, CaseRunner, thread_config
from agent.graph.configuration import CaseContext
from agent.graph.state import EXPIRED_RESUME, CaseStatus, Resume
from approvals import cancelling, decisions, queries
from approvals.models import (
    NO_MONEY,
    ApprovalRefused,
    CreditNoteView,
    Decision,
    DecisionOutcome,
    NoCase,
    Rule,
)

log = logging.getLogger(__name__)


async def decide(
    cases: CaseRunner,
    credit_note_id: str,
    *,
    approver: str,
    decision: Decision,
    comment: str = "",
    approver_is_bot: bool = False,
    source: str | None = None,
    resume_as: Decision | None = None,
    seen_revision: int | None = None,
) -> tuple[DecisionOutcome, dict[str, Any]]:
    """Claim the decision in the database first (compare-and-set), then resume the paused graph.
    `source`: where the vote came from, `slack:<team id>` or `cli:<os account>` (approvals.source).
    `resume_as`: what the graph hears, when it is more than the vote (a reject that requests changes).
    `seen_revision`: the card's revision the vote was cast from; a note that moved on since raises
    NoteMovedOn. The claim's locked read is the only read of the note: it names the case too (the case
    row's requester is checked under it), and a note drafted outside a case raises CaseNotFound."""
    try:
        outcome = await decisions.decide(
            cases.engine,
            credit_note_id,
            approver=approver,
            decision=decision,
            comment=comment,
            requester=None,  # the claim checks the case row's requester itself
            settings=await cases.settings_in_force(),
            approver_is_bot=approver_is_bot,
            source=source,
            seen_revision=seen_revision,
            case_required=True,
        )
    except NoCase as error:
        raise CaseNotFound(str(error)) from None
    except ApprovalRefused as refusal:
        if refusal.rule == Rule.EXPIRED:  # the vote found the draft overdue and expired it
            await resume(cases, await _case_of(cases, credit_note_id), EXPIRED_RESUME)
        raise
    case_id = outcome.case_id
    assert case_id is not None  # case_required: the claim refused a note without one
    resumed = None
    if outcome.changed:
        run = cases.context(None)
        resumed = await _resumed(cases, case_id, Resume(approver, resume_as or decision, comment), run)
        outcome = replace(outcome, note=run.notes_read.get(credit_note_id))
    return outcome, resumed or await show_case(cases.engine, case_id)


async def request_changes(
    cases: CaseRunner,
    credit_note_id: str,
    *,
    approver: str,
    question: str,
    approver_is_bot: bool = False,
    source: str | None = None,
    seen_revision: int | None = None,
) -> tuple[DecisionOutcome, dict[str, Any]]:
    """Send the note back with a question: a reject vote (every rule of a vote applies) whose comment is
    the question; the case then waits for the requester's answer (`revision_requested`), or escalates
    after the last round."""
    return await decide(
        cases,
        credit_note_id,
        approver=approver,
        decision=Decision.REJECT,
        comment=question,
        approver_is_bot=approver_is_bot,
        source=source,
        resume_as=Decision.REQUEST_CHANGES,
        seen_revision=seen_revision,
    )


async def cancel(
    cases: CaseRunner,
    credit_note_id: str,
    *,
    approver: str,
    reason: str,
    approver_is_bot: bool = False,
    source: str | None = None,
    note: CreditNoteView | None = None,
) -> tuple[DecisionOutcome, dict[str, Any]]:
    """Cancel an approved note that was never issued (held, or refused at issue); its case rewrites the
    customer reply as for a reject, and its invoice is free for a new case."""
    case_id = await _case_of(cases, credit_note_id, note)
    outcome = await cancelling.cancel(
        cases.engine,
        credit_note_id,
        approver=approver,
        reason=reason,
        requester=(await case_row(cases.engine, case_id)).requester,
        settings=await cases.settings_in_force(),
        approver_is_bot=approver_is_bot,
        source=source,
    )
    if outcome.changed:
        await take_note_outcome(cases, case_id, Resume(approver, Decision.CANCEL, reason))
    return outcome, await show_case(cases.engine, case_id)


async def _case_of(cases: CaseRunner, credit_note_id: str, note: CreditNoteView | None = None) -> str:
    if note is None:
        note = await queries.get_credit_note(cases.engine, credit_note_id)
    if note.case_id is None:
        raise CaseNotFound(f"{credit_note_id} was not drafted by a case")
    return note.case_id


async def resume(cases: CaseRunner, case_id: str, decision: Resume) -> bool:
    """Resume a case waiting for approval; one resumer at a time per case (advisory lock).

    LangGraph does not stop two concurrent resumes of one thread, and resuming a thread that is not
    waiting would start a fresh run — so check it is waiting, under the lock, every time.
    """
    return await _resumed(cases, case_id, decision) is not None


async def _resumed(
    cases: CaseRunner, case_id: str, decision: Resume, run: CaseContext | None = None
) -> dict[str, Any] | None:
    """`resume`, returning the case JSON it synced (None: the case was not waiting). `run`: the run's
    context, when the caller wants what the run read (its `notes_read`)."""
    async with cases.case_lock(case_id):
        state = await cases.state_of(case_id)
        if WAITING_NODE not in (state.next or ()):
            log.info("case %s is not waiting for approval; not resuming", case_id)
            return None
        from langgraph.types import Command  # loaded by the graph already; not at import time

        values = await cases.graph.ainvoke(
            Command(resume=decision.to_dict()),
            thread_config(case_id),
            context=run or cases.context(None),
            durability="sync",
        )
        return await sync_case(cases, case_id, values, note_read_by_run=True)


async def take_note_outcome(cases: CaseRunner, case_id: str, decision: Resume) -> bool:
    """Let the case take its note's outcome: resume it when it is waiting; a case that already ended
    with its note approved (an escalated case whose issue was refused, then cancelled) is rewritten in
    place, so its reply promises no money either."""
    if await resume(cases, case_id, decision):
        return True
    async with cases.case_lock(case_id):
        state = await cases.state_of(case_id)
        note = await queries.credit_note_for_case(cases.engine, case_id)
        values = state.values
        if (
            state.next
            or note is None
            or note.status not in NO_MONEY
            or values.get("status") != CaseStatus.ESCALATED
        ):
            return False
        from agent.graph.graph import settled_on_note  # a graph is running: LangGraph is loaded already

        heard = [*values.get("decisions", []), decision.to_dict()]
        ended = {"decisions": heard, **settled_on_note(values, note)}
        await cases.graph.aupdate_state(thread_config(case_id), ended, as_node=WAITING_NODE)
        await sync_case(cases, case_id)
    return True
