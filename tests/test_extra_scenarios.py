"""The scenarios after the first 100 (S101…) check themselves as the 100 do: every overcharge is recomputed
with the reference engine, independently of the injectors that claim it; the complaint is read the way
the agent reads it and points where its kind says; a named customer is the only one its words fit. And
the first 100 stay exactly what they were for every seed. Pure (no database)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from decimal import Decimal

import pytest

from agent.auditor.audit import audit_customer, investigate
from agent.cases.customers import EMAIL, Candidate, FoundBy, by_name
from agent.cases.intake import parse_complaint, quoted_customer_ids
from engine.billing import build_invoices
from engine.model import CustomerLedger, PriceBook
from engine.money import ZERO, money, total
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from scenarios.dataset import generate
from scenarios.extra_kinds import (
    EXTRA_VARIANTS,
    FIRST_INDEX,
    PER_VARIANT,
    SCENARIOS_PER_SEED,
    extra_scenarios,
    make_extra_scenario,
)
from scenarios.faults import INJECTORS, ScenarioLedger
from scenarios.generator import AS_OF, DEFAULT_SCENARIOS_DIR, DEFAULT_SEED, Scenario, scenario_json
from scenarios.store import contact_email, ledger_rows

SEEDS = [DEFAULT_SEED, 1, 2, 3, 42, 2024]
BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))
CJK = re.compile(r"[\u4e00-\u9fff]")

# The first 100 scenarios of these seeds — files and ledger rows — as they were before the extra kinds
# existed (computed on the commit before them). The demo, the committed files and outside checks rely on
# them: a change here must be on purpose.
FIRST_HUNDRED = {
    7: "534e795ed1ff093cd9a3359b3d1383d06ff61513fb0308e4426be73297fbc519",
    3: "9f78af0e47478a0b95698bf39a6f4aaf9fdfc5daabc95617a49dd9e1bad51385",
    2024: "7d573419119f99b25a2db979b8231bedfd07e7599faa3673723ea3a18ad36a27",
}


def digest(scenarios: list[Scenario]) -> str:
    """The scenario files and every ledger row they write, as one hash."""
    rows = ledger_rows([s.ledger for s in scenarios])
    # line_no (migration 0014) is the line's place, which the -L<n> of its id already says: left out, so
    # the hashes taken before it existed still hold.
    tables = [
        [[item for item in row.items() if item[0] != "line_no"] for row in table]
        for _, table in rows.by_table()
    ]
    data = [[scenario_json(s) for s in scenarios], tables]
    return hashlib.sha256(json.dumps(data, default=str, sort_keys=True).encode()).hexdigest()


def extras(seed: int) -> list[Scenario]:
    return generate(seed)[FIRST_INDEX - 1 :]


def overpaid(ledger: ScenarioLedger) -> dict[str, Decimal]:
    """Every invoice paid beyond what the rules say, and by how much: the engine's word alone."""
    sub = ledger.subscription
    coupon = COUPONS[sub.coupon_id] if sub.coupon_id else None
    correct = {
        inv.period_start: inv for inv in build_invoices(ledger.customer, sub, PLANS, coupon, TAX_RATES, AS_OF)
    }
    found = {}
    for inv in ledger.invoices:
        paid = total(p.amount for p in ledger.payments if p.invoice_id == inv.id and p.status == "succeeded")
        is_extra = inv.id.endswith("D") or inv.period_start not in correct
        due = ZERO if is_extra else correct[inv.period_start].total
        if money(paid - due) > ZERO:
            found[inv.id] = money(paid - due)
    return found


def amounts_on_account(ledger: ScenarioLedger) -> set[Decimal]:
    amounts = {p.amount for p in ledger.payments}
    for inv in ledger.invoices:
        amounts |= {inv.total, inv.subtotal, inv.discount, inv.tax, *(abs(ln.amount) for ln in inv.lines)}
    return amounts


@pytest.mark.parametrize("seed", FIRST_HUNDRED)
def test_the_first_hundred_are_exactly_what_they_were(seed: int) -> None:
    assert digest(generate(seed)[: FIRST_INDEX - 1]) == FIRST_HUNDRED[seed]


