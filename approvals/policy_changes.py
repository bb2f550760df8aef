"""The `policy_changes` table: one row per proposal to change the stored policy, and its status.

A change is pending until a second person decides it, or in force at once (applied); it may end rejected or
superseded. This module reads and writes those rows and nothing else: what a proposal or a decision means
for the policy in force is approvals/policy_store.py's; announcing changes in Slack is the bot's
(bot/flows/policy.py), which claims each change whose status Slack has not heard of yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals.models import Refused, Rule
from engine import schema as t

# A policy change's status.
PENDING = "pending"
APPROVED = "approved"  # a second person consented in Slack; in force
REJECTED = "rejected"
APPLIED = "applied"  # in force at once: it narrows power, or nobody else could consent
SUPERSEDED = "superseded"  # the policy moved on under it: never applied
IN_FORCE = (APPROVED, APPLIED)


class PolicyChangeRefused(Refused):
    """A decision on a pending policy change was refused; only the refusal is recorded."""


@dataclass(frozen=True)
class PolicyChange:
    """One proposal to change the stored policy (a row of `policy_changes`)."""

    id: int
    proposed_by: str  # a Slack user id (`budget raise --as`), `cli:<os account>`, or `bot`
    source: str  # the door: `cli:<os account>` or `bot start`
    why: str
    old: dict[str, str]  # the variables it changes, as stored when it was proposed
    new: dict[str, str]
    status: str
    proposed_at: datetime | None = None
    month: str | None = None  # a `budget raise`: the month whose model-budget limit it sets
    decided_by: str | None = None

    @property
    def in_force(self) -> bool:
        return self.status in IN_FORCE

    def as_json(self) -> dict[str, Any]:
        """As `policy show --json` lists a pending change (DESIGN §3), plus its status and month."""
        return {
            "id": self.id,
            "proposed_by": self.proposed_by,
            "proposed_at": self.proposed_at.isoformat() if self.proposed_at else None,
            "status": self.status,
            "month": self.month,
            "changes": [
                {"variable": name, "stored": self.old.get(name, ""), "proposed": value}
                for name, value in self.new.items()
            ],
        }


# ---- reading ----


async def pending_changes(engine: AsyncEngine) -> list[PolicyChange]:
    """The changes waiting for a second person, oldest first."""
    c = t.policy_changes.c
    async with engine.connect() as conn:
        rows = await conn.execute(select(t.policy_changes).where(c.status == PENDING).order_by(c.id))
        return [change_of(row) for row in rows]


async def get_change(engine: AsyncEngine, change_id: int) -> PolicyChange:
    async with engine.connect() as conn:
        return await change_in(conn, change_id, lock=False)


async def change_in(conn: AsyncConnection, change_id: int, *, lock: bool) -> PolicyChange:
    query = select(t.policy_changes).where(t.policy_changes.c.id == change_id)
    row = (await conn.execute(query.with_for_update() if lock else query)).first()
    if row is None:
        raise PolicyChangeRefused(Rule.UNKNOWN_POLICY_CHANGE, f"there is no policy change #{change_id}")
    return change_of(row)


def change_of(row: Any) -> PolicyChange:
    """A `policy_changes` row as a PolicyChange."""
    return PolicyChange(
        id=row.id,
        proposed_by=row.proposed_by,
        source=row.source,
        why=row.why,
        old=dict(row.old_values),
        new=dict(row.new_values),
        status=row.status,
        proposed_at=row.proposed_at,
        month=row.month,
        decided_by=row.decided_by,
    )


# ---- announcing (the bot) ----


async def claim_unannounced(conn: AsyncConnection) -> PolicyChange | None:
    """The oldest change whose status Slack has not heard of, locked for this transaction (another bot
    process skips it); `mark_announced` in the same transaction once told."""
    c = t.policy_changes.c
    query = (
        select(t.policy_changes)
        .where(c.announced.is_distinct_from(c.status))
        .order_by(c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    row = (await conn.execute(query)).first()
    return None if row is None else change_of(row)


async def mark_announced(conn: AsyncConnection, change: PolicyChange) -> None:
    c = t.policy_changes.c
    await conn.execute(update(t.policy_changes).where(c.id == change.id).values(announced=change.status))


# ---- writing ----


async def insert_change(
    conn: AsyncConnection,
    proposer: str,
    source: str,
    why: str,
    old: dict[str, str],
    new: dict[str, str],
    status: str,
    month: str | None = None,
    *,
    announced: bool = False,
) -> PolicyChange:
    """A new row; `announced`: Slack need not hear of it (the bootstrap policy, which changes nothing)."""
    row = (
        await conn.execute(
            pg_insert(t.policy_changes)
            .values(
                proposed_by=proposer,
                source=source,
                why=why,
                month=month,
                old_values=old,
                new_values=new,
                status=status,
                announced=status if announced else None,
            )
            .returning(t.policy_changes)
        )
    ).one()
    return change_of(row)


async def pending_twin(
    conn: AsyncConnection, old: dict[str, str], new: dict[str, str], month: str | None
) -> PolicyChange | None:
    """The pending change with these very values, if any: proposed again (a bot restarting), it is not a
    second row."""
    c = t.policy_changes.c
    rows = await conn.execute(
        select(t.policy_changes).where(c.status == PENDING, c.month.is_not_distinct_from(month))
    )
    return next((change_of(r) for r in rows if dict(r.old_values) == old and dict(r.new_values) == new), None)


async def mark_change(
    conn: AsyncConnection, change: PolicyChange, status: str, decided_by: str | None, source: str | None
) -> PolicyChange:
    """Set a change's status and who decided it, from which door (both None: the policy moved on)."""
    c = t.policy_changes.c
    row = (
        await conn.execute(
            update(t.policy_changes)
            .where(c.id == change.id)
            .values(status=status, decided_by=decided_by, decision_source=source, decided_at=text("now()"))
            .returning(t.policy_changes)
        )
    ).one()
    return change_of(row)
