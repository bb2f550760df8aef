"""Credit notes end to end on a real Postgres: drafting, the approval rules, issuing, budget, expiry.

Seed 000's test list, adapted to Postgres and Slack user IDs. Each test gets a fresh migrated database
(the `db` fixture) with a tiny ledger: one customer, one subscription, three paid invoices.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import (
    ApprovalRefused,
    ApprovalSettings,
    DraftRefused,
    IssueRefused,
    Refused,
    Rule,
    UnknownCreditNote,
    approvals_of,
    args_hash,
    cancel,
    credit_note_for_case,
    decide,
    draft_credit_note,
    expire_overdue,
    get_credit_note,
    issue,
    list_pending,
)
from approvals.models import NoCase, NoteMovedOn
from engine import schema as t
from engine.db import create_engine

ALICE, BOB, CAROL, DAVE, ERIN, FRANK = "U0ALICE", "U0BOB", "U0CAROL", "U0DAVE", "U0ERIN", "U0FRANK"
REQUESTER = "U0SUPPORT"  # opened the case; on the approvers list, yet may not decide their own case
BOT_USER = "U0BOTUSER"  # a bot's user id, on the list by mistake
SETTINGS = ApprovalSettings(
    approvers=frozenset({ALICE, BOB, CAROL, DAVE, ERIN, FRANK, REQUESTER, BOT_USER}),
    two_person_threshold=Decimal("300.00"),
    daily_credit_limit=Decimal("5000.00"),
    approval_ttl_hours=72,
)

# Invoices of the tiny ledger: id → (total, succeeded payments).
FULL = "INV-0001-01"  # 174.90 paid once: a whole-invoice credit uses all of it
BIG = "INV-0001-02"  # 500.00 paid once: credits at or above 300.00 need two approvers
TWICE = "INV-0001-03"  # 123.60 charged twice (247.20 paid): a partial credit leaves room for another
INVOICES = {
    FULL: ("174.90", ["174.90"]),
    BIG: ("500.00", ["500.00"]),
    TWICE: ("123.60", ["123.60", "123.60"]),
}


# ---------------------------------------------------------------- helpers


async def add_ledger(db: AsyncEngine) -> None:
    """One customer on a free monthly plan, yet billed for Pro: three issued invoices the billing rules say
    should have been 0.00, their succeeded (and a failed) payments. Every payment is owed back, so the
    ledger itself supports each credit these tests draft (drafting and issuing re-derive it)."""
    async with db.begin() as conn:
        await conn.execute(
            insert(t.customers).values(
                id="C-0001", name="Acme", country="US", currency="USD", tax_region="US"
            )
        )
        await conn.execute(
            insert(t.plans).values(id="pro", name="Pro", interval="month", unit_price=Decimal("174.90"))
        )
        await conn.execute(
            insert(t.plans).values(id="free", name="Free", interval="month", unit_price=Decimal("0.00"))
        )
        await conn.execute(
            insert(t.tax_rates).values(
                code="US-NONE", region="US", rate=Decimal("0"), valid_from=datetime(2020, 1, 1).date()
            )
        )
        await conn.execute(
            insert(t.subscriptions).values(
                id="SUB-0001",
                customer_id="C-0001",
                plan_id="free",
                quantity=1,
                status="active",
                start_date=datetime(2026, 1, 1).date(),
                current_period_start=datetime(2026, 3, 1).date(),
                current_period_end=datetime(2026, 4, 1).date(),
                billing_anchor_day=1,
            )
        )
        await conn.execute(
            insert(t.subscription_events).values(
                id="EVT-0001-create",
                subscription_id="SUB-0001",
                type="create",
                effective_at=datetime(2026, 1, 1, tzinfo=UTC),
                payload={"plan_id": "free", "quantity": 1},
            )
        )
        for month, (invoice_id, (amount, payments)) in enumerate(INVOICES.items(), start=1):
            start, end = datetime(2026, month, 1), datetime(2026, month + 1, 1)
            await conn.execute(
                insert(t.invoices).values(
                    id=invoice_id,
                    customer_id="C-0001",
                    subscription_id="SUB-0001",
                    period_start=start.date(),
                    period_end=end.date(),
                    issued_at=start.date(),
                    status="paid",
                    subtotal=Decimal(amount),
                    discount=Decimal("0.00"),
                    tax=Decimal("0.00"),
                    total=Decimal(amount),
                    currency="USD",
                )
            )
            for n, paid in enumerate(payments):
                await conn.execute(
                    insert(t.payments).values(
                        id=f"PAY-{invoice_id[4:]}" + ("-R" * n),
                        invoice_id=invoice_id,
                        amount=Decimal(paid),
                        status="succeeded",
                        attempted_at=start.replace(tzinfo=UTC),
                        gateway_ref=f"ch_{invoice_id}_{n}",
                    )
                )
        # A failed attempt moves no money and must not count as paid.
        await conn.execute(
            insert(t.payments).values(
                id="PAY-0001-01-F",
                invoice_id=FULL,
                amount=Decimal("174.90"),
                status="failed",
                attempted_at=datetime(2026, 1, 1, tzinfo=UTC),
                gateway_ref="ch_failed",
            )
        )


@pytest.fixture
async def ledger(db: AsyncEngine) -> AsyncEngine:
    await add_ledger(db)
    return db


async def draft(
    db: AsyncEngine,
    invoice_id: str = FULL,
    amount: str = "174.90",
    *,
    case_id: str = "case-1",
    root_cause: str = "cancel_not_respected",
    settings: ApprovalSettings = SETTINGS,
    now: datetime | None = None,
) -> str:
    note, _ = await draft_credit_note(
        db,
        case_id=case_id,
        invoice_id=invoice_id,
        amount=Decimal(amount),
        root_cause=root_cause,
        memo="billed after the cancellation took effect",
        settings=settings,
        now=now,
    )
    return note.id


async def approve(db: AsyncEngine, note_id: str, *approvers: str, **kwargs: Any) -> None:
    for approver in approvers:
        await decide(
            db,
            note_id,
            approver=approver,
            decision="approve",
            requester=REQUESTER,
            settings=SETTINGS,
            **kwargs,
        )


async def count(db: AsyncEngine, table: Any, *where: Any) -> int:
    async with db.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(table).where(*where))).scalar_one()


async def activity(db: AsyncEngine) -> list[Any]:
    """BillSleuth's own rows (the database's account of each change, actor_type database, is apart)."""
    log = t.activity_log.c
    query = select(t.activity_log).where(log.actor_type != "database").order_by(log.id)
    async with db.connect() as conn:
        return (await conn.execute(query)).all()


async def status_of(db: AsyncEngine, note_id: str) -> str:
    return (await get_credit_note(db, note_id)).status


async def snapshot(db: AsyncEngine) -> dict[str, list[tuple[Any, ...]]]:
    """Everything a refusal must leave untouched (activity_log is checked separately)."""
    tables = (t.credit_notes, t.credit_note_requests, t.approvals, t.invoices, t.payments)
    async with db.connect() as conn:
        return {
            table.name: [tuple(r) for r in await conn.execute(select(table).order_by(*table.primary_key))]
            for table in tables
        }


async def naive_draft(db: AsyncEngine, invoice_id: str, amount: Decimal) -> str:
    """Seed 000's "Day 123" dedup: return the invoice's draft if there is one, else check the cap and insert.

    It keys on the note's current status, not on the request's identity, which is the bug.
    """
    async with db.begin() as conn:
        existing = (
            await conn.execute(
                select(t.credit_notes.c.id).where(
                    t.credit_notes.c.invoice_id == invoice_id, t.credit_notes.c.status == "draft"
                )
            )
        ).scalar()
        if existing:
            return existing
        paid = (
            await conn.execute(
                text(
                    "SELECT coalesce(sum(amount), 0) FROM payments "
                    "WHERE invoice_id = :i AND status = 'succeeded'"
                ),
                {"i": invoice_id},
            )
        ).scalar_one()
        credited = (
            await conn.execute(
                text(
                    "SELECT coalesce(sum(amount), 0) FROM credit_notes "
                    "WHERE invoice_id = :i AND status IN ('approved', 'issued')"
                ),
                {"i": invoice_id},
            )
        ).scalar_one()
        if credited + amount > paid:
            raise ValueError("exceeds the paid total")
        note_id = f"CN-N{await count(db, t.credit_notes):03d}"
        await conn.execute(
            insert(t.credit_notes).values(
                id=note_id, invoice_id=invoice_id, amount=amount, reason="x", status="draft"
            )
        )
        return note_id


# ---------------------------------------------------------------- drafting and idempotency


async def test_naive_draft_dedup_is_not_enough_after_approval(ledger: AsyncEngine) -> None:
    # Partial credit (a duplicate charge): after approval the naive dedup silently drafts a second note.
    partial = await draft(ledger, TWICE, "123.60", root_cause="duplicate_charge")
    await approve(ledger, partial, ALICE)
    second = await naive_draft(ledger, TWICE, Decimal("123.60"))
    assert second != partial
    assert await count(ledger, t.credit_notes, t.credit_notes.c.invoice_id == TWICE) == 2

    # Full credit: after approval the naive dedup runs into the paid cap (a replay looks like a failure).
    full = await draft(ledger, FULL, "174.90")
    await approve(ledger, full, ALICE)
    with pytest.raises(ValueError, match="exceeds the paid total"):
        await naive_draft(ledger, FULL, Decimal("174.90"))

    # The idempotency key returns the original note in both cases, approved, with nothing new drafted.
    before = await count(ledger, t.credit_notes)
    for note_id, invoice_id, amount, cause in [
        (partial, TWICE, "123.60", "duplicate_charge"),
        (full, FULL, "174.90", "cancel_not_respected"),
    ]:
        again, created = await draft_credit_note(
            ledger,
            case_id="case-1",
            invoice_id=invoice_id,
            amount=Decimal(amount),
            root_cause=cause,
            settings=SETTINGS,
        )
        assert (again.id, again.status, created) == (note_id, "approved", False)
    assert await count(ledger, t.credit_notes) == before


@pytest.mark.parametrize("final_status", ["approved", "issued", "rejected", "expired"])
async def test_idempotency_key_survives_status_change(ledger: AsyncEngine, final_status: str) -> None:
    note_id = await draft(ledger)
    if final_status in ("approved", "issued"):
        await approve(ledger, note_id, ALICE)
    if final_status == "issued":
        await issue(ledger, note_id, SETTINGS)
    if final_status == "rejected":
        await decide(
            ledger,
            note_id,
            approver=ALICE,
            decision="reject",
            comment="wrong invoice",
            requester=REQUESTER,
            settings=SETTINGS,
        )
    if final_status == "expired":
        await expire_overdue(ledger, datetime.now(UTC) + timedelta(days=4))

    again, created = await draft_credit_note(
        ledger,
        case_id="case-1",
        invoice_id=FULL,
        amount=Decimal("174.90"),
        root_cause="cancel_not_respected",
        settings=SETTINGS,
    )
    assert (again.id, again.status, created) == (note_id, final_status, False)
    assert await count(ledger, t.credit_notes) == 1
    assert await count(ledger, t.credit_note_requests) == 1


async def test_a_different_amount_is_a_different_request(ledger: AsyncEngine) -> None:
    """The key holds the amount: a corrected overcharge drafts a second note for a human to weigh."""
    first = await draft(ledger, TWICE, "13.93")
    second = await draft(ledger, TWICE, "25.87")
    assert first != second
    async with ledger.connect() as conn:
        keys = (
            await conn.execute(select(t.credit_note_requests.c.idempotency_key).order_by("idempotency_key"))
        ).scalars()
        assert list(keys) == [f"case-1:{TWICE}:13.93", f"case-1:{TWICE}:25.87"]


async def test_the_same_key_with_another_root_cause_is_refused(ledger: AsyncEngine) -> None:
    await draft(ledger, TWICE, "123.60", root_cause="duplicate_charge")
    with pytest.raises(DraftRefused) as refused:
        await draft(ledger, TWICE, "123.60", root_cause="wrong_plan_price")
    assert refused.value.rule == Rule.IDEMPOTENCY_KEY_REUSED
    assert await count(ledger, t.credit_notes) == 1


@pytest.mark.parametrize("n", [8, 64])
async def test_concurrent_drafts_make_one_note(ledger: AsyncEngine, db_url: str, n: int) -> None:
    engine = create_engine(db_url, pool_size=n, max_overflow=0)  # n real connections, all at once
    try:
        results = await asyncio.gather(
            *(
                draft_credit_note(
                    engine,
                    case_id="case-9",
                    invoice_id=FULL,
                    amount=Decimal("174.90"),
                    root_cause="cancel_not_respected",
                    settings=SETTINGS,
                )
                for _ in range(n)
            )
        )
    finally:
        await engine.dispose()
    assert len({note.id for note, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert await count(ledger, t.credit_notes) == 1
    assert await count(ledger, t.credit_note_requests) == 1
    assert [row.action for row in await activity(ledger)] == ["credit_note.drafted"]


async def test_draft_records_what_an_approver_needs(ledger: AsyncEngine) -> None:
    now = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    note, created = await draft_credit_note(
        ledger,
        case_id="case-7",
        invoice_id=TWICE,
        amount=Decimal("123.60"),
        root_cause="duplicate_charge",
        memo="charged twice on 1 March",
        settings=SETTINGS,
        now=now,
    )
    assert created and note.id == "CN-0001"
    assert (note.reason, note.root_cause, note.memo, note.case_id) == (
        "duplicate",
        "duplicate_charge",
        "charged twice on 1 March",
        "case-7",
    )
    assert (note.status, note.amount, note.needed, note.approvals, note.approvers) == (
        "draft",
        Decimal("123.60"),
        1,
        0,
        (),
    )
    assert note.expires_at == now + timedelta(hours=72)
    assert note.args_hash == args_hash(
        invoice_id=TWICE,
        amount=Decimal("123.60"),
        reason="duplicate",
        root_cause="duplicate_charge",
        case_id="case-7",
    )
    [row] = await activity(ledger)
    assert (row.action, row.entity_id, row.details["amount"], row.details["invoice_id"]) == (
        "credit_note.drafted",
        "CN-0001",
        "123.60",
        TWICE,
    )
    other = await draft(ledger, FULL, "174.90", case_id="case-8")
    assert other == "CN-0002"
    assert (await get_credit_note(ledger, other)).reason == "order_change"


async def test_two_approvers_from_the_threshold_up(ledger: AsyncEngine) -> None:
    below = await draft(ledger, BIG, "299.99", case_id="a")
    at = await draft(ledger, BIG, "300.00", case_id="a")  # the same case may propose another amount
    assert (await get_credit_note(ledger, below)).needed == 1
    assert (await get_credit_note(ledger, at)).needed == 2


async def test_drafting_is_capped_by_what_was_paid(ledger: AsyncEngine) -> None:
    """Credited (approved + issued) + this ≤ paid; drafts count once approved; failed payments never."""
    first = await draft(ledger, FULL, "100.00", case_id="a")
    await draft(ledger, FULL, "174.90", case_id="a")  # two drafts may together exceed paid: approval decides
    await approve(ledger, first, ALICE)
    with pytest.raises(DraftRefused) as refused:
        await draft(ledger, FULL, "74.91", case_id="a")
    assert refused.value.rule == Rule.PAID_TOTAL
    assert "174.90" in refused.value.message
    assert await draft(ledger, FULL, "74.90", case_id="a")


async def test_another_case_cannot_draft_while_a_note_on_the_invoice_is_undecided(
    ledger: AsyncEngine,
) -> None:
    """Two complaints about one overcharge must not both credit it: the second case goes to a human."""
    first = await draft(ledger, TWICE, "123.60", case_id="a", root_cause="duplicate_charge")
    with pytest.raises(DraftRefused) as refused:
        await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge")
    assert refused.value.rule == Rule.OPEN_NOTE_ON_INVOICE
    assert first in refused.value.message
    await approve(ledger, first, ALICE)  # approved is still open: not issued yet
    with pytest.raises(DraftRefused):
        await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge")
    assert await count(ledger, t.credit_notes) == 1
    # Once a note is settled against (rejected), another case may ask again.
    rejected = await draft(ledger, FULL, "174.90", case_id="c")
    await decide(
        ledger, rejected, approver=BOB, decision="reject", comment="x", requester=REQUESTER, settings=SETTINGS
    )
    assert await draft(ledger, FULL, "174.90", case_id="d") != rejected


async def test_a_float_amount_is_a_type_error(ledger: AsyncEngine) -> None:
    for bad in (174.9, 17490, "174.90"):
        with pytest.raises(TypeError):
            await draft_credit_note(
                ledger,
                case_id="c",
                invoice_id=FULL,
                amount=bad,
                root_cause="cancel_not_respected",
                settings=SETTINGS,  # type: ignore[arg-type]
            )
    assert await count(ledger, t.credit_notes) == 0
    assert await activity(ledger) == []


# ---------------------------------------------------------------- who may decide


async def test_agent_and_same_person_cannot_approve(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    for agent in ("agent", "Agent"):
        with pytest.raises(ApprovalRefused) as refused:
            await approve(ledger, note_id, agent)
        assert refused.value.rule == Rule.AGENT_CANNOT_APPROVE
    await approve(ledger, note_id, ALICE)
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, ALICE)  # one person clicking twice is not two people
    assert refused.value.rule == Rule.ONE_VOTE_EACH
    with pytest.raises(ApprovalRefused) as refused:
        await decide(
            ledger,
            note_id,
            approver=ALICE,
            decision="reject",
            comment="changed my mind",
            requester=REQUESTER,
            settings=SETTINGS,
        )
    assert refused.value.rule == Rule.ONE_VOTE_EACH
    note = await get_credit_note(ledger, note_id)
    assert (note.status, note.approvals, note.approvers) == ("draft", 1, (ALICE,))


async def test_a_bot_cannot_approve(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, BOT_USER, approver_is_bot=True)
    assert refused.value.rule == Rule.APPROVER_IS_BOT
    assert await status_of(ledger, note_id) == "draft"


async def test_only_listed_slack_users_can_approve(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, "U0MALLORY")
    assert refused.value.rule == Rule.NOT_AN_APPROVER
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, "alice")  # a display name is not an identity
    assert refused.value.rule == Rule.APPROVER_ID
    with pytest.raises(ApprovalRefused) as refused:
        await decide(
            ledger,
            note_id,
            approver=ALICE,
            decision="approve",
            requester=REQUESTER,
            settings=ApprovalSettings(),
        )
    assert refused.value.rule == Rule.NOT_AN_APPROVER  # BILLSLEUTH_APPROVERS empty: nobody can approve
    assert await status_of(ledger, note_id) == "draft"


async def test_the_requester_cannot_decide_their_own_case(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, REQUESTER)
    assert refused.value.rule == Rule.REQUESTER_CANNOT_APPROVE

    # Also when the caller forgets to pass the requester: the case row names them.
    async with ledger.begin() as conn:
        await conn.execute(
            insert(t.cases).values(
                id="case-1", question="why twice?", requester=CAROL, status="awaiting_approval"
            )
        )
    with pytest.raises(ApprovalRefused) as refused:
        await decide(ledger, note_id, approver=CAROL, decision="approve", requester=None, settings=SETTINGS)
    assert refused.value.rule == Rule.REQUESTER_CANNOT_APPROVE
    assert await status_of(ledger, note_id) == "draft"


async def test_two_person_rule(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    first = await decide(
        ledger,
        note_id,
        approver=ALICE,
        decision="approve",
        comment="checked",
        requester=REQUESTER,
        settings=SETTINGS,
    )
    assert (first.status, first.approvals, first.needed, first.changed) == ("draft", 1, 2, True)
    assert "1 of 2" in first.message
    second = await decide(
        ledger, note_id, approver=BOB, decision="approve", requester=REQUESTER, settings=SETTINGS
    )
    assert (second.status, second.approvals, second.needed, second.changed) == ("approved", 2, 2, True)
    issued = await issue(ledger, note_id, SETTINGS)
    assert (issued.status, issued.changed, issued.amount) == ("issued", True, Decimal("500.00"))
    again = await issue(ledger, note_id, SETTINGS)
    assert (again.status, again.changed) == ("issued", False)
    note = await get_credit_note(ledger, note_id)
    assert note.approvers == (ALICE, BOB) and note.issued_at is not None and note.decided_at is not None
    votes = await approvals_of(ledger, note_id)
    assert [(v.approver, v.decision, v.comment) for v in votes] == [
        (ALICE, "approve", "checked"),
        (BOB, "approve", ""),
    ]
    assert {v.args_hash for v in votes} == {note.args_hash}
    actions = [row.action for row in await activity(ledger)]
    assert actions == [
        "credit_note.drafted",
        "approval.recorded",
        "approval.recorded",
        "credit_note.approved",
        "credit_note.issued",
    ]


async def test_reject_needs_a_reason_and_blocks_issue(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    for blank in ("", "   "):
        with pytest.raises(ApprovalRefused) as refused:
            await decide(
                ledger,
                note_id,
                approver=ALICE,
                decision="reject",
                comment=blank,
                requester=REQUESTER,
                settings=SETTINGS,
            )
        assert refused.value.rule == Rule.REASON_REQUIRED
    outcome = await decide(
        ledger,
        note_id,
        approver=ALICE,
        decision="reject",
        comment="cancellation not confirmed",
        requester=REQUESTER,
        settings=SETTINGS,
    )
    assert (outcome.status, outcome.changed) == ("rejected", True)
    note = await get_credit_note(ledger, note_id)
    assert (note.rejected_by, note.reject_reason) == (ALICE, "cancellation not confirmed")
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note_id, SETTINGS)
    assert refused.value.rule == Rule.NOT_APPROVED
    assert await status_of(ledger, note_id) == "rejected"


async def test_a_second_approver_can_reject_a_two_person_note(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    await approve(ledger, note_id, ALICE)
    outcome = await decide(
        ledger,
        note_id,
        approver=BOB,
        decision="reject",
        comment="amount unverified",
        requester=REQUESTER,
        settings=SETTINGS,
    )
    assert (outcome.status, outcome.approvals) == ("rejected", 1)


async def test_repeat_is_a_no_op_and_a_contrary_decision_a_conflict(ledger: AsyncEngine) -> None:
    approved = await draft(ledger, FULL, "174.90", case_id="a")
    await approve(ledger, approved, ALICE)
    for who in (ALICE, BOB):  # the same outcome again, by the first approver or anyone else: nothing changes
        outcome = await decide(
            ledger, approved, approver=who, decision="approve", requester=REQUESTER, settings=SETTINGS
        )
        assert (outcome.status, outcome.changed) == ("approved", False)
        assert "already approved" in outcome.message
    with pytest.raises(ApprovalRefused) as refused:
        await decide(
            ledger,
            approved,
            approver=BOB,
            decision="reject",
            comment="no",
            requester=REQUESTER,
            settings=SETTINGS,
        )
    assert refused.value.rule == Rule.CONFLICT
    await issue(ledger, approved, SETTINGS)
    outcome = await decide(
        ledger, approved, approver=CAROL, decision="approve", requester=REQUESTER, settings=SETTINGS
    )
    assert (outcome.status, outcome.changed) == ("issued", False)

    rejected = await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge")
    await decide(
        ledger,
        rejected,
        approver=ALICE,
        decision="reject",
        comment="one charge was refunded",
        requester=REQUESTER,
        settings=SETTINGS,
    )
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, rejected, BOB)
    assert refused.value.rule == Rule.CONFLICT
    outcome = await decide(
        ledger,
        rejected,
        approver=BOB,
        decision="reject",
        comment="agreed",
        requester=REQUESTER,
        settings=SETTINGS,
    )
    assert (outcome.status, outcome.changed) == ("rejected", False)
    assert await count(ledger, t.approvals) == 2  # one vote per note: no-ops and refusals wrote none


@pytest.mark.parametrize("approvers", [(ALICE, BOB), (ALICE, BOB, CAROL, DAVE, ERIN, FRANK)])
async def test_concurrent_approvals_by_distinct_people(
    ledger: AsyncEngine, db_url: str, approvers: tuple[str, ...]
) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    engine = create_engine(db_url, pool_size=len(approvers), max_overflow=0)
    try:
        outcomes = await asyncio.gather(
            *(
                decide(
                    engine, note_id, approver=who, decision="approve", requester=REQUESTER, settings=SETTINGS
                )
                for who in approvers
            )
        )
    finally:
        await engine.dispose()
    note = await get_credit_note(ledger, note_id)
    assert (note.status, note.approvals) == ("approved", 2)
    assert await count(ledger, t.approvals) == 2
    assert sorted(o.changed for o in outcomes) == [False] * (len(approvers) - 2) + [True, True]
    assert sorted(o.approvals for o in outcomes if o.changed) == [1, 2]
    assert [row.action for row in await activity(ledger)].count("credit_note.approved") == 1


# ---------------------------------------------------------------- issuing, budget, binding, expiry


async def test_issue_rechecks_the_paid_total(ledger: AsyncEngine) -> None:
    """Two drafts for the whole invoice, both approved: the second one to be issued is stopped."""
    first = await draft(ledger, FULL, "174.90", case_id="a")
    second = await draft(ledger, FULL, "174.89", case_id="a")
    await approve(ledger, first, ALICE)
    await approve(ledger, second, BOB)
    await issue(ledger, first, SETTINGS)
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, second, SETTINGS)
    assert refused.value.rule == Rule.PAID_TOTAL
    assert "174.90" in refused.value.message
    assert await status_of(ledger, second) == "approved"
    assert (await activity(ledger))[-1].action == "credit_note.issue_refused"


async def correct_the_plan(db: AsyncEngine, plan_id: str) -> None:
    """A ledger correction: the customer's subscription really was on `plan_id` all along."""
    async with db.begin() as conn:
        await conn.execute(
            update(t.subscription_events)
            .where(t.subscription_events.c.id == "EVT-0001-create")
            .values(payload={"plan_id": plan_id, "quantity": 1})
        )