@pytest.mark.parametrize("seed", SEEDS)
def test_every_seed_gets_each_extra_kind_after_the_hundred(seed: int) -> None:
    scenarios = extras(seed)
    assert len(generate(seed)) == SCENARIOS_PER_SEED
    numbers = range(FIRST_INDEX, SCENARIOS_PER_SEED + 1)
    assert [s.id for s in scenarios] == [f"S{i:03d}" for i in numbers]
    assert [s.ledger.customer.id for s in scenarios] == [f"C-{i:04d}" for i in numbers]
    assert Counter(s.kind for s in scenarios) == dict.fromkeys(EXTRA_VARIANTS, PER_VARIANT)
    assert [s.to_json() for s in scenarios] == [s.to_json() for s in extra_scenarios(seed)]


def test_extra_kinds_are_deterministic_and_differ_between_seeds() -> None:
    again = extras(DEFAULT_SEED)
    assert [s.to_json() for s in again] == [s.to_json() for s in extras(DEFAULT_SEED)]
    assert [s.ledger for s in again] == [s.ledger for s in extras(DEFAULT_SEED)]
    assert [s.kind for s in extras(3)] != [s.kind for s in again]
    assert [s.question for s in extras(3)] != [s.question for s in again]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_truth_is_every_overcharge_the_engine_finds(seed: int) -> None:
    problems = []
    for s in extras(seed):
        truth = s.truth
        claimed = {f.invoice_id: f.overcharge for f in truth.other_findings or ()}
        if truth.root_cause != "no_error":
            claimed[truth.invoice_ids[0]] = truth.overcharge
        if overpaid(s.ledger) != claimed:
            problems.append(f"{s.id} {s.kind}: the engine says {overpaid(s.ledger)}, the truth {claimed}")
        # The auditor (which never sees the truth) names the same invoices, causes and amounts.
        ledger = CustomerLedger(
            s.ledger.customer, [s.ledger.subscription], s.ledger.invoices, s.ledger.payments
        )
        audited = {(f.invoice_id, f.root_cause, f.overcharge) for f in audit_customer(ledger, BOOK, AS_OF)}
        expected = {(o.invoice_id, o.root_cause, o.overcharge) for o in truth.other_findings or ()}
        if truth.root_cause != "no_error":
            expected.add((truth.invoice_ids[0], truth.root_cause, truth.overcharge))
        if audited != expected:
            problems.append(f"{s.id} {s.kind}: the auditor finds {audited}, the truth says {expected}")
        owed = truth.root_cause != "no_error"
        if truth.expected_action != ("credit_note" if owed else "explain_only"):
            problems.append(f"{s.id}: action {truth.expected_action} for {truth.root_cause}")
        others = len(truth.other_findings or ())
        if truth.other_findings is None or others != (1 if s.kind == "two_faults" else 0):
            problems.append(f"{s.id} {s.kind}: other_findings {truth.other_findings}")
        if s.kind.startswith(("two_faults", "asked_")) and truth.root_cause not in INJECTORS:
            problems.append(f"{s.id} {s.kind}: no overcharge to find")
    assert problems == []


def complaint_problems(s: Scenario) -> list[str]:
    """Where the complaint points, read as the agent reads it (agent.cases.intake)."""
    ledger, truth = s.ledger, s.truth
    asked = parse_complaint(s.question)
    target = ledger.invoice(truth.invoice_ids[0])
    overcharged = set(overpaid(ledger))
    correct = [inv for inv in ledger.invoices if inv.id not in overcharged]
    overcharged_months = {ledger.invoice(i).issued_at.month for i in overcharged}
    problems = []
    if bool(CJK.search(s.question)) != (ledger.customer.country == "CN"):
        problems.append("complaint in the wrong language")
    if asked.customer_id is not None:
        problems.append(f"the complaint carries a customer id {asked.customer_id}")
    if s.kind in ("two_faults", "customer_by_name", "customer_by_email"):
        if (asked.month, asked.amount) != (target.issued_at.month, target.total):
            problems.append(f"does not name {target.id}'s month and total")
    elif s.kind == "asked_wrong_month":
        if asked.amount is not None or asked.month is None or asked.month in overcharged_months:
            problems.append("names an amount, or no month, or an overcharged invoice's month")
        elif not any(inv.issued_at.month == asked.month for inv in correct):
            problems.append("names a month without an invoice")
    elif s.kind == "asked_wrong_amount":
        if asked.month is not None or asked.amount is None or asked.amount in amounts_on_account(ledger):
            problems.append("names a month, or no amount, or an amount on the account")
    elif s.kind == "asked_correct_invoice":
        fits = [inv for inv in correct if (inv.issued_at.month, inv.total) == (asked.month, asked.amount)]
        if not fits or asked.month in overcharged_months:
            problems.append("does not name a correct invoice's month and total")
        if asked.amount in {target.total, truth.overcharge}:
            problems.append("its amount also points at the overcharged invoice")
    return [f"{s.id} {s.kind}: {p}: {s.question!r}" for p in problems]


