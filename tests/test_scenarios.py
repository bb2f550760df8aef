"""The scenario dataset checks itself: the ground truth is recomputed with the reference engine,
independently of the injectors that claim it. Pure (no database)."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from engine.billing import build_invoices, local_date
from engine.money import ZERO, fmt, money, total
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from scenarios.dataset import generate, write_scenario_files
from scenarios.extra_kinds import SCENARIOS_PER_SEED
from scenarios.faults import INJECTORS, ScenarioLedger, Truth
from scenarios.generator import (
    AS_OF,
    BENIGN_KINDS,
    DEFAULT_SCENARIOS_DIR,
    DEFAULT_SEED,
    MONTH_NAMES,
    base_scenarios,
    make_scenario,
    scenario_json,
    scenario_kinds,
)

DEFAULT_CASES = list(enumerate(scenario_kinds(DEFAULT_SEED), start=1))
OTHER_SEEDS = [1, 2, 3, 42]
CJK = re.compile(r"[\u4e00-\u9fff]")


def dataset_problems(ledger: ScenarioLedger, truth: Truth) -> list[str]:
    """Everything wrong with one scenario, judged by the engine and the built-in price book alone."""
    problems = []
    for inv in ledger.invoices:
        if total(ln.amount for ln in inv.lines) != inv.total:
            problems.append(f"{inv.id}: lines do not sum to the total")
        if inv.total != money(inv.subtotal - inv.discount + inv.tax):
            problems.append(f"{inv.id}: total != subtotal - discount + tax")
    sub = ledger.subscription
    coupon = COUPONS[sub.coupon_id] if sub.coupon_id else None
    correct = {
        inv.period_start: inv for inv in build_invoices(ledger.customer, sub, PLANS, coupon, TAX_RATES, AS_OF)
    }

    def overpaid(inv_id: str) -> Decimal:
        inv = ledger.invoice(inv_id)
        paid = total(p.amount for p in ledger.payments if p.invoice_id == inv_id and p.status == "succeeded")
        is_extra = inv_id.endswith("D") or inv.period_start not in correct
        return money(paid - (ZERO if is_extra else correct[inv.period_start].total))

    target = truth.invoice_ids[0]
    if overpaid(target) != truth.overcharge:
        problems.append(f"{target}: paid - should pay = {overpaid(target)}, truth says {truth.overcharge}")
    # One fault per scenario: every other invoice is paid exactly what the rules say.
    problems += [
        f"{inv.id}: overpaid too" for inv in ledger.invoices if inv.id != target and overpaid(inv.id)
    ]
    if truth.root_cause == "no_error":
        if truth.overcharge != ZERO or truth.expected_action != "explain_only":
            problems.append("benign scenario with an overcharge or a credit note")
    elif truth.overcharge <= ZERO or truth.expected_action != "credit_note":
        problems.append("faulty scenario without a positive overcharge and a credit note")
    return problems


def complaint_problems(ledger: ScenarioLedger, truth: Truth, question: str) -> list[str]:
    inv = ledger.invoice(truth.invoice_ids[0])
    chinese = ledger.customer.country == "CN"
    month = f"{inv.issued_at.month} 月" if chinese else MONTH_NAMES[inv.issued_at.month - 1]
    problems = []
    if fmt(inv.total) not in question or month not in question:
        problems.append(f"complaint does not name {month} and {fmt(inv.total)}: {question}")
    if bool(CJK.search(question)) != chinese:
        problems.append(f"complaint in the wrong language for {ledger.customer.country}: {question}")
    return problems


@pytest.mark.parametrize(("index", "kind"), DEFAULT_CASES, ids=[f"S{i:03d}-{k}" for i, k in DEFAULT_CASES])
def test_default_scenario_is_consistent(index: int, kind: str) -> None:
    ledger, truth, question = make_scenario(DEFAULT_SEED, index, kind)
    assert dataset_problems(ledger, truth) == []
    assert complaint_problems(ledger, truth, question) == []
    assert truth.root_cause == (kind if kind in INJECTORS else "no_error")


@pytest.mark.parametrize("seed", OTHER_SEEDS)
def test_other_seeds_are_consistent(seed: int) -> None:
    problems = []
    for scenario in base_scenarios(seed):  # the extra kinds check themselves in test_extra_scenarios.py
        found = dataset_problems(scenario.ledger, scenario.truth)
        found += complaint_problems(scenario.ledger, scenario.truth, scenario.question)
        problems += [f"{scenario.id} {scenario.kind}: {p}" for p in found]
    assert problems == []


def test_reproduces_seed_002_figures() -> None:
    """Seed 002 publishes S001 in full and asks for S011's 26.02 by hand."""
    scenarios = generate()
    first = scenarios[0].to_json()
    assert first["customer_id"] == "C-0001"
    assert first["question"] == "我们早就申请取消订阅了,怎么 9 月还扣了 174.90 美元?"
    assert first["truth"] | {"detail": ""} == {
        "root_cause": "cancel_not_respected",
        "variant": "cancel_not_respected",
        "invoice_ids": ["INV-0001-05"],
        "overcharge": "174.90",
        "expected_action": "credit_note",
        "detail": "",
    }
    assert "2026-09-25" in first["truth"]["detail"]
    s011 = scenarios[10]
    assert (s011.kind, s011.truth.invoice_ids, s011.truth.overcharge) == (
        "timezone_change_date",
        ["INV-0011-03"],
        Decimal("26.02"),
    )


