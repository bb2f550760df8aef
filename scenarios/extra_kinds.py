"""The scenarios after the first 100 (S101…, customers C-0101…): what one complaint about one faulty
invoice cannot test. Generated for any seed, like the 100, and appended to them by dataset.generate.

- two_faults: two overcharges on different invoices; the complaint names one. The truth is that one, and
  the other is in `other_findings`.
- asked_wrong_month: the complaint names a month whose invoice is right (and no amount); the overcharge
  is on another invoice.
- asked_wrong_amount: the complaint names an amount that appears nowhere on the account (and no month);
  the overcharge is on the invoice it was meant for.
- asked_correct_invoice: the complaint names the month and amount of an invoice that is right; the
  account is overcharged on another.
- customer_by_name, customer_by_email: the complaint names the customer, by a name unique in the ledger or
  by the contact email on file, and carries no id; the case is opened without one.

In the three `asked_*` kinds the truth is the overcharged invoice: a credit note for it, whatever the
customer pointed at. Every scenario draws from its own seeded generator (generator.scenario_rng), so the
first 100 come out exactly as they did before these existed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from itertools import pairwise

from engine.model import Invoice
from engine.money import fmt, money
from scenarios.faults import INJECTORS, OtherFinding, ScenarioLedger, Truth
from scenarios.generator import (
    ALL_COUNTRIES,
    BASE_SCENARIOS,
    BENIGN_KINDS,
    CHINESE,
    COUNTRIES_FOR,
    ENGLISH,
    Scenario,
    Templates,
    benign_truth,
    complaint,
    correct_ledger,
    scenario_rng,
)
from scenarios.store import contact_email

EXTRA_VARIANTS: tuple[str, ...] = (
    "two_faults",
    "asked_wrong_month",
    "asked_wrong_amount",
    "asked_correct_invoice",
    "customer_by_name",
    "customer_by_email",
)
PER_VARIANT = 4
FIRST_INDEX = BASE_SCENARIOS + 1  # S101, C-0101: after the first 100
SCENARIOS_PER_SEED = BASE_SCENARIOS + len(EXTRA_VARIANTS) * PER_VARIANT
NAMED_VARIANTS = {"customer_by_name": "name", "customer_by_email": "email"}

# Fault pairs that land on different invoices of one monthly account (the first of each pair also decides
# how the subscription is built: an upgrade for the proration fault).
FAULT_PAIRS: tuple[tuple[str, str], ...] = (
    ("duplicate_charge", "wrong_plan_price"),
    ("duplicate_charge", "wrong_tax_region"),
    ("duplicate_invoice", "wrong_plan_price"),
    ("proration_missing_credit", "wrong_plan_price"),
)

# Names for the customers the complaint names. Unlike the first 100's ("Helio Freight-004") they carry no
# number and share no word with those lists or each other, so the name as written picks one customer.
NAMED_INTL = [
    "Saffron Row Textiles", "Pinecrest Dairy", "Brightwater Optics", "Cobalt Finch Games",
    "Redwood Harbor Clinic", "Silverline Tutoring", "Amberly Florists", "Granite Peak Outfitters",
    "Nimbus Print Works", "Otterburn Cycles",
]  # fmt: skip
NAMED_CN = [
    "晨曦文创", "竹韵家居", "海棠美业", "北辰仪器", "墨砚文化",
    "橙子零售", "雪松医疗", "银杏农业", "金穗粮油", "琥珀珠宝",
]  # fmt: skip
# Both lists are indexed by the named scenario's rank among all of a seed's named scenarios.
assert min(len(NAMED_INTL), len(NAMED_CN)) >= len(NAMED_VARIANTS) * PER_VARIANT

NAME_SIGN_OFFS = {
    "en": ("{complaint} — {name}", "{complaint}\n\nThanks, {name} accounts team"),
    "zh": ("{complaint}({name}财务)", "{complaint} —— {name}"),
}
EMAIL_LINES = ("From: {email}\n{complaint}", "{complaint} Please reply to {email}.")

WRONG_MONTH = {
    "en": (
        "I think we were overcharged in {month}. Could you check our bill?",
        "Something on our {month} invoice doesn't look right. Were we charged too much?",
    ),
    "zh": ("我们觉得 {month}多收了钱,能帮忙查一下账单吗?", "{month}的账单好像不对,是不是多扣了?"),
}
WRONG_AMOUNT = {
    "en": (
        "Why were we charged ${amount}? That is more than our plan costs.",
        "We were billed ${amount} and it looks too high. Could you check it?",
    ),
    "zh": ("为什么扣了我们 {amount} 美元?比套餐价格高。", "我们被扣了 {amount},感觉多收了,麻烦查一下。"),
}


class NoFit(LookupError):
    """This draw of a ledger cannot carry the scenario (no suitable other invoice): draw again."""


@dataclass(frozen=True)
class Drawn:
    ledger: ScenarioLedger
    truth: Truth
    question: str


def extra_variants(seed: int) -> list[str]:
    """The variant of S101, S102, …, shuffled by the seed (on a stream of its own: the first 100's
    shuffle is untouched)."""
    variants = [variant for variant in EXTRA_VARIANTS for _ in range(PER_VARIANT)]
    random.Random(f"billsleuth extra kinds {seed}").shuffle(variants)
    return variants


def extra_scenarios(seed: int) -> list[Scenario]:
    scenarios, named = [], 0
    for index, variant in enumerate(extra_variants(seed), start=FIRST_INDEX):
        drawn = make_extra_scenario(seed, index, variant, named)
        named += variant in NAMED_VARIANTS
        scenarios.append(
            Scenario(
                f"S{index:03d}",
                variant,
                seed,
                drawn.ledger,
                drawn.truth,
                drawn.question,
                NAMED_VARIANTS.get(variant),
            )
        )
    return scenarios


def make_extra_scenario(seed: int, index: int, variant: str, named: int = 0) -> Drawn:
    """Scenario `index` of an extra variant; `named`: how many named-customer scenarios come before it
    (each takes the next unused name). Pure: no I/O."""
    make = MAKERS.get(variant)
    if make is None:
        raise ValueError(f"unknown scenario kind {variant!r}")
    rng = scenario_rng(seed, index)
    for _ in range(50):  # a draw that cannot carry the scenario is replaced by the next one
        try:
            return make(rng, index, seed, named)
        except NoFit:
            continue
    raise RuntimeError(f"no ledger fits {variant} for seed {seed}, scenario {index}")


# ---------- helpers ----------


def _language(ledger: ScenarioLedger) -> str:
    return "zh" if ledger.customer.country == "CN" else "en"


def _templates(ledger: ScenarioLedger) -> Templates:
    return CHINESE if ledger.customer.country == "CN" else ENGLISH


def _countries(*kinds: str, exclude: str | None = None) -> list[str]:
    """Where every one of these kinds can happen."""
    allowed = [c for c in ALL_COUNTRIES if all(c in COUNTRIES_FOR.get(k, ALL_COUNTRIES) for k in kinds)]
    return [c for c in allowed if c != exclude]


def _single_fault(rng: random.Random, index: int) -> tuple[ScenarioLedger, Truth]:
    """A ledger with one fault of a kind drawn here, paid as billed."""
    kind = rng.choice(list(INJECTORS))
    ledger = correct_ledger(rng, index, kind)
    truth = INJECTORS[kind](ledger)
    ledger.pay_all()
    return ledger, truth


def _paid(ledger: ScenarioLedger, invoice_id: str) -> list[Decimal]:
    return [p.amount for p in ledger.payments if p.invoice_id == invoice_id]


def _amounts_on_account(ledger: ScenarioLedger) -> set[Decimal]:
    """Every amount the customer can see: totals, lines, payments."""
    amounts = {p.amount for p in ledger.payments}
    for invoice in ledger.invoices:
        amounts |= {invoice.total, invoice.subtotal, invoice.discount, invoice.tax}
        amounts |= {abs(line.amount) for line in invoice.lines}
    return amounts


def _correct_invoices(ledger: ScenarioLedger, overcharged: list[str]) -> list[Invoice]:
    """Invoices that are right, issued in a month without an overcharged invoice (so the month alone
    points at them)."""
    months = {ledger.invoice(i).issued_at.month for i in overcharged}
    return [inv for inv in ledger.invoices if inv.id not in overcharged and inv.issued_at.month not in months]


# ---------- the kinds ----------


def two_faults(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    pair = rng.choice(FAULT_PAIRS)
    ledger = correct_ledger(rng, index, pair[0], _countries(*pair))
    first, second = (INJECTORS[kind](ledger) for kind in pair)
    ledger.pay_all()
    if first.invoice_ids[0] == second.invoice_ids[0]:
        raise NoFit("both faults on one invoice")
    asked, other = (first, second) if rng.random() < 0.5 else (second, first)
    asked_invoice, other_invoice = ledger.invoice(asked.invoice_ids[0]), ledger.invoice(other.invoice_ids[0])
    if (
        asked_invoice.total == other_invoice.total
        or asked_invoice.issued_at.month == other_invoice.issued_at.month
    ):
        raise NoFit("the complaint's month and amount would fit both overcharged invoices")
    truth = replace(
        asked,
        detail=f"{asked.detail}. The account is also overcharged elsewhere: {other.detail}",
        other_findings=(OtherFinding(other.invoice_ids[0], other.root_cause, other.overcharge),),
    )
    return Drawn(ledger, truth, complaint(asked.root_cause, asked, ledger, rng))


def asked_wrong_month(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    ledger, truth = _single_fault(rng, index)
    candidates = _correct_invoices(ledger, truth.invoice_ids)
    if not candidates:
        raise NoFit("no correct invoice in another month")
    asked = rng.choice(candidates)
    month = _templates(ledger).month(asked.issued_at)
    question = rng.choice(WRONG_MONTH[_language(ledger)]).format(month=month)
    detail = f"The customer named {asked.id}'s month, which is billed right. {truth.detail}"
    return Drawn(ledger, replace(truth, detail=detail, other_findings=()), question)


def asked_wrong_amount(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    ledger, truth = _single_fault(rng, index)
    meant = ledger.invoice(truth.invoice_ids[0])
    slips = [amount for amount in _slips(meant.total) if amount not in _amounts_on_account(ledger)]
    if not slips:
        raise NoFit("every slip of the total is an amount on the account")
    amount = rng.choice(slips)
    question = rng.choice(WRONG_AMOUNT[_language(ledger)]).format(amount=fmt(amount))
    detail = f"The customer wrote {fmt(amount)}, an amount nowhere on the account. {truth.detail}"
    return Drawn(ledger, replace(truth, detail=detail, other_findings=()), question)


def _slips(total: Decimal) -> list[Decimal]:
    """Amounts a customer might write for this total by mistake: two neighbouring digits swapped, or ten
    off. Positive and different from the total."""
    text = fmt(total)
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    found = []
    for a, b in pairwise(digits):
        chars = list(text)
        chars[a], chars[b] = chars[b], chars[a]
        found.append(Decimal("".join(chars)))
    found += [money(total + Decimal("10.00")), money(total - Decimal("10.00"))]
    unique = sorted(set(found))
    return [amount for amount in unique if amount > 0 and amount != total and not fmt(amount).startswith("0")]


def asked_correct_invoice(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    ledger, truth = _single_fault(rng, index)
    overcharged = ledger.invoice(truth.invoice_ids[0])
    pointing_there = {overcharged.total, truth.overcharge, *_paid(ledger, overcharged.id)}
    candidates = [
        inv
        for inv in _correct_invoices(ledger, truth.invoice_ids)
        if inv.total > 0 and inv.total not in pointing_there
    ]
    if not candidates:
        raise NoFit("no correct invoice with a month and a total of its own")
    asked = rng.choice(candidates)
    templates = _templates(ledger)
    values = {
        "month": templates.month(asked.issued_at),
        "total": fmt(asked.total),
        "day": asked.issued_at.day,
    }
    question = rng.choice(templates.generic).format(**values)
    detail = f"{asked.id}, which the customer asked about, is billed right. {truth.detail}"
    return Drawn(ledger, replace(truth, detail=detail, other_findings=()), question)


def _named_customer(rng: random.Random, index: int, seed: int, named: int, by: str) -> Drawn:
    kind = rng.choice([*INJECTORS, *BENIGN_KINDS])
    # An email address of a Chinese-named customer is made of its id (store.contact_email): not a name.
    countries = _countries(kind, exclude="CN" if by == "email" else None)
    ledger = correct_ledger(rng, index, kind, countries)
    pool = NAMED_CN if ledger.customer.country == "CN" else NAMED_INTL
    name = _shuffled(pool, seed)[named]
    ledger.customer = replace(ledger.customer, name=name)
    injector = INJECTORS.get(kind)
    truth = injector(ledger) if injector else benign_truth(kind, ledger)
    ledger.pay_all()
    words = complaint(kind, truth, ledger, rng)
    if by == "email":
        question = rng.choice(EMAIL_LINES).format(
            complaint=words, email=contact_email(ledger.customer.id, name)
        )
    else:
        written = name.lower() if name.isascii() and rng.random() < 0.5 else name
        question = rng.choice(NAME_SIGN_OFFS[_language(ledger)]).format(complaint=words, name=written)
    detail = f"The customer is named by its {by}, not its id ({kind}). {truth.detail}"
    return Drawn(ledger, replace(truth, detail=detail, other_findings=()), question)


def _shuffled(names: list[str], seed: int) -> list[str]:
    order = list(names)
    random.Random(f"billsleuth named customers {seed}").shuffle(order)
    return order


def customer_by_name(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    return _named_customer(rng, index, seed, named, "name")


def customer_by_email(rng: random.Random, index: int, seed: int, named: int) -> Drawn:
    return _named_customer(rng, index, seed, named, "email")


Maker = Callable[[random.Random, int, int, int], Drawn]
MAKERS: dict[str, Maker] = {
    "two_faults": two_faults,
    "asked_wrong_month": asked_wrong_month,
    "asked_wrong_amount": asked_wrong_amount,
    "asked_correct_invoice": asked_correct_invoice,
    "customer_by_name": customer_by_name,
    "customer_by_email": customer_by_email,
}
assert set(MAKERS) == set(EXTRA_VARIANTS)