@pytest.mark.parametrize("seed", SEEDS)
def test_complaints_point_where_their_kind_says(seed: int) -> None:
    assert [p for s in extras(seed) for p in complaint_problems(s)] == []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_offline_auditor_answers_the_truth_whatever_the_complaint_points_at(seed: int) -> None:
    wrong = []
    for s in extras(seed):
        ledger = CustomerLedger(
            s.ledger.customer, [s.ledger.subscription], s.ledger.invoices, s.ledger.payments
        )
        result = investigate(ledger, BOOK, AS_OF, parse_complaint(s.question).asked)
        got = (result.root_cause, result.invoice_ids[0], result.overcharge, result.expected_action)
        want = (s.truth.root_cause, s.truth.invoice_ids[0], s.truth.overcharge, s.truth.expected_action)
        if got != want:
            wrong.append(f"{s.id} {s.kind}: {got} != {want}")
    assert wrong == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_named_customer_is_the_only_one_its_words_fit(seed: int) -> None:
    everyone = generate(seed)
    candidates = [
        Candidate(s.ledger.customer.id, s.ledger.customer.name, s.ledger.customer.country) for s in everyone
    ]
    emails = Counter(contact_email(s.ledger.customer.id, s.ledger.customer.name) for s in everyone)
    named = [s for s in everyone if s.named_by is not None]
    assert Counter(s.named_by for s in named) == {"name": PER_VARIANT, "email": PER_VARIANT}
    for s in named:
        customer = s.ledger.customer
        assert s.kind == f"customer_by_{s.named_by}"
        # No seed id anywhere, not even inside another word; and none the bot or intake would recognise.
        assert re.search(r"C-\d{4,6}", s.question, re.IGNORECASE) is None, s.question
        assert quoted_customer_ids(s.question) == [], s.question
        assert not re.search(r"\d", customer.name)  # a company name, not the dataset's numbered ones
        if s.named_by == "name":
            match = by_name(candidates, s.question)
            assert (match.found_by, match.customer) == (FoundBy.NAME, candidates[everyone.index(s)])
        else:
            email = contact_email(customer.id, customer.name)
            assert customer.country != "CN" and EMAIL.findall(s.question) == [email]
            assert emails[email] == 1
    assert len({s.ledger.customer.name for s in named}) == len(named)


def test_the_committed_extra_files_carry_their_new_keys() -> None:
    for path in sorted(DEFAULT_SCENARIOS_DIR.glob("S*.json"))[FIRST_INDEX - 1 :]:
        data = json.loads(path.read_text(encoding="utf-8"))
        variant = data["truth"]["variant"]
        assert variant in EXTRA_VARIANTS
        named = {"customer_by_name": "name", "customer_by_email": "email"}.get(variant)
        assert data.get("customer_named_by") == named
        assert set(data) == {"id", "customer_id", "as_of", "question", "truth"} | (
            {"customer_named_by"} if named else set()
        )
        others = data["truth"]["other_findings"]
        assert len(others) == (1 if variant == "two_faults" else 0)
        assert all(set(o) == {"invoice_id", "root_cause", "overcharge"} for o in others)


def test_unknown_extra_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenario kind 'nope'"):
        make_extra_scenario(DEFAULT_SEED, FIRST_INDEX, "nope")
