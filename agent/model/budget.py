"""The monthly model budget: checked before a model run, converged after each model call, a hard stop that
survives restarts, and an approver's "raise and resume" (seed 003 §6–§11).

- Before a run (`admit`): under the month's row lock, a run starts only while the model investigator is
  not paused and spend plus what runs under way have reserved is below the limit; it then reserves its
  worst case, so concurrent cases cannot all see "a little left". A run that cannot start is investigated
  by the offline auditor instead, and its card says why.
- Worst case of a run: max_steps × (max_tokens × output price + reserve_input_tokens × input price), per
  million tokens. A reply is bounded by max_tokens; a prompt is not, so each call's prompt is assumed to be
  at most `reserve_input_tokens` (Configuration, 16 000 by default) — the converge below corrects it.
- After each call (`ModelRun.record`): the response's cost event is appended (once per response id), the
  run's reservation becomes the worst case of the calls it may still make, and spend is compared with the
  limit: crossing 80% or 100% is an incident (once per month, threshold and limit: a unique key) with an
  activity row; at 100% the month is paused (`model_budget_months.paused_at`). The run that crossed stops
  there (no further model call) and every other run stops before its next call.
- At the end of a run, success, failure or timeout alike, its reservation is released (`release`).
- `propose_raise`: an approver proposes this month's limit, a policy change like any other (a higher one
  waits for a second approver in Slack); once in force it is recorded (who, old, new) and the pause lifts
  when spend is below the new limit. The next month starts again from BILLSLEUTH_MODEL_BUDGET.
- The budget and the prices are the stored policy's (`SpendSettings.of_policy`), and a paused month is
  paused for every process, whatever budget its own environment names.

Light (no openai): the graph asks `admit` before it imports the model client.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.model.costs import BUDGET, MILLION, SpendSettings, Usage, usd
from approvals import activity, policy_changes, policy_store
from approvals.models import Rule
from approvals.outbox import OUTBOX_CHANNEL
from engine import schema

log = logging.getLogger(__name__)

WARNING_PERCENT = 80
STOP_PERCENT = 100
THRESHOLDS = (WARNING_PERCENT, STOP_PERCENT)
WARNED = "budget.warning"  # activity: spend crossed 80% of the month's limit
PAUSED = "budget.paused"  # activity: spend reached the limit; the model investigator is paused
RAISED = "budget.raised"  # activity: an approver set this month's limit
ENTITY = "model_budget"
# A reservation no call has touched for this long belongs to a process that died mid-run (a run ends within
# BILLSLEUTH_CASE_TIMEOUT, two minutes by default): it no longer holds the budget back.
ABANDONED_AFTER = timedelta(hours=1)


def month_of(at: datetime | None = None) -> str:
    """The calendar month (UTC) an instant falls in: "2026-12"."""
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m")


@dataclass(frozen=True)
class Standing:
    """`budget show`: the month, its limit (None: no budget), spend, what runs under way hold, the pause."""

    month: str
    limit: Decimal | None
    spent: Decimal
    reserved: Decimal
    paused: bool
    raised: bool = False  # the limit is this month's raise, not BILLSLEUTH_MODEL_BUDGET
    unpriced_calls: int = 0  # calls of models without a price: their cost is not in `spent`

    def as_json(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "limit": usd(self.limit),
            "limit_from": "raise" if self.raised else ("environment" if self.limit is not None else None),
            "spent": usd(self.spent),
            "reserved": usd(self.reserved),
            "paused": self.paused,
            "unpriced_calls": self.unpriced_calls,
        }


async def _month_row(conn: AsyncConnection, month: str, *, lock: bool) -> Any:
    """The month's row, created when missing; with `lock`, held until the transaction ends (every
    reservation, cost event and raise of the month takes it, so their checks cannot interleave)."""
    table = schema.model_budget_months
    if lock:
        await conn.execute(pg_insert(table).values(month=month).on_conflict_do_nothing())
        query = select(table).where(table.c.month == month).with_for_update()
        return (await conn.execute(query)).one()
    return (await conn.execute(select(table).where(table.c.month == month))).first()


def _limit(row: Any, settings: SpendSettings) -> Decimal | None:
    raised = row.limit_usd if row is not None else None
    return Decimal(raised) if raised is not None else settings.monthly_budget


async def _spent(conn: AsyncConnection, month: str) -> tuple[Decimal, int]:
    """The month's spend (priced calls) and how many calls had no price."""
    c = schema.cost_events.c
    year, number = (int(part) for part in month.split("-"))
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)
    query = select(func.coalesce(func.sum(c.cost), 0), func.count() - func.count(c.cost)).where(
        c.at >= start, c.at < end
    )
    spent, unpriced = (await conn.execute(query)).one()
    return Decimal(spent), int(unpriced)


