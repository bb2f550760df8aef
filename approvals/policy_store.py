"""The policy in force, stored in the database: one per database, whatever each process's environment says.

Approvers, support staff, the two-person threshold, the daily limit, the approval TTL, the hold limit and
whether the CLI may decide live in the `policy` table, one row per setting, named by its environment
variable and holding its canonical text form (`ApprovalSettings.as_env`), so reading it back is
`ApprovalSettings.from_env` over the rows: one typed place, one parser.

Who writes it: the bot when it starts (its environment is the policy), `billsleuth policy apply` on
purpose, and — when the database holds no policy yet — the first command that needs one. Every write that
changes something appends one `policy.changed` activity row with the old and new values of what changed.
Everyone else only reads it, and hears (as `differences`) where their own environment disagrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.config import POLICY_VARIABLES, ApprovalSettings, SettingsError
from engine import schema as t

POLICY_CHANGED = "policy.changed"
_LOCK = "billsleuth:policy"  # one writer at a time: two bots starting together do not interleave

# Why a policy was written, as its activity row says.
BOT_START = "bot start"
APPLY = "policy apply"
FIRST_USE = "first use"


@dataclass(frozen=True)
class Difference:
    """One setting where a process's own environment disagrees with the stored policy."""

    variable: str
    stored: str
    own: str

    def describe(self) -> str:
        return (
            f"{self.variable} is {self.stored or '(empty)'!s} in the database, {self.own or '(empty)'} here"
        )


@dataclass(frozen=True)
class PolicyInForce:
    settings: ApprovalSettings  # what this process enforces: the stored policy
    differences: tuple[Difference, ...] = ()  # where this process's own environment disagrees with it


def differences(stored: ApprovalSettings, own: ApprovalSettings) -> tuple[Difference, ...]:
    theirs, ours = stored.as_env(), own.as_env()
    return tuple(
        Difference(name, theirs[name], ours[name]) for name in POLICY_VARIABLES if theirs[name] != ours[name]
    )


async def stored_values_in(conn: AsyncConnection) -> dict[str, str]:
    rows = await conn.execute(select(t.policy.c.name, t.policy.c.value))
    return {row.name: row.value for row in rows}


def settings_from(values: Mapping[str, str]) -> ApprovalSettings:
    """The stored rows as settings; a value someone broke by hand is named as the stored policy's."""
    try:
        return ApprovalSettings.from_env(values)
    except SettingsError as error:
        raise SettingsError(
            f"the stored policy is unusable: {error}; run `billsleuth policy apply`"
        ) from None


async def read_policy(engine: AsyncEngine) -> ApprovalSettings | None:
    """The stored policy, or None when the database holds none yet."""
    async with engine.connect() as conn:
        values = await stored_values_in(conn)
    return settings_from(values) if values else None


async def store_policy(
    engine: AsyncEngine, settings: ApprovalSettings, *, actor_type: str, actor_id: str, why: str
) -> ApprovalSettings:
    """Make `settings` the policy in force; one `policy.changed` row when anything changed. Returns it."""
    async with engine.begin() as conn:
        await _lock(conn)
        await _write(conn, await stored_values_in(conn), settings, actor_type, actor_id, why)
    return settings


async def policy_in_force(
    engine: AsyncEngine, own: ApprovalSettings, *, actor_type: str, actor_id: str
) -> PolicyInForce:
    """What a process that does not write the policy (a CLI command) enforces: the stored policy, or —
    when the database holds none yet — its own, stored now. `differences` say where `own` disagrees."""
    async with engine.begin() as conn:
        values = await stored_values_in(conn)
        if not values:
            await _lock(conn)
            values = await stored_values_in(conn)  # another process may have stored one meanwhile
            if not values:
                await _write(conn, values, own, actor_type, actor_id, FIRST_USE)
                return PolicyInForce(own)
    stored = settings_from(values)
    return PolicyInForce(stored, differences(stored, own))


async def _lock(conn: AsyncConnection) -> None:
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": _LOCK})


async def _write(
    conn: AsyncConnection,
    stored: Mapping[str, str],
    settings: ApprovalSettings,
    actor_type: str,
    actor_id: str,
    why: str,
) -> None:
    new = settings.as_env()
    changed = [name for name in POLICY_VARIABLES if stored.get(name) != new[name]]
    if not changed:
        return
    upsert = pg_insert(t.policy).values([{"name": name, "value": new[name]} for name in changed])
    await conn.execute(
        upsert.on_conflict_do_update(
            index_elements=[t.policy.c.name],
            set_={"value": upsert.excluded.value, "updated_at": text("now()")},
        )
    )
    await activity.record(
        conn,
        actor_type,
        actor_id,
        POLICY_CHANGED,
        "policy",
        "policy",
        {
            "why": why,
            "old": {name: stored.get(name) for name in changed},
            "new": {name: new[name] for name in changed},
        },
    )
