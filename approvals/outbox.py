"""Changes approvals/ puts in the bot's outbox itself: a note's card that must be redrawn although no
trigger reports it (the note's status did not change: the ledger changed under it, or Stripe refused it)."""

from __future__ import annotations

from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engine import schema as t

OUTBOX_CHANNEL = "billsleuth_outbox"  # what the outbox triggers NOTIFY on, and the bot LISTENs to


async def card_changed(conn: AsyncConnection, credit_note_id: str, case_id: str, change: str) -> None:
    """A change for the bot to redraw the note's card; the bot hears it when `conn`'s transaction commits,
    as it hears the triggers' changes."""
    row = {"entity_type": "credit_note", "entity_id": credit_note_id, "case_id": case_id, "change": change}
    await conn.execute(insert(t.outbox).values(**row))
    await conn.execute(select(func.pg_notify(OUTBOX_CHANNEL, case_id)))
