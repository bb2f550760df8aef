"""The deterministic auditor against the benchmark's ground truth: the default 100 scenarios and four
other seeds. The auditor sees only the ledger (as the database would hold it); the truth is read here."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import pytest

from agent.auditor.audit import NO_ERROR, ROOT_CAUSES, audit_customer, has_overpaid_invoice, investigate
from agent.cases.intake import parse_complaint
from engine.model import CustomerLedger, PriceBook
from engine.money import fmt
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from scenarios.faults import INJECTORS, ScenarioLedger
from scenarios.generator import AS_OF, DEFAULT_SEED, make_scenario, scenario_kinds

BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))
SEEDS = (DEFAULT_SEED, 1, 2, 3, 42)
CASES = [(seed, index, kind) for seed in SEEDS for index, kind in enumerate(scenario_kinds(seed), start=1)]


def as_customer_ledger(ledger: ScenarioLedger) -> CustomerLedger:
    """What the database hands the auditor: the ledger only, no truth."""
    return CustomerLedger(
        ledger.customer, [ledger.subscription], list(ledger.invoices), list(ledger.payments)
    )


def headers_only(ledger: CustomerLedger) -> CustomerLedger:
    """The sweep's screen sees invoices without their lines."""
    invoices = [replace(inv, lines=[]) for inv in ledger.invoices]
    return replace(ledger, invoices=invoices)


def test_the_auditor_knows_exactly_the_twelve_root_causes() -> None:
    assert set(ROOT_CAUSES) == set(INJECTORS)
    assert len(CASES) == 500


@pytest.mark.parametrize(("seed", "index", "kind"), CASES, ids=[f"seed{s}-S{i:03d}-{k}" for s, i, k in CASES])
def test_audit_finds_exactly_the_injected_fault(seed: int, index: int, kind: str) -> None:
    scenario_ledger, truth, _ = make_scenario(seed, index, kind)
    ledger = as_customer_ledger(scenario_ledger)
    findings = audit_customer(ledger, BOOK, AS_OF)
    # The sweep's cheap screen must flag exactly the customers the full audit has findings for.
    assert has_overpaid_invoice(ledger, BOOK, AS_OF) is has_overpaid_invoice(
        headers_only(ledger), BOOK, AS_OF
    )
    assert has_overpaid_invoice(ledger, BOOK, AS_OF) is bool(findings)
    if truth.root_cause == NO_ERROR:
        assert findings == []
        return
    assert [(f.invoice_id, f.root_cause, f.overcharge) for f in findings] == [
        (truth.invoice_ids[0], truth.root_cause, truth.overcharge)
    ]
    evidence = " | ".join(findings[0].evidence)
    assert f"overcharge {fmt(truth.overcharge)}" in evidence
    assert "does not give the billed total" not in evidence  # the bug reproduced the bill to the cent
    billed = next(inv for inv in scenario_ledger.invoices if inv.id == truth.invoice_ids[0])
    assert f"billed {fmt(billed.total)}" in evidence


@pytest.mark.parametrize(("seed", "index", "kind"), CASES, ids=[f"seed{s}-S{i:03d}-{k}" for s, i, k in CASES])
def test_investigate_answers_the_complaint(seed: int, index: int, kind: str) -> None:
    scenario_ledger, truth, question = make_scenario(seed, index, kind)
    complaint = parse_complaint(question)
    result = investigate(as_customer_ledger(scenario_ledger), BOOK, AS_OF, complaint.asked)
    assert (result.root_cause, result.invoice_ids[0], result.overcharge, result.expected_action) == (
        truth.root_cause,
        truth.invoice_ids[0],
        truth.overcharge,
        truth.expected_action,
    )
    assert result.reasoning and result.evidence
    if truth.root_cause == NO_ERROR:
        assert result.overcharge == Decimal("0.00")
        # The variant names what the customer is probably asking about. A tax_line invoice that is also
        # the first one after a coupon ended may be explained by the coupon; the tax is still shown.
        assert result.variant == kind or (kind == "tax_line" and any("tax " in e for e in result.evidence))
    else:
        assert result.variant is None
        assert fmt(truth.overcharge) in result.reasoning


def test_investigate_without_a_month_or_amount_still_finds_the_overcharge() -> None:
    scenario_ledger, truth, _ = make_scenario(DEFAULT_SEED, 11, scenario_kinds()[10])
    result = investigate(as_customer_ledger(scenario_ledger), BOOK, AS_OF)
    assert (result.root_cause, result.invoice_ids, result.overcharge) == (
        truth.root_cause,
        truth.invoice_ids,
        truth.overcharge,
    )


def test_duplicate_invoice_names_the_extra_copy_first_then_the_original() -> None:
    index = scenario_kinds().index("duplicate_invoice") + 1
    scenario_ledger, truth, _ = make_scenario(DEFAULT_SEED, index, "duplicate_invoice")
    result = investigate(as_customer_ledger(scenario_ledger), BOOK, AS_OF)
    copy_id = truth.invoice_ids[0]
    assert copy_id.endswith("D")
    assert result.invoice_ids == [copy_id, copy_id.removesuffix("D")]


def test_the_seed_002_example_s011_is_a_timezone_bug_of_26_02() -> None:
    """Seed 002's worked example: INV-0011-03 overcharged 26.02 because the upgrade was dated in UTC."""
    scenario_ledger, _, _ = make_scenario(DEFAULT_SEED, 11, scenario_kinds()[10])
    [finding] = audit_customer(as_customer_ledger(scenario_ledger), BOOK, AS_OF)
    assert (finding.invoice_id, finding.root_cause, finding.overcharge) == (
        "INV-0011-03",
        "timezone_change_date",
        Decimal("26.02"),
    )
    assert any("2026-07-14, the UTC date" in e and "local date 2026-07-15" in e for e in finding.evidence)
    assert finding.as_json()["overcharge"] == "26.02"


def test_periods_after_as_of_are_not_judged() -> None:
    index = scenario_kinds().index("wrong_plan_price") + 1
    scenario_ledger, truth, _ = make_scenario(DEFAULT_SEED, index, "wrong_plan_price")
    target = next(inv for inv in scenario_ledger.invoices if inv.id == truth.invoice_ids[0])
    ledger = as_customer_ledger(scenario_ledger)
    assert audit_customer(ledger, BOOK, target.issued_at) != []
    assert audit_customer(ledger, BOOK, date.fromordinal(target.issued_at.toordinal() - 1)) == []