async def test_drafting_re_derives_what_is_owed_from_the_ledger(ledger: AsyncEngine) -> None:
    """A case verified an overcharge; by the time it drafts, the ledger says the bill was right."""
    await correct_the_plan(ledger, "pro")  # Pro at 174.90: FULL was billed and paid exactly right
    with pytest.raises(DraftRefused) as refused:
        await draft(ledger, FULL, "174.90")
    assert refused.value.rule == Rule.OVERCHARGE_CHANGED
    assert "0.00 is still owed back on INV-0001-01" in refused.value.message
    assert await count(ledger, t.credit_notes) == 0
    # TWICE was paid twice (247.20) against a 174.90 bill: 72.30 is still owed, and no cent more.
    with pytest.raises(DraftRefused):
        await draft(ledger, TWICE, "72.31", root_cause="duplicate_charge")
    assert await draft(ledger, TWICE, "72.30", root_cause="duplicate_charge")


async def test_issuing_re_derives_what_is_owed_from_the_ledger(ledger: AsyncEngine) -> None:
    """Approved for what was owed then; the ledger was corrected before it was issued: no money leaves."""
    note = await draft(ledger, FULL, "174.90")
    await approve(ledger, note, ALICE)
    await correct_the_plan(ledger, "pro")
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note, SETTINGS)
    assert refused.value.rule == Rule.OVERCHARGE_CHANGED
    assert await status_of(ledger, note) == "approved"
    assert (await activity(ledger))[-1].details["rule"] == "overcharge_changed"


