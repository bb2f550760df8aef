"""The policy in force, stored in the database: one per database, whatever each process's environment says.

Approvers, support staff, the two-person threshold, the daily limit, the approval TTL, the hold limit,
whether the CLI may decide, and the model budget and prices live in the `policy` table, one row per
setting, named by its environment variable and holding its canonical text form (`ApprovalSettings.as_env`),
so reading it back is `ApprovalSettings.from_env` over the rows: one typed place, one parser.

Rules change only with consent (issue 25 item 4). A bot start, `billsleuth policy apply` or `budget raise`
*proposes* a change (`propose`): what narrows power applies at once; what widens it (approvals/
policy_direction.py) is a pending row in `policy_changes` until a current approver other than its proposer
approves it in Slack (`decide`). Bootstrap: the first policy of an empty database is stored as it is, and
while no current approver other than the proposer exists, every change applies at once. Each step is an
activity row (policy.proposed, policy.changed, policy.rejected, policy.superseded; refusals as
policy.refused naming their rule) and is announced in Slack by the bot (bot/flows/policy.py), woken here
by a NOTIFY on the outbox channel.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.config import MODEL_BUDGET, POLICY_VARIABLES, ApprovalSettings, SettingsError
from approvals.models import Rule
from approvals.outbox import OUTBOX_CHANNEL
from approvals.policy_changes import (
    APPLIED,
    APPROVED,
    PENDING,
    REJECTED,
    SUPERSEDED,
    PolicyChange,
    PolicyChangeRefused,
    change_in,
    change_of,
    insert_change,
    mark_change,
    pending_twin,
)
from approvals.policy_direction import split, widens
from engine import locks
from engine import schema as t

POLICY_CHANGED = "policy.changed"
POLICY_PROPOSED = "policy.proposed"
POLICY_REJECTED = "policy.rejected"
POLICY_SUPERSEDED = "policy.superseded"
POLICY_REFUSED = "policy.refused"

# Why a policy change was proposed, as its row and activity say.
BOT_START = "bot start"
APPLY = "policy apply"
FIRST_USE = "first use"
BUDGET_RAISE = "budget raise"


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


@dataclass(frozen=True)
class Proposal:
    """What a proposal came to: what applied at once, what waits, and the policy in force after it."""

    settings: ApprovalSettings
    applied: PolicyChange | None = None
    pending: PolicyChange | None = None
    differences: tuple[Difference, ...] = field(default=())  # what the proposer asked for but is not in force


# Called inside the transaction that puts a change in force (a model-budget change reaches the month's
# budget row this way: agent/model/budget.py). It may raise Refused (POLICY_MOVED_ON) to stop the change.
OnApply = Callable[[AsyncConnection, PolicyChange], Awaitable[None]]


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


async def policy_in_force(
    engine: AsyncEngine, own: ApprovalSettings, *, actor_type: str, actor_id: str
) -> PolicyInForce:
    """What a process that does not propose the policy (a CLI command) enforces: the stored policy, or —
    when the database holds none yet — its own, stored now. `differences` say where `own` disagrees."""
    async with engine.begin() as conn:
        values = await stored_values_in(conn)
        if not values:
            await _lock(conn)
            values = await stored_values_in(conn)  # another process may have stored one meanwhile
            if not values:
                await _first_policy(conn, own, actor_id, actor_id, FIRST_USE)
                return PolicyInForce(own)
    stored = settings_from(values)
    return PolicyInForce(stored, differences(stored, own))


# ---- proposing ----


async def propose(
    engine: AsyncEngine,
    proposed: ApprovalSettings,
    *,
    proposer: str,
    source: str,
    why: str,
    on_apply: OnApply | None,
) -> Proposal:
    """Propose `proposed` as the policy: narrowing parts apply at once, widening parts wait for consent
    (or apply at once while nobody but the proposer could give it). On an empty database it is stored as
    it is. The same pending change proposed again (a bot restarting) is not a second row."""
    async with engine.begin() as conn:
        await _lock(conn)
        values = await stored_values_in(conn)
        if not values:
            applied = await _first_policy(conn, proposed, proposer, source, why)
            return Proposal(proposed, applied=applied)
        stored = settings_from(values)
        narrowing, widening = split(stored, proposed)
        if widening and not _someone_else_can_consent(stored, proposer):
            narrowing, widening = narrowing + widening, []
        applied = pending = None
        if narrowing:
            old = {c.variable: c.stored for c in narrowing}
            new = {c.variable: c.proposed for c in narrowing}
            applied = await insert_change(conn, proposer, source, why, old, new, APPLIED)
            await _put_in_force(conn, applied, on_apply)
        if widening:
            old = {c.variable: c.stored for c in widening}
            new = {c.variable: c.proposed for c in widening}
            pending = await pending_twin(conn, old, new, None) or await _propose_pending(
                conn, proposer, source, why, old, new, None
            )
        in_force = settings_from(await stored_values_in(conn))
    return Proposal(in_force, applied, pending, differences(in_force, proposed))


async def propose_month_budget(
    engine: AsyncEngine,
    month: str,
    old_limit: str,
    new_limit: str,
    *,
    proposer: str,
    source: str,
    on_apply: OnApply,
) -> PolicyChange:
    """`budget raise`: this month's model-budget limit from `old_limit` to `new_limit` (texts; "" is
    none). A higher limit waits for a second approver; a lower one applies at once (`on_apply` sets it)."""
    old, new = {MODEL_BUDGET: old_limit}, {MODEL_BUDGET: new_limit}
    async with engine.begin() as conn:
        await _lock(conn)
        stored = settings_from(await stored_values_in(conn))
        before = stored.model_copy(update={"model_budget": _usd_or_none(old_limit)})
        after = stored.model_copy(update={"model_budget": _usd_or_none(new_limit)})
        if widens(MODEL_BUDGET, before, after) and _someone_else_can_consent(stored, proposer):
            twin = await pending_twin(conn, old, new, month)
            return twin or await _propose_pending(conn, proposer, source, BUDGET_RAISE, old, new, month)
        change = await insert_change(conn, proposer, source, BUDGET_RAISE, old, new, APPLIED, month)
        await _put_in_force(conn, change, on_apply)
    return change


def _usd_or_none(value: str) -> Decimal | None:
    return Decimal(value) if value else None


def _someone_else_can_consent(stored: ApprovalSettings, proposer: str) -> bool:
    """Bootstrap: with no current approver other than the proposer, nobody could consent."""
    return bool(stored.approvers - {proposer})


# ---- deciding (Slack) ----


async def decide(
    engine: AsyncEngine,
    change_id: int,
    *,
    approver: str,
    approve: bool,
    source: str,
    on_apply: OnApply | None,
    approver_is_bot: bool = False,
) -> PolicyChange:
    """A current approver other than the proposer approves (the change is put in force) or rejects a
    pending change. Refusals (PolicyChangeRefused, with its rule) record only themselves."""
    try:
        async with engine.begin() as conn:
            await _lock(conn)
            change = await change_in(conn, change_id, lock=True)
            stored = settings_from(await stored_values_in(conn))
            _check_decider(change, stored, approver, approver_is_bot)
            if not approve:
                return await _reject(conn, change, approver, source)
            if change.month is None and _moved(change, stored):
                raise PolicyChangeRefused(Rule.POLICY_MOVED_ON, _moved_on(change))
            decided = await mark_change(conn, change, APPROVED, approver, source)
            await _put_in_force(conn, decided, on_apply, details={"approved_by": approver})
            return decided
    except PolicyChangeRefused as refused:
        if refused.rule == Rule.POLICY_MOVED_ON:
            await _supersede_alone(engine, change_id)
        await activity.record_refusal(
            engine,
            activity.USER,
            approver,
            POLICY_REFUSED,
            "policy_change",
            str(change_id),
            rule=refused.rule,
            message=refused.message,
            details={"decision": "approve" if approve else "reject", "source": source},
        )
        raise


def _check_decider(change: PolicyChange, stored: ApprovalSettings, approver: str, is_bot: bool) -> None:
    if change.status != PENDING:
        raise PolicyChangeRefused(
            Rule.POLICY_CHANGE_DECIDED, f"policy change #{change.id} is already {change.status}"
        )
    if is_bot:
        raise PolicyChangeRefused(Rule.APPROVER_IS_BOT, "a bot cannot decide a policy change")
    if approver not in stored.approvers:
        raise PolicyChangeRefused(Rule.NOT_AN_APPROVER, f"{approver} is not a current approver")
    if approver == change.proposed_by:
        raise PolicyChangeRefused(
            Rule.PROPOSER_CANNOT_DECIDE,
            f"{approver} proposed policy change #{change.id}; another approver must decide it",
        )


def _moved_on(change: PolicyChange) -> str:
    return f"the policy changed since #{change.id} was proposed; propose it again"


async def _supersede_alone(engine: AsyncEngine, change_id: int) -> None:
    """A change found moved on is marked superseded (in its own transaction: the refusal rolled back)."""
    async with engine.begin() as conn:
        await _lock(conn)
        change = await change_in(conn, change_id, lock=True)
        if change.status == PENDING:
            await _supersede(conn, change)


async def _reject(conn: AsyncConnection, change: PolicyChange, approver: str, source: str) -> PolicyChange:
    decided = await mark_change(conn, change, REJECTED, approver, source)
    await activity.record(
        conn,
        activity.USER,
        approver,
        POLICY_REJECTED,
        "policy_change",
        str(change.id),
        {**_facts(change), "source": source},
    )
    await _notify(conn)
    return decided


# ---- writing ----


async def _lock(conn: AsyncConnection) -> None:
    await locks.xact_lock(conn, locks.POLICY)


async def _notify(conn: AsyncConnection) -> None:
    """Wake the bot's outbox on commit: the change is announced at once, not at the next poll."""
    await conn.execute(text("SELECT pg_notify(:channel, 'policy')"), {"channel": OUTBOX_CHANNEL})


