"""Recovery: run the cases a stop left queued or investigating (from their last checkpoint, or from the top),
deliver decisions not yet applied, and prune the checkpoints of cases long finished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from agent.cases.record import case_row, show_case, sync_case
from agent.cases.rounds import next_round, pending_answer
from agent.cases.runner import WAITING_NODE, CaseRunner, thread_config
from agent.cases.settling import settle_waiting_cases
from agent.graph.state import FINISHED, UNFINISHED, CaseState, CaseStatus
from engine import schema

FINISHED_CHECKPOINT_RETENTION = timedelta(days=30)


async def recover(cases: CaseRunner, *, idle_for: timedelta | None = None) -> list[str]:
    """Run the cases a stop left queued or investigating, and deliver decisions not yet applied.

    At start every such case is taken up (one a live process is running holds its lock and is left
    alone); the periodic sweep passes `idle_for`, so it takes up only cases nobody has touched for
    that long, never one a live process still has waiting for an investigation slot."""
    recovered = [
        case_id for case_id in await unfinished_cases(cases, idle_for) if await _finish(cases, case_id)
    ]
    recovered += await settle_waiting_cases(cases)
    return recovered


async def unfinished_cases(cases: CaseRunner, idle_for: timedelta | None = None) -> list[str]:
    """Cases queued or investigating (untouched for `idle_for`, when given), oldest first."""
    row = schema.cases.c
    query = select(row.id).where(row.status.in_(UNFINISHED))
    if idle_for is not None:
        query = query.where(row.updated_at < func.now() - idle_for)
    async with cases.engine.connect() as conn:
        return list((await conn.execute(query.order_by(row.created_at, row.id))).scalars())


async def _finish(cases: CaseRunner, case_id: str) -> bool:
    row = await case_row(cases.engine, case_id)
    if row.status not in UNFINISHED:
        return False  # finished since we looked
    state = await cases.state_of(case_id)
    return await _finish_interrupted(cases, row, state.values, tuple(state.next or ()))


async def retry_interrupted(cases: CaseRunner, case_id: str) -> dict[str, Any]:
    """Run a case again whose run failed part-way (say, on a connection a Postgres restart ended): from
    its last checkpoint, or from the top when it has none. Returns the case JSON. A case that was
    never recorded raises CaseNotFound: open it instead."""
    row = await case_row(cases.engine, case_id)
    state = await cases.state_of(case_id)
    await _finish_interrupted(cases, row, state.values, tuple(state.next or ()))
    return await show_case(cases.engine, case_id)


async def _finish_interrupted(
    cases: CaseRunner, row: Any, values: dict[str, Any], pending: tuple[str, ...]
) -> bool:
    """Run an interrupted investigation to its end, unless a live process is running it right now."""
    async with cases.case_lock(row.id, wait=False) as taken:
        if not taken:
            return False
        if row.status == CaseStatus.QUEUED and not await cases.take_up(row.id):
            return False  # taken up and finished since we looked
        if not values:  # stopped before the first checkpoint: start over
            initial: CaseState = {
                "case_id": row.id,
                "customer_id": row.customer_id,
                "question": row.question,
                "requester": row.requester,
            }
            await cases.investigate(row.id, initial)
        elif pending and WAITING_NODE not in pending:
            await cases.settings_in_force()
            await cases.graph.ainvoke(
                None, thread_config(row.id), context=cases.context(None), durability="sync"
            )
        elif values.get("status") == CaseStatus.REVISION_REQUESTED:  # the next round never finished
            answer = await pending_answer(cases, row.id)
            if answer is not None:
                await next_round(cases, row.id, *answer, None)
    await sync_case(cases, row.id)
    return True


async def prune_finished(
    cases: CaseRunner, older_than: timedelta = FINISHED_CHECKPOINT_RETENTION
) -> list[str]:
    """Delete the graph checkpoints of cases finished longer ago than `older_than`.

    The OSS Postgres saver keeps every checkpoint forever; a finished case never resumes, and its
    outcome stays in the cases row, the audit log and the activity log.
    """
    cutoff = datetime.now(UTC) - older_than
    async with cases.engine.connect() as conn:
        rows = await conn.execute(
            select(schema.cases.c.id).where(
                schema.cases.c.status.in_(FINISHED), schema.cases.c.updated_at < cutoff
            )
        )
        finished = list(rows.scalars())
    pruned = []
    for case_id in finished:
        if (await cases.state_of(case_id)).values:
            await cases.graph.adelete_thread(case_id)
            pruned.append(case_id)
    return pruned
