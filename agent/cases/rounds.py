"""Rounds: an approver sent the note back with a question (deciding.request_changes); the requester's answer
is recorded, then the case is investigated again with every answer so far (a new round, whose note has a
new idempotency key)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from agent.cases.record import case_row, show_case, sync_case
from agent.cases.runner import CaseRunner, ProgressCallback
from agent.graph.state import CaseState, CaseStatus
from approvals import activity
from engine import schema

RESUBMITTED = "case.resubmitted"  # activity: the requester answered the approver's question


class NotWaitingForAnswer(ValueError):
    """An answer came for a case that is not waiting for one (answered already, or never sent back)."""


async def resubmit(
    cases: CaseRunner,
    case_id: str,
    *,
    answer: str,
    by: str,
    message_ts: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """The requester's answer to the approver's question: record it, then run the next round (see
    `accept_answer` and `run_round`). Returns the case JSON."""
    await accept_answer(cases, case_id, answer=answer, by=by)
    return await run_round(cases, case_id, message_ts=message_ts, on_progress=on_progress)


async def accept_answer(cases: CaseRunner, case_id: str, *, answer: str, by: str) -> None:
    """Take the answer (once: compare-and-set `revision_requested` → `queued`) and record it in
    activity_log, which is what the next round runs with — so a round a stop interrupts is run again
    by recovery with the same answer. NotWaitingForAnswer when the case is not waiting for one."""
    answer = answer.strip()
    if not answer:
        raise ValueError("the answer is empty: say what the approver asked for")
    row = schema.cases.c
    async with cases.engine.begin() as conn:
        taken = await conn.execute(
            update(schema.cases)
            .where(row.id == case_id, row.status == CaseStatus.REVISION_REQUESTED)
            .values(status=CaseStatus.QUEUED, updated_at=func.now())
            .returning(row.id)
        )
        if taken.first() is None:
            raise NotWaitingForAnswer(f"case {case_id} is not waiting for an answer")
        await activity.record(conn, "user", by, RESUBMITTED, "case", case_id, {"answer": answer})


async def run_round(
    cases: CaseRunner,
    case_id: str,
    *,
    message_ts: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Investigate an answered case again (a new round, whose note has a new idempotency key): it
    drafts a new note or explains. `message_ts`: the Slack message showing this round. Case JSON."""
    async with cases.case_lock(case_id):
        answer = await pending_answer(cases, case_id)
        if answer is None or not await cases.take_up(case_id, message_ts):
            return await show_case(cases.engine, case_id)
        values = await next_round(cases, case_id, *answer, on_progress)
        return await sync_case(cases, case_id, values)


async def next_round(
    cases: CaseRunner, case_id: str, answer: str, by: str, on_progress: ProgressCallback | None
) -> dict[str, Any]:
    """Investigate again with the complaint and every answer so far; what the last round concluded
    (its note, findings, reply) is cleared so nothing of it is mistaken for this round's. Under the
    case's lock (the caller holds it)."""
    row = await case_row(cases.engine, case_id)
    previous = (await cases.state_of(case_id)).values
    rounds = list(previous.get("rounds", []))
    rounds[-1] = {**rounds[-1], "answer": answer, "answered_by": by}
    again: CaseState = {
        "case_id": case_id,
        "customer_id": row.customer_id,
        "question": row.question,
        "requester": row.requester,
        "round": previous.get("round", 1) + 1,
        "rounds": rounds,
        "credit_note": None,
        "findings": None,
        "verified": False,
        "reply": None,
        "escalation_reason": None,
    }
    return await cases.investigate(case_id, again, on_progress)


async def pending_answer(cases: CaseRunner, case_id: str) -> tuple[str, str] | None:
    """The last answer recorded for the case (answer, by): what an interrupted round was run with."""
    log_ = schema.activity_log.c
    async with cases.engine.connect() as conn:
        row = (
            await conn.execute(
                select(log_.details, log_.actor_id)
                .where(log_.entity_id == case_id, log_.action == RESUBMITTED)
                .order_by(log_.id.desc())
                .limit(1)
            )
        ).first()
    return (str(row.details["answer"]), str(row.actor_id)) if row is not None else None
