"""Cancelling: the end for an approved note that will never be issued.

An approved note can fail to leave: the daily credit limit holds it, or issuing refuses it (the ledger
changed, the note no longer matches its approvals). Without an end it would count against its invoice
forever and block every later case on it. Any approver — one who voted for it too — may cancel it with a
reason; the sweep cancels a note the daily limit has held longer than BILLSLEUTH_HOLD_MAX_DAYS (the agent,
which knows what "held" means for a case, picks them).

Compare-and-set like every decision, under the note's row lock (issuing holds the same lock, so a note is
either issued or cancelled, never both): cancelling a cancelled note again is a no-op, cancelling a note in
any other status is a conflict. Refusals are recorded on their own in activity_log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.config import ApprovalSettings
from approvals.decisions import Ballot, check_identity, check_not_requester, record_refused
from approvals.models import ApprovalRefused, Decision, DecisionOutcome, NoteStatus, Rule
from approvals.policy import utc_now
from approvals.queries import note_row_in, votes_in
from engine import schema as t
from engine.logcontext import bind


async def cancel(
    engine: AsyncEngine,
    credit_note_id: str,
    *,
    approver: str,
    reason: str,
    requester: str | None,
    settings: ApprovalSettings,
    approver_is_bot: bool = False,
    source: str | None = None,
    now: datetime | None = None,
) -> DecisionOutcome:
    """One approver cancels an approved, never-issued note. `changed` is False when it was already
    cancelled. Raises ApprovalRefused (recorded; nothing else changes), UnknownCreditNote."""
    with bind(credit_note_id=credit_note_id):
        ballot = Ballot(
            credit_note_id,
            approver,
            Decision.CANCEL,
            (reason or "").strip(),
            requester,
            approver_is_bot,
            source,
        )
        try:
            async with engine.begin() as conn:
                note = await note_row_in(conn, credit_note_id, lock=True)
                check_identity(ballot, settings)
                await check_not_requester(conn, ballot, note.case_id)
                if not ballot.comment:
                    raise ApprovalRefused(Rule.REASON_REQUIRED, "a cancel needs a reason")
                return await _cancel_locked(
                    conn, note, ballot.actor_type, approver, ballot.comment, now or utc_now(), source
                )
        except ApprovalRefused as refusal:
            await record_refused(engine, ballot, refusal)
            raise


async def cancel_held_too_long(
    engine: AsyncEngine,
    note_ids: list[str],
    settings: ApprovalSettings,
    now: datetime | None = None,
    *,
    refused: bool = False,
) -> list[str]:
    """The sweep's part: cancel these notes, which the daily limit has held (or, `refused`, which were
    refused at issue and nobody cancelled) longer than the hold limit; the caller picks them. Each is
    re-checked under its lock: one issued meanwhile is left alone. Returns the ids cancelled."""
    now = now or utc_now()
    days = settings.hold_max_days
    reason = (
        f"refused at issue and not cancelled by anyone for more than {days} days"
        if refused
        else f"held by the daily credit limit for more than {days} days"
    )
    cancelled = []
    for note_id in note_ids:
        async with engine.begin() as conn:
            note = await note_row_in(conn, note_id, lock=True)
            if note.status != NoteStatus.APPROVED:
                continue  # issued (or cancelled) since it was picked
            await _cancel_locked(conn, note, activity.SYSTEM, activity.BILLSLEUTH, reason, now)
            cancelled.append(note_id)
    return cancelled


async def _cancel_locked(
    conn: AsyncConnection,
    note: Row[Any],
    actor_type: str,
    actor_id: str,
    reason: str,
    now: datetime,
    source: str | None = None,
) -> DecisionOutcome:
    """approved → cancelled on a note whose row lock the caller holds."""
    approvals = sum(v.decision == Decision.APPROVE for v in await votes_in(conn, note.id))
    if note.status == NoteStatus.CANCELLED:
        message = f"{note.id} is already cancelled; nothing changed"
        return DecisionOutcome(note.id, NoteStatus.CANCELLED, approvals, note.needed, False, message)
    if note.status != NoteStatus.APPROVED:
        raise ApprovalRefused(
            Rule.CONFLICT,
            f"{note.id} is {note.status}; only an approved note that was never issued can be cancelled"
            + (" (reject a draft instead)" if note.status == NoteStatus.DRAFT else ""),
        )
    await conn.execute(
        update(t.credit_notes)
        .where(t.credit_notes.c.id == note.id, t.credit_notes.c.status == NoteStatus.APPROVED)
        .values(status=NoteStatus.CANCELLED, cancelled_by=actor_id, cancel_reason=reason, cancelled_at=now)
    )
    await activity.record(
        conn,
        actor_type,
        actor_id,
        "credit_note.cancelled",
        "credit_note",
        note.id,
        {
            "reason": reason,
            "amount": note.amount,
            "invoice_id": note.invoice_id,
            "case_id": note.case_id,
            "source": source,
        },
    )
    message = f"{note.id} cancelled: {reason}"
    return DecisionOutcome(note.id, NoteStatus.CANCELLED, approvals, note.needed, True, message)