async def test_a_ledger_the_rules_cannot_re_bill_credits_nothing(ledger: AsyncEngine) -> None:
    note = await draft(ledger, FULL, "174.90")
    await approve(ledger, note, ALICE)
    async with ledger.begin() as conn:  # the subscription's create event is gone: nothing can be re-billed
        await conn.execute(delete(t.subscription_events))
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note, SETTINGS)
    assert refused.value.rule == Rule.OVERCHARGE_UNVERIFIED
    with pytest.raises(DraftRefused) as refused_draft:
        await draft(ledger, BIG, "500.00", case_id="case-2")
    assert refused_draft.value.rule == Rule.OVERCHARGE_UNVERIFIED


async def test_budget_hard_stop_records_an_incident(ledger: AsyncEngine) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    today = datetime(2026, 6, 10, 23, 0, tzinfo=UTC)
    first = await draft(ledger, FULL, "174.90", case_id="a")
    second = await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge")
    await approve(ledger, first, ALICE)
    await approve(ledger, second, ALICE)
    await issue(ledger, first, tight, now=today)
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, second, tight, now=today + timedelta(minutes=30))
    assert refused.value.rule == Rule.DAILY_CREDIT_LIMIT
    incident = (await activity(ledger))[-1]
    assert (incident.action, incident.entity_id) == ("budget.hard_stop", second)
    assert incident.details["rule"] == "daily_credit_limit"
    assert (incident.details["issued_today"], incident.details["amount"], incident.details["limit"]) == (
        "174.90",
        "123.60",
        "200.00",
    )
    assert await status_of(ledger, second) == "approved"
    # The window is the UTC calendar day: after midnight there is budget again.
    outcome = await issue(ledger, second, tight, now=today + timedelta(hours=2))
    assert outcome.changed and await status_of(ledger, second) == "issued"


