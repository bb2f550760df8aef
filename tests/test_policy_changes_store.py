"""Pending policy changes in the store (approvals/policy_store.py), without Slack: bootstrap, consent by a
second person, refusals that name their rule and record only themselves, a change the policy moved on
under, and the model budget's pause re-judged once a new budget is in force."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.model import budget
from approvals import policy_changes, policy_store
from approvals.config import ApprovalSettings
from approvals.models import Rule
from engine import schema

ALICE, BOB, CAROL = "U0FIN0001", "U0FIN0002", "U0FIN0003"
DESK = "cli:finance-desk"


async def propose(db: AsyncEngine, settings: ApprovalSettings, proposer: str = DESK) -> Any:
    return await policy_store.propose(
        db,
        settings,
        proposer=proposer,
        source=DESK,
        why=policy_store.APPLY,
        on_apply=budget.apply_policy_change,
    )


async def actions(db: AsyncEngine) -> list[tuple[str, str, dict[str, Any]]]:
    log = schema.activity_log.c
    async with db.connect() as conn:
        rows = await conn.execute(select(log.action, log.actor_id, log.details).order_by(log.id))
        return [(r.action, r.actor_id, r.details) for r in rows if r.action.startswith("policy.")]


async def test_with_no_other_approver_a_widening_change_applies_at_once(db: AsyncEngine) -> None:
    first = await propose(db, ApprovalSettings(approvers=frozenset({ALICE})), proposer=ALICE)
    assert first.applied is not None and first.pending is None
    # The sole approver widening power: nobody else could consent, so it applies (and is announced).
    wider = await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB})), proposer=ALICE)
    assert wider.pending is None and wider.applied is not None
    assert wider.settings.approvers == {ALICE, BOB}
    async with db.connect() as conn:
        assert (
            await policy_changes.claim_unannounced(conn)
        ).id == wider.applied.id  # first policy: on record only


async def test_consent_comes_from_a_current_approver_other_than_the_proposer(db: AsyncEngine) -> None:
    await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB})))
    proposal = await propose(
        db, ApprovalSettings(approvers=frozenset({ALICE, BOB}), cli_decisions=True), ALICE
    )
    change = proposal.pending
    assert change is not None and not proposal.settings.cli_decisions

    async def refused(change_id: int, who: str, **extra: Any) -> str:
        with pytest.raises(policy_changes.PolicyChangeRefused) as caught:
            await policy_store.decide(
                db,
                change_id,
                approver=who,
                approve=True,
                source="slack:T0",
                on_apply=budget.apply_policy_change,
                **extra,
            )
        return str(caught.value.rule)

    assert await refused(change.id + 99, BOB) == Rule.UNKNOWN_POLICY_CHANGE
    assert await refused(change.id, CAROL) == Rule.NOT_AN_APPROVER
    assert await refused(change.id, ALICE) == Rule.PROPOSER_CANNOT_DECIDE
    assert await refused(change.id, BOB, approver_is_bot=True) == Rule.APPROVER_IS_BOT
    assert not (await policy_store.read_policy(db)).cli_decisions  # type: ignore[union-attr]
    decided = await policy_store.decide(
        db, change.id, approver=BOB, approve=True, source="slack:T0", on_apply=budget.apply_policy_change
    )
    assert decided.status == policy_store.APPROVED and decided.decided_by == BOB
    assert (await policy_store.read_policy(db)).cli_decisions  # type: ignore[union-attr]
    assert await refused(change.id, BOB) == Rule.POLICY_CHANGE_DECIDED
    rules = [d.get("rule") for a, _, d in await actions(db) if a == policy_store.POLICY_REFUSED]
    assert rules == ["unknown_policy_change", "not_an_approver", "proposer_cannot_decide", "approver_is_bot",
                     "policy_change_decided"]  # fmt: skip


async def test_a_change_the_policy_moved_on_under_is_refused_and_superseded(db: AsyncEngine) -> None:
    await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB})))
    change = (
        await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB}), hold_max_days=30))
    ).pending
    assert change is not None
    async with db.begin() as conn:  # someone with psql changes the stored value under it
        await conn.execute(text("UPDATE policy SET value = '9' WHERE name = 'BILLSLEUTH_HOLD_MAX_DAYS'"))
    with pytest.raises(policy_changes.PolicyChangeRefused) as caught:
        await policy_store.decide(
            db, change.id, approver=BOB, approve=True, source="slack:T0", on_apply=budget.apply_policy_change
        )
    assert caught.value.rule == Rule.POLICY_MOVED_ON
    assert (await policy_changes.get_change(db, change.id)).status == policy_changes.SUPERSEDED
    assert (await policy_store.read_policy(db)).hold_max_days == 9  # type: ignore[union-attr]
    assert await policy_changes.pending_changes(db) == []


async def test_a_new_budget_in_force_lifts_the_months_pause_only_below_it(db: AsyncEngine) -> None:
    month = budget.month_of()
    await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB}), model_budget=Decimal("1")))
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO cost_events (model, endpoint, input_tokens, output_tokens, cost, response_id) "
                "VALUES ('m', 'h', 1, 1, 2.5, 'spent'); "
            )
        )
        await conn.execute(
            text("INSERT INTO model_budget_months (month, paused_at) VALUES (:m, now())"), {"m": month}
        )
    higher = (
        await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB}), model_budget=Decimal("2")))
    ).pending
    assert higher is not None  # a higher budget waits
    await policy_store.decide(
        db, higher.id, approver=ALICE, approve=True, source="slack:T0", on_apply=budget.apply_policy_change
    )
    paused = await paused_months(db)
    assert paused == [month]  # 2.5 spent is still over 2
    enough = (
        await propose(db, ApprovalSettings(approvers=frozenset({ALICE, BOB}), model_budget=Decimal("10")))
    ).pending
    assert enough is not None
    await policy_store.decide(
        db, enough.id, approver=BOB, approve=True, source="slack:T0", on_apply=budget.apply_policy_change
    )
    assert await paused_months(db) == []


async def paused_months(db: AsyncEngine) -> list[str]:
    months = schema.model_budget_months.c
    async with db.connect() as conn:
        rows = await conn.execute(select(months.month).where(months.paused_at.is_not(None)))
        return [r.month for r in rows]
