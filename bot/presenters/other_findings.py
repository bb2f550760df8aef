"""A case's other findings as its card shows them: from the case (verified by its investigation), each
with the linked case opened for it, if any."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot import store
from bot.cards.models import OtherFindingView


async def other_finding_views(
    conn: AsyncConnection, case_id: str, others: Iterable[Mapping[str, Any]]
) -> list[OtherFindingView]:
    linked = await store.linked_cases_in(conn, case_id)
    return [
        OtherFindingView(
            invoice_id=str(o["invoice_id"]),
            root_cause=str(o["root_cause"]),
            overcharge=Decimal(str(o["overcharge"])),
            linked_case_id=linked.get(str(o["invoice_id"])),
        )
        for o in others
    ]


async def other_finding_views_of(
    engine: AsyncEngine, case_id: str, others: Iterable[Mapping[str, Any]]
) -> list[OtherFindingView]:
    async with engine.connect() as conn:
        return await other_finding_views(conn, case_id, others)