async def test_concurrent_issuers_cannot_both_spend_the_last_of_the_budget(
    ledger: AsyncEngine, db_url: str
) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    notes = [
        await draft(ledger, FULL, "174.90", case_id="a"),
        await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge"),
    ]
    for note_id in notes:
        await approve(ledger, note_id, ALICE)
    engine = create_engine(db_url, pool_size=2, max_overflow=0)
    try:
        results = await asyncio.gather(*(issue(engine, n, tight) for n in notes), return_exceptions=True)
    finally:
        await engine.dispose()
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert [type(r) for r in results if isinstance(r, BaseException)] == [IssueRefused]
    assert await count(ledger, t.credit_notes, t.credit_notes.c.status == "issued") == 1


async def test_issue_refuses_when_the_note_changed_after_approval(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, TWICE, "123.60", root_cause="duplicate_charge")
    await approve(ledger, note_id, ALICE)
    async with ledger.begin() as conn:  # someone edits the amount behind the approval's back
        await conn.execute(
            update(t.credit_notes).where(t.credit_notes.c.id == note_id).values(amount=Decimal("247.20"))
        )
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note_id, SETTINGS)
    assert refused.value.rule == Rule.ARGS_MISMATCH

    # Rewriting the note's own hash to match does not help: the vote holds the hash it approved.
    forged = args_hash(
        invoice_id=TWICE,
        amount=Decimal("247.20"),
        reason="duplicate",
        root_cause="duplicate_charge",
        case_id="case-1",
    )
    async with ledger.begin() as conn:
        await conn.execute(
            update(t.credit_notes).where(t.credit_notes.c.id == note_id).values(args_hash=forged)
        )
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note_id, SETTINGS)
    assert refused.value.rule == Rule.ARGS_MISMATCH
    assert await status_of(ledger, note_id) == "approved"