async def _first_policy(
    conn: AsyncConnection, settings: ApprovalSettings, proposer: str, source: str, why: str
) -> PolicyChange:
    """Bootstrap: an empty database takes the first policy as it is. It is on record (its change row and
    `policy.changed`) but not announced in Slack: it changes nothing anyone relied on, and every later
    change is announced."""
    new = settings.as_env()
    change = await insert_change(
        conn, proposer, source, why, dict.fromkeys(new, ""), new, APPLIED, announced=True
    )
    await _put_in_force(conn, change, None, details={"first": True})
    return change


async def _propose_pending(
    conn: AsyncConnection,
    proposer: str,
    source: str,
    why: str,
    old: dict[str, str],
    new: dict[str, str],
    month: str | None,
) -> PolicyChange:
    change = await insert_change(conn, proposer, source, why, old, new, PENDING, month)
    await activity.record(
        conn,
        activity.USER if source.startswith("cli:") else activity.SYSTEM,
        proposer,
        POLICY_PROPOSED,
        "policy_change",
        str(change.id),
        {"change_id": change.id, "why": why, "old": old, "new": new, "month": month, "source": source},
    )
    await _notify(conn)
    return change


async def _put_in_force(
    conn: AsyncConnection,
    change: PolicyChange,
    on_apply: OnApply | None,
    *,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Write the change's values (a month's budget goes through `on_apply`), record `policy.changed`,
    supersede what it moved on under, and wake the bot to announce it."""
    first = bool((details or {}).get("first"))
    if change.month is None:
        await _write_values(conn, change.new)
    elif on_apply is None:
        raise ValueError("a month's model-budget change needs on_apply to reach the month's budget")
    if on_apply is not None:
        await on_apply(conn, change)
    await activity.record(
        conn,
        activity.USER if change.source.startswith("cli:") or change.decided_by else activity.SYSTEM,
        change.decided_by or change.proposed_by,
        POLICY_CHANGED,
        "policy",
        "policy",
        {
            "why": change.why,
            "change_id": change.id,
            "proposed_by": change.proposed_by,
            "month": change.month,
            # The first policy had nothing before it: null, not the empty text of an empty list.
            "old": {name: None if first else change.old.get(name) for name in change.new},
            "new": change.new,
            **(details or {}),
        },
    )
    await _supersede_moved_on(conn, change)
    await _notify(conn)


async def _write_values(conn: AsyncConnection, new: Mapping[str, str]) -> None:
    upsert = pg_insert(t.policy).values([{"name": name, "value": value} for name, value in new.items()])
    await conn.execute(
        upsert.on_conflict_do_update(
            index_elements=[t.policy.c.name],
            set_={"value": upsert.excluded.value, "updated_at": text("now()")},
        )
    )


async def _supersede_moved_on(conn: AsyncConnection, applied: PolicyChange) -> None:
    """Pending changes made on values that are no longer stored can never apply as their approver saw
    them: they end as superseded (and their cards say so)."""
    c = t.policy_changes.c
    rows = await conn.execute(select(t.policy_changes).where(c.status == PENDING, c.id != applied.id))
    stored = settings_from(await stored_values_in(conn))
    for row in rows.all():
        other = change_of(row)
        # a month's raise is moved on by another raise of that month; a policy change by its values
        moved = other.month == applied.month if other.month is not None else _moved(other, stored)
        if moved:
            await _supersede(conn, other)


def _moved(change: PolicyChange, stored: ApprovalSettings) -> bool:
    """The stored values a change would replace are no longer the ones it was proposed on (compared in
    their canonical form: a variable with no row yet reads as its default)."""
    current = stored.as_env()
    return any(current.get(name) != value for name, value in change.old.items())


async def _supersede(conn: AsyncConnection, change: PolicyChange) -> None:
    await mark_change(conn, change, SUPERSEDED, None, None)
    await activity.record(
        conn,
        activity.SYSTEM,
        activity.BILLSLEUTH,
        POLICY_SUPERSEDED,
        "policy_change",
        str(change.id),
        _facts(change),
    )
    await _notify(conn)


def _facts(change: PolicyChange) -> dict[str, Any]:
    return {"change_id": change.id, "old": change.old, "new": change.new, "month": change.month}