@pytest.mark.parametrize("seed", [DEFAULT_SEED, *OTHER_SEEDS])
def test_distribution(seed: int) -> None:
    scenarios = base_scenarios(seed)
    assert [s.to_json() for s in scenarios] == [s.to_json() for s in generate(seed)[:100]]
    kinds = Counter(s.kind for s in scenarios)
    assert [kinds[k] for k in INJECTORS] == [7] * 8 + [6] * 4
    assert [kinds[k] for k in BENIGN_KINDS] == [5] * 4
    assert Counter(s.truth.expected_action for s in scenarios) == {"credit_note": 80, "explain_only": 20}
    everyone = generate(seed)
    numbers = range(1, SCENARIOS_PER_SEED + 1)
    assert [s.ledger.customer.id for s in everyone] == [f"C-{i:04d}" for i in numbers]
    assert [s.ledger.subscription.id for s in everyone] == [f"SUB-{i:04d}" for i in numbers]
    assert {s.ledger.customer.country for s in scenarios} == {"CN", "SG", "DE", "US"}


def test_same_seed_same_dataset_and_seeds_differ() -> None:
    first, again = generate(3), generate(3)
    assert [scenario_json(s) for s in first] == [scenario_json(s) for s in again]
    assert [s.ledger for s in first] == [s.ledger for s in again]
    assert all(isinstance(s.truth.overcharge, Decimal) for s in first)
    assert scenario_kinds(3) != scenario_kinds(DEFAULT_SEED)
    assert [scenario_json(s) for s in first] != [scenario_json(s) for s in generate(DEFAULT_SEED)]


def test_complaints_mix_specific_and_generic_wording_for_benign_kinds_too() -> None:
    generic_starts = ("你好,我们", "为什么", "Hi, our", "The ", "Why were")
    benign = [s for seed in (DEFAULT_SEED, *OTHER_SEEDS) for s in generate(seed) if s.kind in BENIGN_KINDS]
    generic = [s for s in benign if s.question.startswith(generic_starts) or "财务对不上账" in s.question]
    assert 0 < len(generic) < len(benign)  # generic wording never gives "no error" away


def test_committed_default_files_equal_a_fresh_regeneration(tmp_path: Path) -> None:
    write_scenario_files(tmp_path, generate(DEFAULT_SEED))
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("S*.json")}
    committed = {p.name: p.read_bytes() for p in DEFAULT_SCENARIOS_DIR.glob("S*.json")}
    assert sorted(committed) == [f"S{i:03d}.json" for i in range(1, SCENARIOS_PER_SEED + 1)]
    assert committed == fresh