async def test_a_note_edited_before_any_vote_cannot_be_decided(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    async with ledger.begin() as conn:
        await conn.execute(
            update(t.credit_notes).where(t.credit_notes.c.id == note_id).values(invoice_id=TWICE)
        )
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, ALICE)
    assert refused.value.rule == Rule.ARGS_MISMATCH


async def test_issue_needs_the_approvals_it_was_drafted_with(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    await approve(ledger, note_id, ALICE)
    async with ledger.begin() as conn:  # status forced to approved with one of two votes
        await conn.execute(
            update(t.credit_notes).where(t.credit_notes.c.id == note_id).values(status="approved")
        )
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note_id, SETTINGS)
    assert refused.value.rule == Rule.NOT_ENOUGH_APPROVALS


async def test_expiry(ledger: AsyncEngine) -> None:
    drafted_at = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    swept = await draft(ledger, FULL, "174.90", case_id="a", now=drafted_at)
    decided = await draft(ledger, TWICE, "123.60", case_id="b", root_cause="duplicate_charge", now=drafted_at)
    await approve(ledger, decided, ALICE, now=drafted_at + timedelta(hours=1))
    assert await expire_overdue(ledger, drafted_at + timedelta(hours=71)) == []
    assert await expire_overdue(ledger, drafted_at + timedelta(hours=72)) == [swept]
    assert await expire_overdue(ledger, drafted_at + timedelta(hours=100)) == []  # nothing expires twice
    assert await status_of(ledger, swept) == "expired"
    assert await status_of(ledger, decided) == "approved"  # a decided note is not a draft: it stays
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, swept, BOB)
    assert refused.value.rule == Rule.EXPIRED
    assert [row.action for row in await activity(ledger)][-2:] == ["credit_note.expired", "approval.refused"]


