"""The findings digest's read model: the findings it lists, with their customers' names."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.auditor.sweep import SweepFinding, posted_in
from approvals import queries
from bot.cards.digest import DigestItem, DigestView
from engine import schema


async def digest_view(conn: AsyncConnection, findings: Sequence[SweepFinding], as_of: date) -> DigestView:
    """Read on the digest's own (claiming) connection: no second checkout while its rows are locked."""
    customers = schema.customers.c
    ids = sorted({f.customer_id for f in findings})
    rows = await conn.execute(select(customers.id, customers.name).where(customers.id.in_(ids)))
    names = {row.id: row.name for row in rows}
    crediting = await queries.open_notes_on(conn, [f.invoice_id for f in findings if f.case_id is None])
    items = tuple(
        DigestItem(
            f.invoice_id,
            f.overcharge,
            f.currency,
            f.customer_id,
            names.get(f.customer_id, ""),
            f.root_cause,
            f.case_id,
            note.id if (note := crediting.get(f.invoice_id)) else None,
        )
        for f in findings
    )
    return DigestView(as_of, items)


async def posted_digest_view(engine: AsyncEngine, channel: str, ts: str, as_of: date) -> DigestView | None:
    """The digest at (channel, ts) as it stands now (cases opened from it included); None: no digest."""
    async with engine.connect() as conn:
        findings = await posted_in(conn, channel, ts)
        return await digest_view(conn, findings, as_of) if findings else None