def test_scenario_file_shape() -> None:
    data = json.loads((DEFAULT_SCENARIOS_DIR / "S002.json").read_text(encoding="utf-8"))
    assert set(data) == {"id", "customer_id", "as_of", "question", "truth"}
    assert set(data["truth"]) == {
        "root_cause",
        "variant",
        "invoice_ids",
        "overcharge",
        "expected_action",
        "detail",
    }
    assert data["as_of"] == "2026-10-15"
    assert re.fullmatch(r"\d+\.\d\d", data["truth"]["overcharge"])


def _first(kind: str, seed: int = DEFAULT_SEED) -> tuple[ScenarioLedger, Truth]:
    scenario = next(s for s in generate(seed) if s.kind == kind)
    return scenario.ledger, scenario.truth


def test_duplicate_charge_is_a_second_payment_three_minutes_later() -> None:
    ledger, truth = _first("duplicate_charge")
    payments = [p for p in ledger.payments if p.invoice_id == truth.invoice_ids[0]]
    assert [p.id[-2:] for p in payments][1] == "-R"
    assert payments[1].attempted_at - payments[0].attempted_at == timedelta(minutes=3)
    assert all(p.amount == truth.overcharge and p.status == "succeeded" for p in payments)
    assert payments[0].attempted_at.utcoffset() == timedelta(0)


def test_duplicate_invoice_is_a_d_copy_of_the_same_period() -> None:
    ledger, truth = _first("duplicate_invoice")
    copy_ = ledger.invoice(truth.invoice_ids[0])
    original = ledger.invoice(copy_.id.removesuffix("D"))
    assert copy_.id.endswith("D") and copy_.lines == original.lines
    assert ledger.invoices.index(copy_) == ledger.invoices.index(original) + 1


def test_cancel_not_respected_bills_a_period_after_the_cancellation() -> None:
    ledger, truth = _first("cancel_not_respected")
    extra = ledger.invoices[-1]
    assert extra.id == truth.invoice_ids[0]
    assert extra.period_start == ledger.invoices[-2].period_end
    kinds = [ln.kind for ln in extra.lines]
    assert kinds.count("recurring") == 1 and set(kinds) <= {"recurring", "discount", "tax"}
    cancel = next(ev for ev in ledger.subscription.events if ev.type == "cancel")
    billed_last = ledger.invoices[-2]
    cancelled_on = local_date(cancel.effective_at, ledger.customer.country)
    assert billed_last.period_start <= cancelled_on < billed_last.period_end == extra.period_start


def test_timezone_fault_moves_the_proration_start_a_day_early() -> None:
    ledger, truth = _first("timezone_change_date")
    prorations = [ln for ln in ledger.invoice(truth.invoice_ids[0]).lines if ln.kind == "proration"]
    upgrade = next(ev for ev in ledger.subscription.events if ev.type == "upgrade")
    local_day = upgrade.effective_at.date()
    assert upgrade.effective_at.hour <= 6  # early morning local time: the previous day in UTC
    for line in prorations:
        assert line.period_start == local_day - timedelta(days=1)
        assert f"({line.period_start.isoformat()} to " in line.description
    assert prorations[0].description.startswith("Unused time on ")
    assert prorations[1].description.startswith("Remaining time on ")


def test_payments_follow_the_broken_invoices() -> None:
    """Payments are taken after injecting: every invoice's first charge is its (broken) total."""
    for scenario in generate(DEFAULT_SEED):
        first_charge = {}
        for payment in scenario.ledger.payments:
            first_charge.setdefault(payment.invoice_id, payment.amount)
        assert first_charge == {inv.id: inv.total for inv in scenario.ledger.invoices}


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenario kind 'nope'"):
        make_scenario(DEFAULT_SEED, 1, "nope")
