"""The append-only activity log: every decision and state change, and every refusal.

`record` writes inside the caller's transaction, so a change and its log row commit or vanish together.
`record_refusal` writes in a transaction of its own, after the refused change has rolled back: the
refusal stays on record although nothing else happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import schema as t
from engine.money import fmt

# Who acted. Approvers are Slack users; drafting, issuing and expiry are BillSleuth's own code.
USER = "user"
BOT = "bot"
AGENT = "agent"
SYSTEM = "system"
BILLSLEUTH = "billsleuth"


def _jsonable(value: Any) -> Any:
    """JSONB holds strings for money (never a float) and ISO text for instants."""
    if isinstance(value, Decimal):
        return fmt(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


async def record(
    conn: AsyncConnection,
    actor_type: str,
    actor_id: str,
    action: str,
    entity_type: str,
    entity_id: str,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Append one row to activity_log in the caller's transaction."""
    await conn.execute(
        insert(t.activity_log).values(
            actor_type=actor_type,
            actor_id=actor_id,
            action=action,
            entity_type=entity_type,
            entity_id=entity_id,
            details=_jsonable(dict(details or {})),
        )
    )


async def record_refusal(
    engine: AsyncEngine,
    actor_type: str,
    actor_id: str,
    action: str,
    entity_type: str,
    entity_id: str,
    *,
    rule: str,
    message: str,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Append a refusal in its own transaction (the refused change has already rolled back)."""
    async with engine.begin() as conn:
        await record(
            conn,
            actor_type,
            actor_id,
            action,
            entity_type,
            entity_id,
            {"rule": str(rule), "message": message, **(details or {})},
        )