async def _reserved(conn: AsyncConnection, month: str) -> Decimal:
    r = schema.model_reservations.c
    query = select(func.coalesce(func.sum(r.amount), 0)).where(
        r.month == month, r.at > func.now() - ABANDONED_AFTER
    )
    return Decimal((await conn.execute(query)).scalar_one())


async def standing(engine: AsyncEngine, settings: SpendSettings, month: str | None = None) -> Standing:
    month = month or month_of()
    async with engine.connect() as conn:
        row = await _month_row(conn, month, lock=False)
        spent, unpriced = await _spent(conn, month)
        reserved = await _reserved(conn, month)
    return Standing(
        month,
        _limit(row, settings),
        spent,
        reserved,
        paused=row is not None and row.paused_at is not None,
        raised=row is not None and row.limit_usd is not None,
        unpriced_calls=unpriced,
    )


# ---- a model run ----


def worst_case_per_call(settings: SpendSettings, model: str, max_tokens: int, input_tokens: int) -> Decimal:
    """The most one call may cost: a full reply at the output price, a prompt of `input_tokens` at the
    input price (0 for a model without a price: its calls cannot be held to a budget)."""
    price = settings.price_for(model)
    if price is None:
        return Decimal(0)
    return (max_tokens * price.output + input_tokens * price.input) / MILLION


@dataclass
class ModelRun:
    """One case's model run against the month's budget: its reservation, and its calls' cost events."""

    engine: AsyncEngine
    settings: SpendSettings
    case_id: str
    model: str
    endpoint: str
    per_call: Decimal  # the worst case of one call
    max_calls: int
    month: str
    reservation_id: int | None = None  # None: no budget this month (nothing reserved, nothing checked)
    refused: str | None = None  # why the run may not start (the offline auditor investigates instead)
    stopped: str | None = None  # why the run stopped part-way (the budget ran out)
    calls: int = 0
    _released: bool = field(default=False, repr=False)

    @property
    def held_to_a_budget(self) -> bool:
        return self.reservation_id is not None

    async def may_call(self) -> bool:
        """Whether the next model call may go out: not once the month is paused (by this run's last call
        or any other's). Without a budget there is nothing to check."""
        if self.stopped is not None:
            return False
        if not self.held_to_a_budget:
            return True
        async with self.engine.connect() as conn:
            row = await _month_row(conn, self.month, lock=False)
        if row is not None and row.paused_at is not None:
            self.stopped = spent_note(self.month, during_run=True)
            return False
        return True

    async def record(self, model: str | None, response_id: str | None, usage: Usage) -> None:
        """Append this call's cost event (once per response id) and converge the budget on it."""
        self.calls += 1
        event_model = model or self.model
        price = self.settings.price_for(event_model) or self.settings.price_for(self.model)
        cost = price.cost(usage.input_tokens, usage.output_tokens, usage.cached_tokens) if (
            price is not None and usage.known
        ) else None  # fmt: skip
        event = {
            "case_id": self.case_id,
            "model": event_model,
            "endpoint": self.endpoint,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "cost": cost,
            # A response without an id cannot be told apart from a replay: recorded under one of ours.
            "response_id": response_id or f"billsleuth-{uuid.uuid4()}",
        }
        async with self.engine.begin() as conn:
            limit: Decimal | None = None
            if self.held_to_a_budget:
                row = await _month_row(conn, self.month, lock=True)
                limit = _limit(row, self.settings)
            await conn.execute(
                pg_insert(schema.cost_events)
                .values(**event)
                .on_conflict_do_nothing(constraint="cost_events_response_once")
            )
            if not self.held_to_a_budget:
                return
            left = max(self.max_calls - self.calls, 0) * self.per_call
            r = schema.model_reservations.c
            await conn.execute(  # `at`: the run is alive (see ABANDONED_AFTER)
                update(schema.model_reservations)
                .where(r.id == self.reservation_id)
                .values(amount=left, at=func.now())
            )
            if limit is not None and await _converge(conn, self.month, limit, self.settings):
                self.stopped = spent_note(self.month, during_run=True)


