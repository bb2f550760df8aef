"""The append-only activity log: every decision and state change, and every refusal.

`record` writes inside the caller's transaction, so a change and its log row commit or vanish together.
`record_refusal` writes in a transaction of its own, after the refused change has rolled back: the
refusal stays on record although nothing else happened.

The log is a SHA-256 hash chain the database keeps (migration 0003): a BEFORE INSERT trigger gives each row
its id, `prev_hash` and `hash`, and UPDATE, DELETE and TRUNCATE are refused. `verify_chain` recomputes the
chain, so an edit made around the triggers (a superuser disabling them) is found; `export_rows` reads the
log for auditors.

Locks: the first activity row of a transaction locks the chain's head row until commit, so every append
waits for the previous appender's commit. Write activity rows after the transaction's other locks (note,
invoice, budget): a transaction that held the head while waiting for one of those could deadlock with a
holder of that lock waiting for the head.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from sqlalchemy import func, insert, select, text
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


# Built once (every step of a case appends): the values come as parameters.
_APPEND = insert(t.activity_log)


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
    row = {
        "actor_type": actor_type,
        "actor_id": actor_id,
        "action": action,
        "entity_type": entity_type,
        "entity_id": entity_id,
        "details": _jsonable(dict(details or {})),
    }
    await conn.execute(_APPEND, row)


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


# ---- the hash chain ----

GENESIS = "0" * 64  # the prev_hash of the chain's first row
EXPORT_COLUMNS = (
    "id",
    "at",
    "actor_type",
    "actor_id",
    "action",
    "entity_type",
    "entity_id",
    "details",
    "prev_hash",
    "hash",
)

# The first row whose link to the previous row, or whose own hash, does not hold.
_FIRST_BROKEN = text(
    """
    WITH chain AS (
        SELECT id, prev_hash, hash,
               lag(id) OVER (ORDER BY id) AS previous_id,
               coalesce(lag(hash) OVER (ORDER BY id), :genesis) AS expected_prev_hash,
               activity_log_row_hash(
                   prev_hash, id, at, actor_type, actor_id, action, entity_type, entity_id, details
               ) AS recomputed
        FROM activity_log
    )
    SELECT id, previous_id, prev_hash = expected_prev_hash AS linked
    FROM chain
    WHERE prev_hash IS DISTINCT FROM expected_prev_hash OR hash IS DISTINCT FROM recomputed
    ORDER BY id
    LIMIT 1
    """
)


@dataclass(frozen=True)
class ChainReport:
    """What `activity verify` found: how many rows, and the first broken one (None: intact)."""

    rows: int
    broken_id: int | None = None
    problem: str = ""

    @property
    def intact(self) -> bool:
        return self.broken_id is None and not self.problem

    def line(self) -> str:
        if self.intact:
            return f"{self.rows} rows, chain intact"
        where = f"row {self.broken_id}" if self.broken_id is not None else "the chain head"
        return f"{self.rows} rows, chain broken at {where}: {self.problem}"


async def verify_chain(engine: AsyncEngine) -> ChainReport:
    """Recompute every row's hash and link, and check the head, in one consistent snapshot."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            return await verify_in(conn)


async def verify_in(conn: AsyncConnection) -> ChainReport:
    """The chain check inside the caller's transaction (one snapshot: REPEATABLE READ)."""
    log = t.activity_log.c
    rows, last_id, last_hash = (
        await conn.execute(
            select(
                func.count(),
                func.max(log.id),
                select(log.hash).order_by(log.id.desc()).limit(1).scalar_subquery(),
            ).select_from(t.activity_log)
        )
    ).one()
    broken = (await conn.execute(_FIRST_BROKEN, {"genesis": GENESIS})).first()
    if broken is not None:
        return ChainReport(rows, broken.id, _link_problem(broken))
    head = (await conn.execute(select(t.activity_log_head))).first()
    if head is None:
        return ChainReport(rows, None, "the chain head row (activity_log_head) is missing")
    if (head.last_id, head.last_hash) != (last_id, last_hash or GENESIS):
        return ChainReport(
            rows,
            head.last_id,
            f"the chain head records row {head.last_id} as the last, but the last row is {last_id} "
            "(rows were removed from the end, or the head was edited)",
        )
    return ChainReport(rows)


def _link_problem(broken: Any) -> str:
    if not broken.linked:
        if broken.previous_id is None:
            return "its prev_hash is not the chain's start (rows before it were removed)"
        return (
            f"its prev_hash is not row {broken.previous_id}'s hash "
            "(a row between them was removed or added, or that row was edited)"
        )
    return "its content does not match its hash (the row was edited)"


def since_instant(since: date | None) -> datetime | None:
    """--since YYYY-MM-DD means from that day's start, UTC."""
    return None if since is None else datetime.combine(since, time.min, tzinfo=UTC)


async def export_rows(engine: AsyncEngine, since: date | None = None) -> AsyncIterator[dict[str, Any]]:
    """The log in chain order (optionally from a UTC day on), each row a dict of EXPORT_COLUMNS."""
    log = t.activity_log.c
    query = select(*(log[name] for name in EXPORT_COLUMNS)).order_by(log.id)
    start = since_instant(since)
    if start is not None:
        query = query.where(log.at >= start)
    async with engine.connect() as conn:
        result = await conn.stream(query)
        async for row in result:
            yield {**row._mapping, "at": row.at.astimezone(UTC)}  # the same instant whatever the TimeZone
