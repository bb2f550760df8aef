"""Drafts nobody decided in time expire: an old approval request must not authorise money today.

Both functions are conditional UPDATEs (… WHERE status = 'draft' AND expires_at <= now), so a note
decided a moment earlier is left alone, and running them twice expires nothing twice.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.models import NoteStatus
from approvals.policy import utc_now
from engine import schema as t


async def expire_overdue(engine: AsyncEngine, now: datetime | None = None) -> list[str]:
    """Mark every overdue draft expired (with an activity row each); returns their ids, sorted."""
    async with engine.begin() as conn:
        return await _expire(conn, now or utc_now())


async def expire_if_overdue(engine: AsyncEngine, credit_note_id: str, now: datetime) -> bool:
    """Expire this one note if it is an overdue draft; commits on its own. True when it expired."""
    async with engine.begin() as conn:
        return bool(await _expire(conn, now, credit_note_id))


async def _expire(conn: AsyncConnection, now: datetime, credit_note_id: str | None = None) -> list[str]:
    notes = t.credit_notes.c
    query = (
        update(t.credit_notes)
        .where(notes.status == NoteStatus.DRAFT, notes.expires_at <= now)
        .values(status=NoteStatus.EXPIRED)
        .returning(notes.id, notes.expires_at)
    )
    if credit_note_id is not None:
        query = query.where(notes.id == credit_note_id)
    expired = sorted((await conn.execute(query)).all())
    for note_id, expires_at in expired:
        await activity.record(
            conn,
            activity.SYSTEM,
            activity.BILLSLEUTH,
            "credit_note.expired",
            "credit_note",
            note_id,
            {"expires_at": expires_at, "at": now},
        )
    return [note_id for note_id, _ in expired]