async def admit(
    engine: AsyncEngine,
    settings: SpendSettings,
    *,
    case_id: str,
    model: str,
    endpoint: str,
    max_tokens: int,
    max_calls: int,
    reserve_input_tokens: int,
) -> ModelRun:
    """May this case's model run start? Reserve its worst case when it may (see the module docstring);
    `refused` says why when it may not."""
    month = month_of()
    per_call = worst_case_per_call(settings, model, max_tokens, reserve_input_tokens)
    run = ModelRun(engine, settings, case_id, model, endpoint, per_call, max_calls, month)
    async with engine.begin() as conn:
        row = await _month_row(conn, month, lock=False)
        if row is not None and row.paused_at is not None:  # paused is paused, whatever limit one believes
            run.refused = spent_note(month)
            return run
        if _limit(row, settings) is None:
            return run  # no budget this month
        row = await _month_row(conn, month, lock=True)
        limit = _limit(row, settings)
        assert limit is not None
        if row.paused_at is None:
            await _converge(conn, month, limit, settings)  # a limit lowered below spend pauses here
            row = await _month_row(conn, month, lock=True)
        if row.paused_at is not None:
            run.refused = spent_note(month)
            return run
        r = schema.model_reservations.c  # what dead processes left behind holds nothing back
        await conn.execute(delete(schema.model_reservations).where(r.at < func.now() - ABANDONED_AFTER))
        spent, _ = await _spent(conn, month)
        if spent + await _reserved(conn, month) >= limit:
            run.refused = f"what is left of the model budget for {month} is reserved by model runs under way"
            return run
        reserved = await conn.execute(
            insert(schema.model_reservations)
            .values(month=month, case_id=case_id, amount=per_call * max_calls)
            .returning(schema.model_reservations.c.id)
        )
        run.reservation_id = reserved.scalar_one()
    return run


async def release(run: ModelRun) -> None:
    """The run is over (whatever its end): what it still held is free for others."""
    if run.reservation_id is None or run._released:
        return
    run._released = True
    async with run.engine.begin() as conn:
        r = schema.model_reservations.c
        await conn.execute(delete(schema.model_reservations).where(r.id == run.reservation_id))


def spent_note(month: str, *, during_run: bool = False) -> str:
    if during_run:
        return f"the model budget for {month} ran out during the model's investigation"
    return f"the model budget for {month} is spent"


async def _converge(conn: AsyncConnection, month: str, limit: Decimal, settings: SpendSettings) -> bool:
    """Compare the month's spend with its limit (the month's row is locked): record each threshold crossed
    once, pause at 100%. True when the month is paused now."""
    spent, _ = await _spent(conn, month)
    crossed = [t for t in THRESHOLDS if spent * 100 >= limit * t]
    paused = STOP_PERCENT in crossed
    if paused:
        table = schema.model_budget_months
        await conn.execute(
            update(table)
            .where(table.c.month == month, table.c.paused_at.is_(None))
            .values(paused_at=func.now(), updated_at=func.now())
        )
    new = []
    for threshold in crossed:
        added = await conn.execute(
            pg_insert(schema.budget_incidents)
            .values(month=month, threshold=threshold, limit_usd=limit, spent=spent)
            .on_conflict_do_nothing(constraint="budget_incidents_once")
            .returning(schema.budget_incidents.c.id)
        )
        if added.first() is not None:
            new.append(threshold)
    for threshold in new:  # activity rows last: they lock the chain's head (approvals/activity.py)
        action = PAUSED if threshold == STOP_PERCENT else WARNED
        details = {"threshold": threshold, "limit": usd(limit), "spent": usd(spent)}
        await activity.record(conn, activity.SYSTEM, activity.BILLSLEUTH, action, ENTITY, month, details)
        log.warning(
            "model budget %s: %s%% of %s reached (spent %s)", month, threshold, usd(limit), usd(spent)
        )
    if new:
        await conn.execute(text("SELECT pg_notify(:channel, 'budget')"), {"channel": OUTBOX_CHANNEL})
    return paused


# ---- raise and resume ----


async def month_limit(engine: AsyncEngine, settings: SpendSettings) -> tuple[str, Decimal | None]:
    """This month and its limit now: its raise, else the policy's budget (None: no limit)."""
    month = month_of()
    async with engine.connect() as conn:
        return month, _limit(await _month_row(conn, month, lock=False), settings)


