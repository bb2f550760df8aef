"""Currency is part of money: notes carry their invoice's currency, the daily limit holds per currency,
and an amount the currency cannot express (a fraction of a yen) is refused, never rounded.

The ledger here has USD, EUR and JPY customers (and a KWD one, whose three decimals the ledger's cents
cannot hold), each with paid invoices.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import (
    ApprovalSettings,
    DraftRefused,
    IssueRefused,
    Rule,
    decide,
    draft_credit_note,
    get_credit_note,
    issue,
    list_pending,
)
from approvals.issuing import fits_a_day, held_by_daily_budget
from engine import schema as t
from engine.money import expressible, fmt_amount, minor_unit

ALICE = "U0ALICE"
SETTINGS = ApprovalSettings(approvers=frozenset({ALICE}), two_person_threshold=Decimal("1000000.00"))
TODAY = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)

# invoice id → (customer, currency, amount paid)
INVOICES = {
    "INV-USD-1": ("C-USD", "USD", "300.00"),
    "INV-USD-2": ("C-USD", "USD", "300.00"),
    "INV-EUR-1": ("C-EUR", "EUR", "300.00"),
    "INV-JPY-1": ("C-JPY", "JPY", "48000.00"),
    "INV-KWD-1": ("C-KWD", "KWD", "90.00"),
}


async def add_multi_currency_ledger(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        await conn.execute(
            insert(t.plans).values(id="pro", name="Pro", interval="month", unit_price=Decimal("300.00"))
        )
        for customer, currency in {(c, cur) for c, cur, _ in INVOICES.values()}:
            await conn.execute(
                insert(t.customers).values(
                    id=customer, name=customer, country="US", currency=currency, tax_region="US"
                )
            )
            await conn.execute(
                insert(t.subscriptions).values(
                    id=f"SUB-{customer}", customer_id=customer, plan_id="pro", quantity=1, status="active",
                    start_date=date(2026, 1, 1), current_period_start=date(2026, 5, 1),
                    current_period_end=date(2026, 6, 1), billing_anchor_day=1,
                )
            )  # fmt: skip
        for invoice_id, (customer, currency, paid) in INVOICES.items():
            await conn.execute(
                insert(t.invoices).values(
                    id=invoice_id, customer_id=customer, subscription_id=f"SUB-{customer}",
                    period_start=date(2026, 5, 1), period_end=date(2026, 6, 1), issued_at=date(2026, 5, 1),
                    status="paid", subtotal=Decimal(paid), discount=Decimal("0.00"), tax=Decimal("0.00"),
                    total=Decimal(paid), currency=currency,
                )
            )  # fmt: skip
            await conn.execute(
                insert(t.payments).values(
                    id=f"PAY-{invoice_id}", invoice_id=invoice_id, amount=Decimal(paid), status="succeeded",
                    attempted_at=datetime(2026, 5, 1, tzinfo=UTC), gateway_ref=f"ch_{invoice_id}",
                )
            )  # fmt: skip


@pytest.fixture
async def ledger(db: AsyncEngine) -> AsyncEngine:
    await add_multi_currency_ledger(db)
    return db


async def approved(db: AsyncEngine, invoice_id: str, amount: str, case_id: str) -> str:
    note, _ = await draft_credit_note(
        db, case_id=case_id, invoice_id=invoice_id, amount=Decimal(amount),
        root_cause="duplicate_charge", settings=SETTINGS, now=TODAY,
    )  # fmt: skip
    await decide(
        db, note.id, approver=ALICE, decision="approve", requester="U0SUPPORT", settings=SETTINGS, now=TODAY
    )
    return note.id


def test_minor_units_and_formatting() -> None:
    assert (minor_unit("JPY"), minor_unit("USD"), minor_unit("EUR"), minor_unit("KWD")) == (0, 2, 2, 3)
    assert fmt_amount(Decimal("12000.00"), "JPY") == "12000 JPY"
    assert fmt_amount(Decimal("123.6"), "USD") == "123.60 USD"
    assert fmt_amount(Decimal("26.02"), "JPY") == "26.02 JPY"  # a fraction of a yen is shown, not rounded
    assert not expressible(Decimal("26.02"), "JPY") and expressible(Decimal("26.00"), "JPY")


async def test_a_note_carries_its_invoices_currency(ledger: AsyncEngine) -> None:
    eur = await approved(ledger, "INV-EUR-1", "120.00", "case-eur")
    jpy, _ = await draft_credit_note(
        ledger, case_id="case-jpy", invoice_id="INV-JPY-1", amount=Decimal("12000"),
        root_cause="duplicate_charge", settings=SETTINGS, now=TODAY,
    )  # fmt: skip
    assert (await get_credit_note(ledger, eur)).currency == "EUR"
    assert jpy.currency == "JPY" and jpy.summary()["currency"] == "JPY"
    assert jpy.summary()["amount"] == "12000.00"  # the JSON contract's two-decimal string, unchanged
    assert [(n.id, n.currency) for n in await list_pending(ledger)] == [(jpy.id, "JPY")]


async def test_a_fraction_of_a_yen_is_refused_and_recorded_never_rounded(ledger: AsyncEngine) -> None:
    with pytest.raises(DraftRefused) as refused:
        await draft_credit_note(
            ledger, case_id="case-jpy", invoice_id="INV-JPY-1", amount=Decimal("26.02"),
            root_cause="duplicate_charge", settings=SETTINGS, now=TODAY,
        )  # fmt: skip
    assert refused.value.rule == Rule.CURRENCY_MINOR_UNIT
    assert "JPY" in refused.value.message and "\n" not in refused.value.message
    async with ledger.connect() as conn:
        assert (await conn.execute(select(t.credit_notes))).all() == []
        last = (await conn.execute(select(t.activity_log).order_by(t.activity_log.c.id.desc()))).first()
    assert last is not None and last.action == "credit_note.draft_refused"
    assert (last.details["rule"], last.details["currency"]) == ("currency_minor_unit", "JPY")


async def test_a_three_decimal_currency_is_refused_explicitly(ledger: AsyncEngine) -> None:
    with pytest.raises(DraftRefused) as refused:
        await draft_credit_note(
            ledger, case_id="case-kwd", invoice_id="INV-KWD-1", amount=Decimal("10.00"),
            root_cause="duplicate_charge", settings=SETTINGS, now=TODAY,
        )  # fmt: skip
    assert refused.value.rule == Rule.CURRENCY_MINOR_UNIT and "KWD" in refused.value.message


async def test_usd_issued_today_does_not_hold_a_eur_note(ledger: AsyncEngine) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    usd = await approved(ledger, "INV-USD-1", "150.00", "case-usd")
    eur = await approved(ledger, "INV-EUR-1", "150.00", "case-eur")
    await issue(ledger, usd, tight, now=TODAY)
    assert not await held_by_daily_budget(ledger, Decimal("150.00"), "EUR", tight, now=TODAY)
    outcome = await issue(ledger, eur, tight, now=TODAY)
    assert outcome.changed and (await get_credit_note(ledger, eur)).status == "issued"


async def test_two_usd_notes_over_the_limit_hold(ledger: AsyncEngine) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    first = await approved(ledger, "INV-USD-1", "150.00", "case-1")
    second = await approved(ledger, "INV-USD-2", "150.00", "case-2")
    await issue(ledger, first, tight, now=TODAY)
    assert await held_by_daily_budget(ledger, Decimal("150.00"), "USD", tight, now=TODAY)
    with pytest.raises(IssueRefused) as refused:
        await issue(ledger, second, tight, now=TODAY)
    assert refused.value.rule == Rule.DAILY_CREDIT_LIMIT
    assert "USD" in refused.value.message
    assert refused.value.details["currency"] == "USD"
    assert (await issue(ledger, second, tight, now=TODAY + timedelta(days=1))).changed


async def test_a_yen_limit_of_its_own(ledger: AsyncEngine) -> None:
    # The plain number would be 200 yen; the per-currency form gives JPY a limit in yen.
    settings = ApprovalSettings(
        approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"),
        currency_daily_limits={"JPY": Decimal("30000")},
    )  # fmt: skip
    assert fits_a_day(Decimal("12000"), "JPY", settings) and not fits_a_day(Decimal("12000"), "USD", settings)
    note = await approved(ledger, "INV-JPY-1", "12000", "case-jpy")
    assert (await issue(ledger, note, settings, now=TODAY)).changed
