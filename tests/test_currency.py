"""Currency is part of money: notes carry their invoice's currency, the daily limit holds per currency,
and an amount the currency cannot express (a fraction of a yen) is refused, never rounded.

The ledger here has USD, EUR and JPY customers (and a KWD one, whose three decimals the ledger's cents
cannot hold), each with paid invoices.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
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
from approvals.holds import fits_a_day, held_by_daily_limit
from approvals.policy import approvals_needed
from bot.cards import credit_note_card
from bot.cards.models import CardNote, ConclusionView, CreditNoteCardView, CustomerView, RecomputationView
from engine import schema as t
from engine.db import create_engine
from engine.money import expressible, fmt_amount, minor_unit
from scenarios.dataset import generate
from scenarios.generator import DEFAULT_SEED
from tests import cli
from tests.cli import Done

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
        # Everyone is on the free plan yet was billed: every payment is owed back, so the ledger itself
        # supports the credits drafted here (drafting and issuing re-derive what is owed).
        await conn.execute(
            insert(t.plans).values(id="free", name="Free", interval="month", unit_price=Decimal("0.00"))
        )
        await conn.execute(
            insert(t.tax_rates).values(
                code="US-NONE", region="US", rate=Decimal("0"), valid_from=date(2020, 1, 1)
            )
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
            await conn.execute(
                insert(t.subscription_events).values(
                    id=f"EVT-{customer}", subscription_id=f"SUB-{customer}", type="create",
                    effective_at=datetime(2026, 1, 1, tzinfo=UTC), payload={"plan_id": "free", "quantity": 1},
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


async def held_today(engine: AsyncEngine, note_id: str, settings: ApprovalSettings) -> bool:
    """Whether the daily limit holds this approved note on TODAY, its case waiting for it."""
    note = await get_credit_note(engine, note_id)
    async with engine.connect() as conn:
        return await held_by_daily_limit(conn, note, case_waits=True, settings=settings, now=TODAY)


async def test_usd_issued_today_does_not_hold_a_eur_note(ledger: AsyncEngine) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    usd = await approved(ledger, "INV-USD-1", "150.00", "case-usd")
    eur = await approved(ledger, "INV-EUR-1", "150.00", "case-eur")
    await issue(ledger, usd, tight, now=TODAY)
    assert not await held_today(ledger, eur, tight)
    outcome = await issue(ledger, eur, tight, now=TODAY)
    assert outcome.changed and (await get_credit_note(ledger, eur)).status == "issued"


async def test_two_usd_notes_over_the_limit_hold(ledger: AsyncEngine) -> None:
    tight = ApprovalSettings(approvers=SETTINGS.approvers, daily_credit_limit=Decimal("200.00"))
    first = await approved(ledger, "INV-USD-1", "150.00", "case-1")
    second = await approved(ledger, "INV-USD-2", "150.00", "case-2")
    await issue(ledger, first, tight, now=TODAY)
    assert await held_today(ledger, second, tight)
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


async def test_the_two_person_threshold_holds_per_currency(ledger: AsyncEngine) -> None:
    # 300.00 for every currency but yen: 12000 yen (about 80 dollars) needs one approver, not two.
    settings = ApprovalSettings.from_env(
        {"BILLSLEUTH_APPROVERS": ALICE, "BILLSLEUTH_TWO_PERSON_THRESHOLD": "300.00,JPY:30000"}
    )
    yen, _ = await draft_credit_note(
        ledger, case_id="case-jpy", invoice_id="INV-JPY-1", amount=Decimal("12000"),
        root_cause="duplicate_charge", settings=settings, now=TODAY,
    )  # fmt: skip
    dollars, _ = await draft_credit_note(
        ledger, case_id="case-usd", invoice_id="INV-USD-1", amount=Decimal("300.00"),
        root_cause="duplicate_charge", settings=settings, now=TODAY,
    )  # fmt: skip
    assert (yen.needed, dollars.needed) == (1, 2)
    assert approvals_needed(Decimal("30000"), "JPY", settings) == 2  # at the yen threshold: two people


# ---------------------------------------------------------------- on the seeded ledger, end to end

# Seeded customers moved into other currencies, with the finding the auditor makes on each.
EUR_CUSTOMER = "C-0001"  # cancel_not_respected, 174.90 on INV-0001-05
JPY_WHOLE = "C-0070"  # wrong_tax_region, 12.00 on INV-0070-05: twelve yen
JPY_FRACTION = "C-0011"  # timezone_change_date, 26.02 on INV-0011-03: the rules give a fraction of a yen


async def move_to_currency(url: str, moves: dict[str, str]) -> None:
    """Re-denominate whole customers (their invoices too), as a ledger with USD, EUR and JPY holds them."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            for customer_id, currency in moves.items():
                await conn.execute(
                    update(t.customers).where(t.customers.c.id == customer_id).values(currency=currency)
                )
                await conn.execute(
                    update(t.invoices)
                    .where(t.invoices.c.customer_id == customer_id)
                    .values(currency=currency)
                )
    finally:
        await engine.dispose()


@pytest.fixture
def multi_currency_url(seeded_db_url: str) -> str:
    asyncio.run(move_to_currency(seeded_db_url, {EUR_CUSTOMER: "EUR", JPY_WHOLE: "JPY", JPY_FRACTION: "JPY"}))
    return seeded_db_url


def billsleuth(*args: str) -> Done:
    return cli.billsleuth(*args)