async def propose_raise(
    engine: AsyncEngine, settings: SpendSettings, amount: Decimal, *, by: str, source: str
) -> policy_changes.PolicyChange:
    """`budget raise`: propose this month's limit `amount` (the caller checked `by` is an approver). A
    higher limit is a pending policy change until another approver consents in Slack; a lower one, or one
    nobody else could consent to, applies at once (`apply_policy_change`)."""
    month, old = await month_limit(engine, settings)
    return await policy_store.propose_month_budget(
        engine,
        month,
        _limit_text(old),
        _limit_text(amount),
        proposer=by,
        source=source,
        on_apply=apply_policy_change,
    )


def _limit_text(limit: Decimal | None) -> str:
    return "" if limit is None else f"{limit.normalize():f}"


async def apply_policy_change(conn: AsyncConnection, change: policy_changes.PolicyChange) -> None:
    """policy_store's on_apply: a month's raise sets that month's limit (`budget.raised`, and the pause
    lifts when spend is below it); a new BILLSLEUTH_MODEL_BUDGET re-judges this month's pause."""
    stored = SpendSettings.of_policy(policy_store.settings_from(await policy_store.stored_values_in(conn)))
    if change.month is not None:
        await _apply_raise(conn, change, stored)
    elif BUDGET in change.new:
        await _rejudge_pause(conn, stored)


async def _apply_raise(
    conn: AsyncConnection, change: policy_changes.PolicyChange, settings: SpendSettings
) -> None:
    month = change.month or month_of()
    row = await _month_row(conn, month, lock=True)
    old = _limit(row, settings)
    if _limit_text(old) != change.old.get(BUDGET, ""):
        raise policy_changes.PolicyChangeRefused(
            Rule.POLICY_MOVED_ON, f"the model budget for {month} changed since #{change.id} was proposed"
        )
    amount = Decimal(change.new[BUDGET])
    spent, _ = await _spent(conn, month)
    was_paused = row.paused_at is not None
    still_paused = spent >= amount
    table = schema.model_budget_months
    await conn.execute(
        update(table)
        .where(table.c.month == month)
        .values(limit_usd=amount, paused_at=row.paused_at if still_paused else None, updated_at=func.now())
    )
    if still_paused and not was_paused:
        await _converge(conn, month, amount, settings)
    details = {
        "old": usd(old),
        "new": usd(amount),
        "spent": usd(spent),
        "resumed": was_paused and not still_paused,
        "source": change.source,
        "change_id": change.id,
    }
    by = change.decided_by or change.proposed_by
    await activity.record(conn, activity.USER, by, RAISED, ENTITY, month, details)


async def _rejudge_pause(conn: AsyncConnection, settings: SpendSettings) -> None:
    """The policy's budget changed: a month paused under the old one resumes once spend is below the new
    one (none: no limit). A month with its own raise keeps to that raise."""
    month = month_of()
    row = await _month_row(conn, month, lock=True)
    if row.limit_usd is not None or row.paused_at is None:
        return
    spent, _ = await _spent(conn, month)
    if settings.monthly_budget is None or spent < settings.monthly_budget:
        table = schema.model_budget_months
        await conn.execute(
            update(table).where(table.c.month == month).values(paused_at=None, updated_at=func.now())
        )


# ---- finance is told ----


@dataclass(frozen=True)
class Incident:
    id: int
    month: str
    threshold: int
    limit: Decimal
    spent: Decimal


async def claim_incident(conn: AsyncConnection) -> Incident | None:
    """The oldest incident finance has not been told of, locked for this transaction (another bot process
    skips it); mark it with `mark_notified` in the same transaction once told."""
    b = schema.budget_incidents.c
    row = (
        await conn.execute(
            select(schema.budget_incidents)
            .where(b.notified_at.is_(None))
            .order_by(b.id)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
    ).first()
    if row is None:
        return None
    return Incident(row.id, row.month, row.threshold, Decimal(row.limit_usd), Decimal(row.spent))


async def mark_notified(conn: AsyncConnection, incident_id: int) -> None:
    b = schema.budget_incidents.c
    await conn.execute(
        update(schema.budget_incidents).where(b.id == incident_id).values(notified_at=func.now())
    )