async def test_a_vote_on_an_overdue_draft_expires_it_and_is_refused(ledger: AsyncEngine) -> None:
    drafted_at = datetime.now(UTC) - timedelta(hours=73)
    note_id = await draft(ledger, now=drafted_at)
    with pytest.raises(ApprovalRefused) as refused:
        await approve(ledger, note_id, ALICE)
    assert refused.value.rule == Rule.EXPIRED
    assert await status_of(ledger, note_id) == "expired"
    assert await count(ledger, t.approvals) == 0
    assert [row.action for row in await activity(ledger)] == [
        "credit_note.drafted",
        "credit_note.expired",
        "approval.refused",
    ]


async def test_a_vote_that_waited_for_the_note_past_its_expiry_is_refused(ledger: AsyncEngine) -> None:
    """Expiry is judged under the note's row lock, when the vote is counted, not before it waited."""
    note_id = await draft(ledger)
    async with ledger.begin() as conn:
        await conn.execute(
            update(t.credit_notes)
            .where(t.credit_notes.c.id == note_id)
            .values(expires_at=func.now() + text("interval '1 second'"))
        )
    async with ledger.connect() as other:  # another decision holds the note while time runs out
        await other.execute(select(t.credit_notes).where(t.credit_notes.c.id == note_id).with_for_update())
        vote = asyncio.create_task(approve(ledger, note_id, ALICE))
        await asyncio.sleep(1.5)
        await other.rollback()
    with pytest.raises(ApprovalRefused) as refused:
        await vote
    assert refused.value.rule == Rule.EXPIRED
    assert await status_of(ledger, note_id) == "expired"
    assert await count(ledger, t.approvals) == 0


async def test_issuing_refuses_approvals_counted_after_the_note_expired(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger)
    await approve(ledger, note_id, ALICE)
    async with ledger.begin() as conn:  # the approval landed after the deadline (however it got there)
        await conn.execute(
            update(t.credit_notes)
            .where(t.credit_notes.c.id == note_id)
            .values(expires_at=func.now() - text("interval '1 hour'"))
        )
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, note_id, SETTINGS)
    assert refused.value.rule == Rule.EXPIRED
    assert await status_of(ledger, note_id) == "approved"


async def test_only_votes_of_current_approvers_count_when_issuing(ledger: AsyncEngine) -> None:
    """ALICE approved, then left finance: her vote no longer carries the note; it waits for a current one."""
    note_id = await draft(ledger)
    await approve(ledger, note_id, ALICE)
    without_alice = ApprovalSettings(
        approvers=SETTINGS.approvers - {ALICE},
        two_person_threshold=SETTINGS.two_person_threshold,
        daily_credit_limit=SETTINGS.daily_credit_limit,
    )
    outcome = await issue(ledger, note_id, without_alice)
    assert (outcome.status, outcome.changed) == ("draft", True)
    note = await get_credit_note(ledger, note_id)
    assert note.status == "draft" and note.issued_at is None
    assert note.expires_at is not None and note.expires_at > datetime.now(UTC)  # a fresh approval window
    assert (await activity(ledger))[-1].action == "credit_note.reopened"
    assert await count(ledger, t.approvals) == 1  # ALICE's vote stays on record
    await decide(
        ledger, note_id, approver=BOB, decision="approve", requester=REQUESTER, settings=without_alice
    )
    assert await status_of(ledger, note_id) == "approved"
    assert (await issue(ledger, note_id, without_alice)).status == "issued"


async def test_a_removed_approvers_vote_is_not_one_of_two(ledger: AsyncEngine) -> None:
    note_id = await draft(ledger, BIG, "500.00")
    await approve(ledger, note_id, ALICE)
    without_alice = ApprovalSettings(approvers=SETTINGS.approvers - {ALICE})
    outcome = await decide(
        ledger, note_id, approver=BOB, decision="approve", requester=REQUESTER, settings=without_alice
    )
    assert (outcome.status, outcome.approvals, outcome.needed) == ("draft", 1, 2)


async def test_an_approved_note_never_issued_can_be_cancelled_by_any_approver(ledger: AsyncEngine) -> None:
    """Refused at issue (the ledger changed), it would block its invoice forever: an approver ends it."""
    note_id = await draft(ledger, TWICE, "123.60", root_cause="duplicate_charge")
    await approve(ledger, note_id, ALICE)
    with pytest.raises(ApprovalRefused) as refused:  # a reason is required
        await cancel(ledger, note_id, approver=BOB, reason=" ", requester=REQUESTER, settings=SETTINGS)
    assert refused.value.rule == Rule.REASON_REQUIRED
    outcome = await cancel(  # ALICE voted for it, and may still cancel it
        ledger, note_id, approver=ALICE, reason="refunded by hand", requester=REQUESTER, settings=SETTINGS
    )
    assert (outcome.status, outcome.changed) == ("cancelled", True)
    note = await get_credit_note(ledger, note_id)
    assert (note.status, note.cancelled_by, note.cancel_reason) == ("cancelled", ALICE, "refunded by hand")
    assert [r.action for r in await activity(ledger)][-1] == "credit_note.cancelled"
    again = await cancel(ledger, note_id, approver=BOB, reason="dup", requester=REQUESTER, settings=SETTINGS)
    assert again.changed is False  # the same outcome again: a no-op
    with pytest.raises(IssueRefused):
        await issue(ledger, note_id, SETTINGS)
    # The invoice is free for a new case.
    assert await draft(ledger, TWICE, "123.60", case_id="case-2", root_cause="duplicate_charge") != note_id


