"""A case's other findings as its card shows them: from the case (verified by its investigation), each
with the linked case opened for it, if any, or the open credit note another case already has on it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import queries
from bot import store
from bot.cards.models import OtherFindingView


async def other_finding_views(
    conn: AsyncConnection, case_id: str, others: Iterable[Mapping[str, Any]]
) -> list[OtherFindingView]:
    others = list(others)
    linked = await store.linked_cases_in(conn, case_id)
    crediting = await queries.open_notes_on(conn, [str(o["invoice_id"]) for o in others])
    return [
        OtherFindingView(
            invoice_id=str(o["invoice_id"]),
            root_cause=str(o["root_cause"]),
            overcharge=Decimal(str(o["overcharge"])),
            linked_case_id=linked.get(str(o["invoice_id"])),
            credited_by=note.id if (note := crediting.get(str(o["invoice_id"]))) else None,
        )
        for o in others
    ]


async def other_finding_views_of(
    engine: AsyncEngine, case_id: str, others: Iterable[Mapping[str, Any]]
) -> list[OtherFindingView]:
    async with engine.connect() as conn:
        return await other_finding_views(conn, case_id, others)
