"""Opening a case: record it (queued), run its investigation to its pause or end, and the two ways a queued
case moves without one (a person picks its customer; it is abandoned)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases.record import show_case, sync_case
from agent.cases.runner import CaseRunner, ProgressCallback
from agent.graph.state import CaseState, CaseStatus
from approvals import activity
from approvals.models import CLI_SOURCE
from engine import schema

log = logging.getLogger(__name__)

# An outbox change (migration 0006's table): a case was opened from the CLI in a Slack user's name; the
# bot tells that user by DM. Written in the transaction that records the case, so it is never lost.
OPENED_FROM_CLI = "case.opened_from_cli"
_TELL_REQUESTER = text("SELECT outbox_add('case', :case_id, :case_id, :change)").bindparams(
    change=OPENED_FROM_CLI
)


async def new_case_id(cases: CaseRunner, conn: AsyncConnection | None = None) -> str:
    """The next case id; on `conn` when given (say, inside the transaction that claims its event)."""
    if conn is None:
        async with cases.engine.begin() as own:
            return await new_case_id(cases, own)
    number = (await conn.execute(select(func.nextval("case_number")))).scalar_one()
    return f"CASE-{number:04d}"


async def register_case(
    cases: CaseRunner,
    conn: AsyncConnection,
    question: str,
    *,
    requester: str,
    customer_id: str | None = None,
    channel: str | None = None,
    thread_ts: str | None = None,
    status: str = CaseStatus.QUEUED,
    opened_from: str | None = None,
    found_by: str | None = None,
    linked_from: str | None = None,
    case_id: str | None = None,
) -> str:
    """Record a new case on the caller's connection and return its id: `queued` until an
    investigation slot runs it. Written in the transaction that claims the request (a Slack event),
    so a claimed request always has its case, and recovery finds it whatever stops the process.
    `opened_from`: `cli:<os account>` for a case opened from the CLI (that OS account may not decide
    it, and the requester is told through the outbox), or the Slack user who opened a linked case.
    `linked_from`: the case whose audit found the overcharge this one is opened for. `case_id`: one
    taken earlier with `new_case_id` on the same transaction (default: the next one)."""
    question = question.strip()
    if not question:
        raise ValueError("the complaint is empty: say what the customer wrote")
    case_id = case_id or await new_case_id(cases, conn)
    await conn.execute(
        insert(schema.cases).values(
            id=case_id,
            customer_id=customer_id,
            question=question,
            requester=requester,
            status=status,
            channel=channel,
            thread_ts=thread_ts,
            opened_from=opened_from,
            found_by=found_by,
            linked_from=linked_from,
        )
    )
    details = {"customer_id": customer_id, **({"opened_from": opened_from} if opened_from else {})}
    if found_by:
        details["found_by"] = found_by
    if linked_from:
        details["linked_from"] = linked_from
    if opened_from and opened_from.startswith(CLI_SOURCE):
        await conn.execute(_TELL_REQUESTER, {"case_id": case_id})
    await activity.record(conn, "user", requester, "case.opened", "case", case_id, details)
    return case_id


async def open_case(
    cases: CaseRunner,
    question: str,
    *,
    requester: str,
    customer_id: str | None = None,
    channel: str | None = None,
    thread_ts: str | None = None,
    message_ts: str | None = None,
    on_progress: ProgressCallback | None = None,
    case_id: str | None = None,
    opened_from: str | None = None,
    found_by: str | None = None,
) -> dict[str, Any]:
    """Run a case's investigation to its end or its pause, and return the case JSON.

    `case_id`: a case registered earlier (queued); without one the case is recorded here. A queued
    case some other run has already taken up (recovery, another process) is not run again.
    `channel`, `thread_ts`, `message_ts`: where the case lives in Slack (its thread, and the message
    that shows its progress and then its card), recorded with the case so any process can find it."""
    if case_id is None:
        async with cases.engine.begin() as conn:
            case_id = await register_case(
                cases, conn, question, requester=requester, customer_id=customer_id, channel=channel,
                thread_ts=thread_ts, opened_from=opened_from, found_by=found_by,
            )  # fmt: skip
    initial: CaseState = {
        "case_id": case_id,
        "customer_id": customer_id,
        "question": question.strip(),
        "requester": requester,
    }
    async with cases.case_lock(case_id):
        if not await cases.take_up(case_id, message_ts):
            return await show_case(cases.engine, case_id)
        values = await cases.investigate(case_id, initial, on_progress)
        case = await sync_case(cases, case_id, values)  # under the lock: no resume can be newer
        log.info("case %s investigated: %s", case_id, case["status"])  # one line per case, for ops
        return case


async def choose_customer(cases: CaseRunner, case_id: str, customer_id: str, *, by: str) -> bool:
    """A person picked the customer of a case whose message could name several: it is queued to run
    (once: compare-and-set on a case still without one). False when it had one already."""
    row = schema.cases.c
    async with cases.engine.begin() as conn:
        chosen = await conn.execute(
            update(schema.cases)
            .where(row.id == case_id, row.status == CaseStatus.NEEDS_CUSTOMER, row.customer_id.is_(None))
            .values(
                customer_id=customer_id, status=CaseStatus.QUEUED, found_by="chosen", updated_at=func.now()
            )
            .returning(row.id)
        )
        if chosen.first() is None:
            return False
        await activity.record(
            conn, "user", by, "case.customer_chosen", "case", case_id, {"customer_id": customer_id}
        )
    return True


async def abandon(cases: CaseRunner, case_id: str, reason: str) -> bool:
    """A queued case that can never be run (its Slack thread cannot be written to): escalated with the
    reason, so recovery does not try it forever. False when it was already taken up."""
    row = schema.cases.c
    async with cases.engine.begin() as conn:
        ended = await conn.execute(
            update(schema.cases)
            .where(row.id == case_id, row.status == CaseStatus.QUEUED)
            .values(status=CaseStatus.ESCALATED, escalation_reason=reason, updated_at=func.now())
            .returning(row.id)
        )
        if ended.first() is None:
            return False
        details = {"from": CaseStatus.QUEUED, "reason": reason}
        await activity.record(conn, "system", "billsleuth", "case.escalated", "case", case_id, details)
    return True