async def test_only_an_approved_unissued_note_can_be_cancelled_and_only_by_an_approver(
    ledger: AsyncEngine,
) -> None:
    waiting = await draft(ledger, FULL, "174.90")
    issued = await draft(ledger, BIG, "250.00", case_id="case-2")
    await approve(ledger, issued, ALICE)
    await issue(ledger, issued, SETTINGS)
    for note_id, rule in ((waiting, Rule.CONFLICT), (issued, Rule.CONFLICT)):
        with pytest.raises(ApprovalRefused) as refused:
            await cancel(ledger, note_id, approver=BOB, reason="no", requester=REQUESTER, settings=SETTINGS)
        assert refused.value.rule == rule
    approved = await draft(ledger, TWICE, "123.60", case_id="case-3", root_cause="duplicate_charge")
    await approve(ledger, approved, ALICE)
    for who, rule in (("agent", Rule.AGENT_CANNOT_APPROVE), ("U0STRANGER", Rule.NOT_AN_APPROVER)):
        with pytest.raises(ApprovalRefused) as refused:
            await cancel(ledger, approved, approver=who, reason="no", requester=REQUESTER, settings=SETTINGS)
        assert refused.value.rule == rule
    with pytest.raises(ApprovalRefused) as refused:
        await cancel(
            ledger,
            approved,
            approver=BOB,
            reason="no",
            requester=REQUESTER,
            settings=SETTINGS,
            approver_is_bot=True,
        )
    assert refused.value.rule == Rule.APPROVER_IS_BOT
    assert (await status_of(ledger, waiting), await status_of(ledger, issued)) == ("draft", "issued")
    assert await status_of(ledger, approved) == "approved"


# ---------------------------------------------------------------- every refusal: one row, nothing else


Scenario = Callable[[AsyncEngine, str, str], Awaitable[Any]]


def _decide(
    approver: str, decision: str = "approve", comment: str = "", *, on_big: bool = False, is_bot: bool = False
) -> Scenario:
    async def run(db: AsyncEngine, small: str, big: str) -> Any:
        return await decide(
            db,
            big if on_big else small,
            approver=approver,
            decision=decision,
            comment=comment,
            requester=REQUESTER,
            settings=SETTINGS,
            approver_is_bot=is_bot,
        )

    return run


def _draft(
    invoice_id: str, amount: str, root_cause: str = "cancel_not_respected", case_id: str = "case-x"
) -> Scenario:
    async def run(db: AsyncEngine, small: str, big: str) -> Any:
        return await draft_credit_note(
            db,
            case_id=case_id,
            invoice_id=invoice_id,
            amount=Decimal(amount),
            root_cause=root_cause,
            settings=SETTINGS,
        )

    return run


def _issue(which: str) -> Scenario:
    async def run(db: AsyncEngine, small: str, big: str) -> Any:
        return await issue(db, small if which == "small" else big, SETTINGS)

    return run


