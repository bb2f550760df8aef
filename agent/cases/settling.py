"""Settling: a case still waiting for approval whose credit note was decided, expired or cancelled
elsewhere (a sweep, a vote that found it overdue, a process that stopped before resuming) is resumed with
its note's outcome; one whose approved note the daily limit held is resumed once today has room."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from agent.cases.deciding import resume
from agent.cases.record import case_row, sync_case
from agent.cases.runner import CaseRunner
from agent.graph.state import CaseStatus, Resume, refused_at_issue
from approvals import holds, queries
from approvals.config import ApprovalSettings
from approvals.models import CreditNoteView, NoteStatus
from engine import schema
from engine.db import reading

log = logging.getLogger(__name__)

# The cases still waiting for approval whose latest note is no longer a draft, oldest first: the only ones
# settling can move. One statement, however many cases wait on an undecided draft (nearly all of them).
_WAITING_ON_A_DECIDED_NOTE = (
    select(schema.cases.c.id)
    .where(
        schema.cases.c.status == CaseStatus.AWAITING_APPROVAL,
        # no note at all: NULL, left out
        queries.latest_note_of_case(schema.credit_notes.c.status) != NoteStatus.DRAFT,
    )
    .order_by(schema.cases.c.created_at, schema.cases.c.id)
)


async def settle_waiting_cases(cases: CaseRunner, *, release_held: bool = True) -> list[str]:
    """Resume every case still waiting whose credit note was decided or expired meanwhile (by a sweep,
    by a vote that found it overdue, or by a process that stopped before resuming), and — with
    `release_held` — those whose approved note the daily credit limit held back and now has room for.
    Oldest first, so a held note is not overtaken by newer ones when the day's room is scarce.

    The stored policy is read first: another process may have lowered the daily limit since this one
    last looked, and a held note must leave (or not) by the limit in force, not a remembered one."""
    await cases.settings_in_force()
    async with reading(cases.engine) as conn:
        waiting = list((await conn.execute(_WAITING_ON_A_DECIDED_NOTE)).scalars())
    settled = []
    for case_id in waiting:
        try:  # one broken case must not keep the others waiting
            if await _settle(cases, case_id, release_held):
                settled.append(case_id)
        except Exception:
            log.exception("could not settle waiting case %s", case_id)
    return settled


async def _settle(cases: CaseRunner, case_id: str, release_held: bool) -> bool:
    note = await queries.credit_note_for_case(cases.engine, case_id)
    if note is None or note.status == NoteStatus.DRAFT:
        return False
    if note.status == NoteStatus.APPROVED and (not release_held or await _held(cases, note)):
        return False  # held: without room today, resuming would only record the same hard stop again
    return await resume(cases, case_id, Resume.by_system(note.status)) or await _catch_up(cases, case_id)


async def _held(cases: CaseRunner, note: CreditNoteView) -> bool:
    """Whether the daily limit holds a waiting case's approved note (approvals.holds)."""
    async with reading(cases.engine) as conn:
        return await holds.held_by_daily_limit(conn, note, case_waits=True, settings=cases.approval_settings)


async def _catch_up(cases: CaseRunner, case_id: str) -> bool:
    """A stop between the graph's last checkpoint and the cases row leaves the row behind (say, still
    waiting for approval with its note issued): copy the graph's end into it. True when it did."""
    async with cases.case_lock(case_id):
        state = await cases.state_of(case_id)
        ended = state.values.get("status")
        if state.next or ended in (None, CaseStatus.AWAITING_APPROVAL):
            return False
        if (await case_row(cases.engine, case_id)).status == ended:
            return False
        await sync_case(cases, case_id)
    return True


async def held_too_long(
    cases: CaseRunner, settings: ApprovalSettings, now: datetime | None = None
) -> tuple[list[str], dict[str, str]]:
    """Approved notes never issued for longer than the hold limit, counted from their approval (the
    moment they could first have been issued), oldest first: those the daily limit holds now
    (approvals.holds; `now` moves only the hold clock: today's room is today's, as when releasing), and
    those refused at issue that nobody cancelled (note id → its case)."""
    cutoff = (now or datetime.now(UTC)) - timedelta(days=settings.hold_max_days)
    notes, rows = schema.credit_notes.c, schema.cases.c
    async with cases.engine.connect() as conn:
        found = (
            await conn.execute(
                select(
                    notes.id,
                    notes.status,
                    notes.amount,
                    notes.currency,
                    notes.case_id,
                    rows.status.label("case_status"),
                )
                .join(schema.cases, rows.id == notes.case_id)
                .where(notes.status == NoteStatus.APPROVED, notes.decided_at <= cutoff)
                .order_by(notes.decided_at, notes.id)
            )
        ).all()
        held = [
            row.id
            for row in found
            if await holds.held_by_daily_limit(
                conn, row, case_waits=row.case_status == CaseStatus.AWAITING_APPROVAL, settings=settings
            )
        ]
    refused = {row.id: row.case_id for row in found if refused_at_issue(row.status, row.case_status)}
    return held, refused
