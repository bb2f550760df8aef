"""Read access to credit notes and their votes, as views (never raw rows).

The `*_in` functions run inside a caller's connection (drafting and deciding use them inside their own
transactions); the public ones open a short connection on the engine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Row, ScalarSelect, bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals.models import (
    OPEN_NOTES,
    CreditNoteView,
    Decision,
    NoteStatus,
    OpenNote,
    UnknownCreditNote,
    Vote,
)
from engine import schema as t
from engine.db import reading

# The statements every card draw and every decision runs, built once: building one costs about as much
# CPU as running it (its compiled form is cached by SQLAlchemy either way).
_NOTE = select(t.credit_notes).where(t.credit_notes.c.id == bindparam("note_id"))
_NOTE_FOR_UPDATE = _NOTE.with_for_update()
_VOTE_ORDER = (t.approvals.c.decided_at, t.approvals.c.id)
_VOTES = (
    select(t.approvals).where(t.approvals.c.credit_note_id == bindparam("note_id")).order_by(*_VOTE_ORDER)
)
_VOTES_ON = (
    select(t.approvals)
    .where(t.approvals.c.credit_note_id.in_(bindparam("note_ids", expanding=True)))
    .order_by(*_VOTE_ORDER)
)
_NOTES_OF_CASE = (
    select(t.credit_notes)
    .where(t.credit_notes.c.case_id == bindparam("case_id"))
    .order_by(t.credit_notes.c.created_at, t.credit_notes.c.id)
)


def latest_note_of_case(column: ColumnElement[Any]) -> ScalarSelect[Any]:
    """`column` of the case's latest credit note (a changed amount drafts a second one: the latest is the
    one in force), correlated to the enclosing query's cases row; NULL for a case with no note."""
    notes = t.credit_notes.c
    return (
        select(column)
        .where(notes.case_id == t.cases.c.id)
        .order_by(notes.created_at.desc(), notes.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def _vote(row: Row[Any]) -> Vote:
    return Vote(row.approver, row.decision, row.comment, row.args_hash, row.decided_at, row.source)


def ballot(votes: Sequence[Vote]) -> tuple[tuple[str, ...], Vote | None]:
    """What a note's votes make of it: who approved, in vote order, and its reject vote, if any."""
    approvers = tuple(v.approver for v in votes if v.decision == Decision.APPROVE)
    return approvers, next((v for v in votes if v.decision == Decision.REJECT), None)


def to_view(note: Row[Any], votes: Sequence[Vote]) -> CreditNoteView:
    approvers, rejection = ballot(votes)
    return CreditNoteView(
        id=note.id,
        invoice_id=note.invoice_id,
        amount=note.amount,
        currency=note.currency,
        reason=note.reason,
        status=note.status,
        approvals=len(approvers),
        needed=note.needed,
        approvers=approvers,
        case_id=note.case_id,
        expires_at=note.expires_at,
        memo=note.memo,
        root_cause=note.root_cause,
        args_hash=note.args_hash,
        created_at=note.created_at,
        decided_at=note.decided_at,
        issued_at=note.issued_at,
        rejected_by=rejection.approver if rejection else None,
        reject_reason=rejection.comment if rejection else None,
        cancelled_by=note.cancelled_by,
        cancel_reason=note.cancel_reason,
        stripe_credit_note_id=note.stripe_credit_note_id,
        stripe_livemode=bool(note.stripe_livemode),
        stripe_error=note.stripe_error,
    )


async def note_row_in(conn: AsyncConnection, credit_note_id: str, *, lock: bool = False) -> Row[Any]:
    """The credit_notes row; with lock=True it is held FOR UPDATE until the transaction ends."""
    row = (await conn.execute(_NOTE_FOR_UPDATE if lock else _NOTE, {"note_id": credit_note_id})).first()
    if row is None:
        raise UnknownCreditNote(credit_note_id)
    return row


async def votes_in(conn: AsyncConnection, credit_note_id: str) -> list[Vote]:
    return [_vote(r) for r in await conn.execute(_VOTES, {"note_id": credit_note_id})]


async def view_in(conn: AsyncConnection, credit_note_id: str) -> CreditNoteView:
    note = await note_row_in(conn, credit_note_id)
    return to_view(note, await votes_in(conn, credit_note_id))


async def _views(conn: AsyncConnection, notes: Sequence[Row[Any]]) -> list[CreditNoteView]:
    """Views for many notes in two queries (not one per note)."""
    ids = [n.id for n in notes]
    by_note: dict[str, list[Vote]] = defaultdict(list)
    if ids:
        for row in await conn.execute(_VOTES_ON, {"note_ids": ids}):
            by_note[row.credit_note_id].append(_vote(row))
    return [to_view(n, by_note[n.id]) for n in notes]


async def get_credit_note(engine: AsyncEngine, credit_note_id: str) -> CreditNoteView:
    """The note with its votes. Unknown id → UnknownCreditNote (a LookupError)."""
    async with reading(engine) as conn:
        return await view_in(conn, credit_note_id)


async def approvals_of(engine: AsyncEngine, credit_note_id: str) -> list[Vote]:
    """Every vote on the note, oldest first. Unknown id → UnknownCreditNote (a LookupError)."""
    async with reading(engine) as conn:
        await note_row_in(conn, credit_note_id)
        return await votes_in(conn, credit_note_id)


async def list_pending(engine: AsyncEngine) -> list[CreditNoteView]:
    """Drafts waiting for a decision, oldest first (an overdue one is listed until expiry sweeps it)."""
    async with reading(engine) as conn:
        notes = (
            await conn.execute(
                select(t.credit_notes)
                .where(t.credit_notes.c.status == NoteStatus.DRAFT)
                .order_by(t.credit_notes.c.created_at, t.credit_notes.c.id)
            )
        ).all()
        return await _views(conn, notes)


async def credit_notes_for_case(engine: AsyncEngine, case_id: str) -> list[CreditNoteView]:
    """Every note drafted for the case, oldest first (a changed amount drafts a second one)."""
    async with reading(engine) as conn:
        return await credit_notes_for_case_in(conn, case_id)


async def credit_notes_for_case_in(conn: AsyncConnection, case_id: str) -> list[CreditNoteView]:
    notes = (await conn.execute(_NOTES_OF_CASE, {"case_id": case_id})).all()
    return await _views(conn, notes)


async def credit_note_for_case(engine: AsyncEngine, case_id: str) -> CreditNoteView | None:
    """The case's latest note, or None when it has none."""
    notes = await credit_notes_for_case(engine, case_id)
    return notes[-1] if notes else None


async def open_notes_on(conn: AsyncConnection, invoice_ids: Sequence[str]) -> dict[str, OpenNote]:
    """invoice id → the open (draft or approved) credit note on it, for the invoices that have one (at
    most one each: drafting refuses a second)."""
    if not invoice_ids:
        return {}
    notes = t.credit_notes.c
    rows = await conn.execute(
        select(notes.invoice_id, notes.id, notes.case_id, notes.status)
        .where(notes.invoice_id.in_(list(invoice_ids)), notes.status.in_(OPEN_NOTES))
        .order_by(notes.id)
    )
    return {row.invoice_id: OpenNote(row.id, row.case_id, row.status) for row in rows}