def test_audit_json_findings_carry_their_currency(multi_currency_url: str) -> None:
    done = billsleuth("audit", "--all", "--json")
    assert done.returncode == 0, done.stderr
    findings = {f["customer_id"]: f for f in json.loads(done.stdout)["findings"]}
    assert {c: findings[c]["currency"] for c in (EUR_CUSTOMER, JPY_WHOLE, JPY_FRACTION, "C-0019")} == {
        EUR_CUSTOMER: "EUR",
        JPY_WHOLE: "JPY",
        JPY_FRACTION: "JPY",
        "C-0019": "USD",
    }
    # Never rounded to whole yen: the auditor reports what the rules give.
    assert (findings[JPY_WHOLE]["overcharge"], findings[JPY_FRACTION]["overcharge"]) == ("12.00", "26.02")


def test_audit_totals_are_per_currency(multi_currency_url: str) -> None:
    done = billsleuth("audit", "--all")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    usd = [row for row in lines if row.startswith("C-") and row.endswith(" USD")]
    usd_total = sum((Decimal(row.split()[-2]) for row in usd), Decimal(0))
    assert any(row.startswith("C-0070") and row.endswith(" 12 JPY") for row in lines)
    assert any(row.startswith("C-0011") and row.endswith(" 26.02 JPY") for row in lines)
    totals = lines[lines.index(next(x for x in lines if x.startswith("total: "))) :]
    # Every scenario's overcharge, and the second one on each two-fault account.
    overcharged = [
        (s.ledger.customer.id, invoice_id)
        for s in generate(DEFAULT_SEED)
        for invoice_id in [
            *(s.truth.invoice_ids[:1] if s.truth.root_cause != "no_error" else []),
            *(other.invoice_id for other in s.truth.other_findings or ()),
        ]
    ]
    findings, customers = len(overcharged), len({customer for customer, _ in overcharged})
    assert totals == [
        f"total: {findings} findings on {customers} customers",
        "  EUR: 1 finding, overcharge 174.90 EUR",
        "  JPY: 2 findings, overcharge 38.02 JPY (1 not expressible in JPY: no credit note can be drafted)",
        f"  USD: {findings - 3} findings, overcharge {usd_total:.2f} USD",
    ]


SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "default"
FINANCE = "U0FIN0001"


def question_of(customer_id: str) -> str:
    found = (json.loads(p.read_text()) for p in sorted(SCENARIOS.glob("S*.json")))
    return next(s["question"] for s in found if s["customer_id"] == customer_id)


@pytest.fixture
async def service(multi_currency_url: str) -> AsyncIterator[CaseService]:
    settings = ApprovalSettings(approvers=frozenset({FINANCE}))
    async with case_service(multi_currency_url, Configuration(investigator="offline"), settings) as svc:
        yield svc


async def test_case_json_list_and_reply_carry_the_currency(service: CaseService) -> None:
    eur = await service.open_case(question_of(EUR_CUSTOMER), requester="U0SUPPORT1", customer_id=EUR_CUSTOMER)
    jpy = await service.open_case(question_of(JPY_WHOLE), requester="U0SUPPORT1", customer_id=JPY_WHOLE)
    assert (eur["credit_note"]["amount"], eur["credit_note"]["currency"]) == ("174.90", "EUR")
    assert (jpy["credit_note"]["amount"], jpy["credit_note"]["currency"]) == ("12.00", "JPY")

    listed = billsleuth("list")
    assert listed.returncode == 0, listed.stderr
    assert "174.90 EUR" in listed.stdout and "12 JPY" in listed.stdout
    rows = json.loads(billsleuth("list", "--json").stdout)["credit_notes"]
    assert {r["id"]: r["currency"] for r in rows} == {
        eur["credit_note"]["id"]: "EUR",
        jpy["credit_note"]["id"]: "JPY",
    }
    shown = billsleuth("case", "show", jpy["case_id"])
    assert f"credit note {jpy['credit_note']['id']}: 12 JPY on INV-0070-05" in shown.stdout

    _, issued = await service.decide(jpy["credit_note"]["id"], approver=FINANCE, decision="approve")
    assert issued["status"] == "issued"  # the addendum's "12 JPY" is grounded: 12 == 12.00
    addendum = issued["reply"]["customer_message"].split("\n\n")[-1]
    assert "for 12 JPY" in addendum


async def test_a_fraction_of_a_yen_escalates_the_case(service: CaseService) -> None:
    case = await service.open_case(
        question_of(JPY_FRACTION), requester="U0SUPPORT1", customer_id=JPY_FRACTION
    )
    assert case["status"] == "escalated" and case["credit_note"] is None
    assert "currency_minor_unit" in case["escalation_reason"]


RECOMPUTE_JPY = RecomputationView(
    "INV-0070-05", date(2026, 5, 1), date(2026, 6, 1), True,
    Decimal("12000.00"), Decimal("12000.00"), Decimal("24000.00"), Decimal("0"),
)  # fmt: skip


def test_the_card_shows_amounts_in_the_notes_currency() -> None:
    note = CardNote("CN-0001", "INV-0070-05", Decimal("12000.00"), "Charged twice", "draft", 0, 1, TODAY)
    card = credit_note_card(
        CreditNoteCardView(
            case_id="CASE-0001",
            customer=CustomerView("C-0070", "Tanaka", "JPY"),
            complaint="charged twice",
            requested_by="U0SUPPORT",
            conclusion=ConclusionView("duplicate_charge", Decimal("12000.00"), "Two payments."),
            recompute=RecomputationView(
                "INV-0070-05",
                date(2026, 5, 1),
                date(2026, 6, 1),
                True,
                Decimal("12000.00"),
                Decimal("12000.00"),
                Decimal("24000.00"),
                Decimal("0"),
            ),
            tool_trail=[],
            credit_note=note,
            revision=0,
        )
    )
    text = json.dumps(card.blocks, ensure_ascii=False)
    assert "12000 JPY" in card.text
    assert "12000 JPY" in text and "24000 JPY" in text and "12000.00" not in text