REFUSALS: dict[str, tuple[Scenario, type[Refused], Rule, str]] = {
    "agent": (_decide("agent"), ApprovalRefused, Rule.AGENT_CANNOT_APPROVE, "approval.refused"),
    "bot": (_decide(BOT_USER, is_bot=True), ApprovalRefused, Rule.APPROVER_IS_BOT, "approval.refused"),
    "not a slack id": (_decide("bob@example.com"), ApprovalRefused, Rule.APPROVER_ID, "approval.refused"),
    "not listed": (_decide("U0MALLORY"), ApprovalRefused, Rule.NOT_AN_APPROVER, "approval.refused"),
    "requester": (_decide(REQUESTER), ApprovalRefused, Rule.REQUESTER_CANNOT_APPROVE, "approval.refused"),
    "reject without reason": (
        _decide(BOB, "reject", " "),
        ApprovalRefused,
        Rule.REASON_REQUIRED,
        "approval.refused",
    ),
    "second vote": (_decide(ALICE, on_big=True), ApprovalRefused, Rule.ONE_VOTE_EACH, "approval.refused"),
    "conflict": (_decide(BOB, "reject", "no"), ApprovalRefused, Rule.CONFLICT, "approval.refused"),
    "zero amount": (_draft(FULL, "0.00"), DraftRefused, Rule.AMOUNT_POSITIVE, "credit_note.draft_refused"),
    "negative amount": (
        _draft(FULL, "-5.00"),
        DraftRefused,
        Rule.AMOUNT_POSITIVE,
        "credit_note.draft_refused",
    ),
    "sub-cent amount": (_draft(FULL, "10.005"), DraftRefused, Rule.AMOUNT_CENTS, "credit_note.draft_refused"),
    "no error": (
        _draft(FULL, "10.00", "no_error"),
        DraftRefused,
        Rule.ROOT_CAUSE,
        "credit_note.draft_refused",
    ),
    "unknown cause": (
        _draft(FULL, "10.00", "gremlins"),
        DraftRefused,
        Rule.ROOT_CAUSE,
        "credit_note.draft_refused",
    ),
    "unknown invoice": (
        _draft("INV-9999-01", "10.00"),
        DraftRefused,
        Rule.INVOICE_EXISTS,
        "credit_note.draft_refused",
    ),
    "blank case": (
        _draft(FULL, "10.00", case_id=" "),
        DraftRefused,
        Rule.CASE_ID_REQUIRED,
        "credit_note.draft_refused",
    ),
    "over paid": (_draft(TWICE, "247.21"), DraftRefused, Rule.PAID_TOTAL, "credit_note.draft_refused"),
    "issue a draft": (_issue("big"), IssueRefused, Rule.NOT_APPROVED, "credit_note.issue_refused"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
async def test_every_refusal_leaves_one_activity_row_and_changes_nothing_else(
    ledger: AsyncEngine, name: str
) -> None:
    scenario, error, rule, action = REFUSALS[name]
    small = await draft(ledger, FULL, "174.90", case_id="small")  # approved by ALICE (needs one)
    big = await draft(ledger, BIG, "500.00", case_id="big")  # one of two votes, by ALICE
    await approve(ledger, small, ALICE)
    await approve(ledger, big, ALICE)
    before, rows_before = await snapshot(ledger), len(await activity(ledger))

    with pytest.raises(error) as refused:
        await scenario(ledger, small, big)

    assert refused.value.rule == rule
    assert "\n" not in refused.value.message and refused.value.message
    assert await snapshot(ledger) == before
    rows = await activity(ledger)
    assert len(rows) == rows_before + 1
    assert (rows[-1].action, rows[-1].details["rule"], rows[-1].details["message"]) == (
        action,
        str(rule),
        refused.value.message,
    )


# ---------------------------------------------------------------- queries


async def test_queries(ledger: AsyncEngine) -> None:
    waiting = await draft(ledger, BIG, "500.00", case_id="case-a")
    done = await draft(ledger, FULL, "174.90", case_id="case-b")
    await approve(ledger, waiting, ALICE)
    await approve(ledger, done, BOB)
    pending = await list_pending(ledger)
    assert [(n.id, n.approvals, n.needed, n.approvers, n.case_id) for n in pending] == [
        (waiting, 1, 2, (ALICE,), "case-a")
    ]
    assert (await credit_note_for_case(ledger, "case-b")).id == done  # type: ignore[union-attr]
    assert await credit_note_for_case(ledger, "case-none") is None
    assert [v.approver for v in await approvals_of(ledger, waiting)] == [ALICE]
    with pytest.raises(UnknownCreditNote, match="CN-9999"):
        await get_credit_note(ledger, "CN-9999")
    with pytest.raises(LookupError, match="CN-9999"):
        await approvals_of(ledger, "CN-9999")
    with pytest.raises(LookupError, match="CN-9999"):
        await approve(ledger, "CN-9999", ALICE)
    with pytest.raises(LookupError, match="CN-9999"):
        await issue(ledger, "CN-9999", SETTINGS)
    with pytest.raises(ValueError, match="decision"):
        await decide(ledger, waiting, approver=BOB, decision="maybe", requester=REQUESTER, settings=SETTINGS)


async def test_issue_if_approved_hands_back_the_note_as_a_fresh_read_shows_it(ledger: AsyncEngine) -> None:
    """A resumed case settles on what issuing hands back instead of reading the note again: so that view
    must be the note as the database now has it — a draft untouched (and no refusal recorded for it),
    an approved note issued, one whose approver left reopened, one refused with the note it refused."""
    from approvals.issuing import issue_if_approved

    waiting = await draft(ledger, BIG, "500.00")
    before = await activity(ledger)
    assert await issue_if_approved(ledger, waiting, SETTINGS) == await get_credit_note(ledger, waiting)
    assert (await get_credit_note(ledger, waiting)).status == "draft"
    assert await activity(ledger) == before  # not approved is no refusal here

    approved = await draft(ledger)
    await approve(ledger, approved, ALICE)
    # A wrong invoice named for the lock: issuing locks the note's own invoice and issues all the same.
    issued = await issue_if_approved(ledger, approved, SETTINGS, invoice_id=TWICE)
    assert issued == await get_credit_note(ledger, approved)
    assert issued.status == "issued" and issued.issued_at is not None

    reopened = await draft(ledger, TWICE, "123.60")
    await approve(ledger, reopened, ALICE)
    without_alice = ApprovalSettings(approvers=SETTINGS.approvers - {ALICE})
    view = await issue_if_approved(ledger, reopened, without_alice, invoice_id=TWICE)
    assert view == await get_credit_note(ledger, reopened) and view.status == "draft"

    await approve(ledger, reopened, BOB)
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    with pytest.raises(IssueRefused) as refused:
        await issue_if_approved(ledger, reopened, tight, invoice_id=TWICE)
    assert refused.value.rule == Rule.DAILY_CREDIT_LIMIT
    assert refused.value.note == await get_credit_note(ledger, reopened)
    assert (await activity(ledger))[-1].action == "budget.hard_stop"


async def test_a_vote_from_a_card_is_checked_against_the_card_under_the_notes_lock(
    ledger: AsyncEngine,
) -> None:
    """A click carries the revision of the card it came from: the claim's one read of the note (under its
    lock) checks that the note is still a draft and the card current, before any rule, recording nothing
    when it is not; and a decision that needs the note's case refuses one whose case is gone."""
    note_id = await draft(ledger, BIG, "500.00")  # needs two approvers
    vote = {"decision": "approve", "requester": REQUESTER, "settings": SETTINGS}
    first = await decide(ledger, note_id, approver=ALICE, seen_revision=0, **vote)
    assert (first.status, first.approvals, first.case_id) == ("draft", 1, "case-1")
    before = (await count(ledger, t.approvals), await activity(ledger))
    with pytest.raises(NoteMovedOn) as moved:  # drawn before ALICE's vote: out of date
        await decide(ledger, note_id, approver=BOB, seen_revision=0, **vote)
    assert moved.value.note == await get_credit_note(ledger, note_id) and moved.value.note.revision == 1
    with pytest.raises(NoteMovedOn):  # not on the approver list: still the card speaks first
        await decide(ledger, note_id, approver="U0NOBODY", seen_revision=0, **vote)
    assert (await count(ledger, t.approvals), await activity(ledger)) == before
    second = await decide(ledger, note_id, approver=BOB, seen_revision=1, **vote)
    assert (second.status, second.changed) == ("approved", True)
    with pytest.raises(NoteMovedOn) as moved:  # no longer a draft, whatever revision the card claims
        await decide(ledger, note_id, approver=CAROL, seen_revision=99, **vote)
    assert moved.value.note.status == "approved"

    caseless = await draft(ledger, TWICE, "123.60", case_id="case-gone")  # no cases row by that id
    with pytest.raises(NoCase):
        await decide(ledger, caseless, approver=ALICE, case_required=True, **vote)
    assert await count(ledger, t.approvals, t.approvals.c.credit_note_id == caseless) == 0
    assert (await decide(ledger, caseless, approver=ALICE, **vote)).status == "approved"


async def test_two_approvers_clicking_one_card_at_once_are_both_counted(ledger: AsyncEngine) -> None:
    """BOB's click arrived before ALICE's vote was counted (they clicked the same card at once): the
    card he saw was current when he clicked, so his vote counts as the second, not as a stale card."""
    note_id = await draft(ledger, BIG, "500.00")
    vote = {"decision": "approve", "requester": REQUESTER, "settings": SETTINGS, "seen_revision": 0}
    clicked = datetime.now(UTC)
    await decide(ledger, note_id, approver=ALICE, now=clicked + timedelta(seconds=1), **vote)
    both = await decide(ledger, note_id, approver=BOB, now=clicked, **vote)
    assert (both.status, both.approvals, both.changed) == ("approved", 2, True)
    # A click that arrived before the note was approved: the rules judge it (the same outcome: a no-op).
    late = await decide(ledger, note_id, approver=CAROL, now=clicked - timedelta(seconds=1), **vote)
    assert (late.status, late.changed) == ("approved", False)
