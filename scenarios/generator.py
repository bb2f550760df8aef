"""The benchmark's first 100 billing disputes, 80 with a fault and 20 where the bill is right (the kinds
that go beyond one complaint about one invoice build on them: scenarios/extra_kinds.py, S101 on; the whole
dataset and its files: scenarios/dataset.py).

Each scenario is one customer with one subscription. Its correct ledger comes from the reference engine;
then one fault is injected (or none), the customer pays what the invoices say, and a complaint is written
from templates. Everything is drawn from seeded random generators, so a seed always gives the same
dataset; DEFAULT_SEED reproduces seed 002's dataset figure for figure (its S001 is C-0001,
cancel_not_respected, 174.90).

Pure: no database, no files.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from engine.billing import add_months, build_invoices
from engine.model import Customer, Event, Subscription
from engine.money import fmt
from engine.pricebook import COUNTRY_TZ, COUPONS, PLANS, TAX_RATES
from engine.profiles import CLOUDLEDGER, RulesProfile
from scenarios.faults import INJECTORS, ScenarioLedger, Truth, no_error

DEFAULT_SEED = 7
AS_OF = date(2026, 10, 15)
DEFAULT_SCENARIOS_DIR = Path(__file__).resolve().parent / "default"

# 80 faulty: the twelve kinds in turn, so the first eight get 7 scenarios and the last four 6.
FAULTY_KINDS: list[str] = [kind for _ in range(7) for kind in INJECTORS][:80]
BENIGN_KINDS: tuple[str, ...] = ("upgrade_proration", "tax_line", "coupon_ended", "annual_renewal")
KINDS_PER_BENIGN = 5
BASE_SCENARIOS = len(FAULTY_KINDS) + len(BENIGN_KINDS) * KINDS_PER_BENIGN  # S001…S100

# Faults that only show in some regions (an expired rate exists only for US; the time zone bug needs a
# zone ahead of UTC so that early-morning local times fall on the previous UTC day).
COUNTRIES_FOR: dict[str, list[str]] = {
    "expired_tax_rate": ["US"],
    "wrong_tax_region": ["CN", "SG", "US"],
    "timezone_change_date": ["CN", "SG"],
}
ALL_COUNTRIES = ["CN", "SG", "DE", "US"]

# Both lists must keep the same length: the name is drawn with rng.choice, and the draw consumed must
# not depend on the country, or every later figure of the scenario would change.
CN_NAMES = [
    "星河咨询", "青禾设计", "鲸落科技", "半山书局", "白桦会计", "木棉旅行", "知更教育",
    "远山建筑", "清泉茶业", "松果影像", "云杉物流", "稻香餐饮", "蓝鲸数据", "晨光印务",
]  # fmt: skip
INTL_NAMES = [
    "Bluefin Labs", "Northwind Studio", "Kestrel Analytics", "Helio Freight", "Orchid Dental",
    "Quartz Legal", "Lumen Bakery", "Alder Robotics", "Juniper Health", "Copperleaf Media",
    "Tidewater Logistics", "Marigold Events", "Basalt Security", "Fernhill Architects",
]  # fmt: skip
assert len(CN_NAMES) == len(INTL_NAMES)


@dataclass(frozen=True)
class Scenario:
    id: str  # S001
    kind: str  # the fault injected, the benign variant, or one of scenarios.extra_kinds' variants
    seed: int
    ledger: ScenarioLedger
    truth: Truth
    question: str
    # "name" or "email": the question names the customer that way and carries no id, so the case is
    # opened without one and the customer found from the words. None: opened with customer_id.
    named_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Seed 002's scenario file shape; the scenarios after the first 100 add `customer_named_by` where
        it applies and `truth.other_findings` (the first 100's files stay exactly as they were)."""
        data: dict[str, Any] = {
            "id": self.id,
            "customer_id": self.ledger.customer.id,
            "as_of": AS_OF.isoformat(),
            "question": self.question,
        }
        if self.named_by is not None:
            data["customer_named_by"] = self.named_by
        truth: dict[str, Any] = {
            "root_cause": self.truth.root_cause,
            "variant": self.kind,
            "invoice_ids": list(self.truth.invoice_ids),
            "overcharge": fmt(self.truth.overcharge),
            "expected_action": self.truth.expected_action,
            "detail": self.truth.detail,
        }
        if self.truth.other_findings is not None:
            truth["other_findings"] = [
                {"invoice_id": f.invoice_id, "root_cause": f.root_cause, "overcharge": fmt(f.overcharge)}
                for f in self.truth.other_findings
            ]
        data["truth"] = truth
        return data


def scenario_kinds(seed: int = DEFAULT_SEED) -> list[str]:
    """The kind of scenario 1…100, shuffled by the seed."""
    kinds = FAULTY_KINDS + list(BENIGN_KINDS) * KINDS_PER_BENIGN
    random.Random(seed).shuffle(kinds)
    return kinds


def scenario_rng(seed: int, index: int) -> random.Random:
    # DEFAULT_SEED gives Random(1000 + i), seed 002's own scheme; other seeds land far from it.
    return random.Random((seed - DEFAULT_SEED) * 100_000 + 1000 + index)


# ---------- the correct ledger ----------


def billing_periods(start: date, anchor_day: int, months: int) -> list[tuple[date, date]]:
    periods, period_start = [], start
    while period_start <= AS_OF:
        period_end = add_months(period_start, months, anchor_day)
        periods.append((period_start, period_end))
        period_start = period_end
    return periods


def event_time(
    rng: random.Random, period: tuple[date, date], country: str, early_morning: bool = False
) -> datetime:
    """A local time inside the period, at least two days from either end."""
    start, end = period
    day = start + timedelta(days=rng.randint(2, (end - start).days - 3))
    hour = rng.randint(0, 6) if early_morning else rng.randint(9, 18)
    minute = rng.choice([5, 20, 35, 50])
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZoneInfo(COUNTRY_TZ[country]))


def _customer(rng: random.Random, index: int, kind: str, countries: list[str] | None = None) -> Customer:
    country = rng.choice(countries or COUNTRIES_FOR.get(kind, ALL_COUNTRIES))
    name = rng.choice(CN_NAMES if country == "CN" else INTL_NAMES)
    return Customer(f"C-{index:04d}", f"{name}-{index:03d}", country, "USD", country)


def _subscription(rng: random.Random, index: int, kind: str, customer: Customer) -> Subscription:
    """Draws in seed 002's exact order: anchor, start, plan, seats, the kind's events, the coupon."""
    anchor = rng.randint(1, 28)
    yearly = kind == "annual_renewal"
    if yearly:
        anchor = rng.randint(1, 14)  # so that October 2026's renewal falls before AS_OF
        start = date(2025, 10, anchor)
        plan_id = rng.choice(["team-y", "business-y"])
    else:
        start = date(2026, rng.choice([5, 6]), anchor)
        plan_id = rng.choice(["starter-m", "team-m"])
    seats = rng.randint(3, 12)
    zone = ZoneInfo(COUNTRY_TZ[customer.country])
    created = datetime(start.year, start.month, start.day, 10, 0, tzinfo=zone)
    events = [Event(f"EV-{index:04d}-1", "create", created, {"plan_id": plan_id, "quantity": seats})]
    periods = billing_periods(start, anchor, 12 if yearly else 1)

    def add(event_type: str, period_index: int, payload: dict[str, Any], early: bool = False) -> None:
        at = event_time(rng, periods[period_index], customer.country, early)
        events.append(Event(f"EV-{index:04d}-{len(events) + 1}", event_type, at, payload))

    upgrade_to = "business-m" if plan_id in ("starter-m", "team-m") else plan_id
    if kind == "proration_wrong_days":  # the bug only shows in a period that is not 30 days long
        first_31 = next(j for j in range(len(periods) - 1) if (periods[j][1] - periods[j][0]).days == 31)
        add("upgrade", first_31, {"to_plan": upgrade_to})
    elif kind in ("proration_missing_credit", "coupon_wrong_base", "upgrade_proration"):
        add("upgrade", 1, {"to_plan": upgrade_to})
    elif kind == "timezone_change_date":
        add("upgrade", 1, {"to_plan": upgrade_to}, early=True)
    elif kind == "quantity_change_ignored":
        fewer = rng.randint(1, seats - 1)  # drawn before the event's time, as in seed 002
        add("quantity_change", 1, {"to_quantity": fewer})
    elif kind == "cancel_not_respected":
        add("cancel", len(periods) - 2, {"at_period_end": True})

    if kind == "coupon_wrong_base":
        coupon_id: str | None = "SPRING15"
    elif kind in ("coupon_not_applied", "coupon_ended"):
        coupon_id = rng.choice(["WELCOME20", "LAUNCH10"])
    elif not yearly and rng.random() < 0.25:
        coupon_id = "LAUNCH10"  # a distractor: some customers simply have a coupon
    else:
        coupon_id = None
    return Subscription(f"SUB-{index:04d}", customer.id, start, anchor, coupon_id, events)


def correct_ledger(
    rng: random.Random,
    index: int,
    kind: str,
    countries: list[str] | None = None,
    profile: RulesProfile = CLOUDLEDGER,
) -> ScenarioLedger:
    """`countries`: where the customer may be (default: wherever the kind can happen); `profile`: whose
    billing rules bill it (engine.profiles: STRIPE for a customer said as Stripe's objects)."""
    customer = _customer(rng, index, kind, countries)
    sub = _subscription(rng, index, kind, customer)
    coupon = COUPONS[sub.coupon_id] if sub.coupon_id else None
    invoices = build_invoices(customer, sub, PLANS, coupon, TAX_RATES, until=AS_OF, profile=profile)
    return ScenarioLedger(customer, sub, dict(PLANS), coupon, list(TAX_RATES), invoices)


# ---------- ground truth for the benign kinds ----------


def benign_truth(kind: str, ledger: ScenarioLedger) -> Truth:
    invoices = ledger.invoices
    if kind == "upgrade_proration":
        invoice = next(inv for inv in invoices if any(ln.kind == "proration" for ln in inv.lines))
        return no_error(
            ledger,
            invoice,
            "The upgrade was prorated correctly: the old plan's unused days credited, "
            "the new plan's remaining days charged",
        )
    if kind == "coupon_ended":
        coupon = ledger.coupon
        assert coupon is not None
        invoice = next(inv for inv in invoices if ledger.months_in(inv) == coupon.duration_months)
        return no_error(
            ledger,
            invoice,
            f"{coupon.id} covers the first {coupon.duration_months} months only and ended on schedule",
        )
    if kind == "annual_renewal":
        return no_error(
            ledger, invoices[-1], "The yearly subscription renewed automatically at the right price"
        )
    if kind == "tax_line":
        return no_error(
            ledger,
            invoices[-1],
            "The extra amount is tax, at the rate valid in the customer's region on the issue date",
        )
    raise ValueError(f"unknown scenario kind {kind!r}")


# ---------- the customer's complaint ----------

SPECIFIC_SHARE = 0.6  # the rest use generic wording that gives no hint of the cause
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


@dataclass(frozen=True)
class Templates:
    month: Callable[[date], str]
    generic: tuple[str, ...]
    specific: dict[str, str]  # kind → wording that points at the symptom


CHINESE = Templates(
    month=lambda d: f"{d.month} 月",
    generic=(
        "你好,我们 {month}的账单扣了 {total} 美元,比我预想的多,能帮忙看看是不是算错了吗?",
        "{month}这张发票金额 {total},我们财务对不上账,麻烦查一下。",
        "为什么 {month}收了我 {total}?感觉不对。",
    ),
    specific={
        "duplicate_charge": "我的信用卡在 {month} {day} 日有两笔 {total} 美元的扣款,是不是扣重了?",
        "duplicate_invoice": "{month}我好像收到了两张一样的发票,钱也扣了两次,每次 {total}。",
        "cancel_not_respected": "我们早就申请取消订阅了,怎么 {month}还扣了 {total} 美元?",
        "quantity_change_ignored": "我们上个月把席位减了,{month}的账单 {total} 好像没变少。",
        "upgrade_proration": (
            "我们升级了套餐,{month}的账单里多了两行「未使用时间退还」和「剩余时间」,"
            "金额 {total},是不是多收了?"
        ),
        "tax_line": "套餐价格明明是固定的,{month}的账单为什么是 {total}?多出来的是什么?",
        "coupon_ended": "{month}的账单突然涨到 {total} 了,我们没改过套餐,怎么回事?",
        "annual_renewal": "{month}突然扣了我们 {total} 美元,金额这么大,是不是扣错了?",
    },
)

ENGLISH = Templates(
    month=lambda d: MONTH_NAMES[d.month - 1],
    generic=(
        "Hi, our {month} invoice charged us ${total}, more than I expected. "
        "Could you check whether it was calculated correctly?",
        "The {month} invoice is ${total} and our finance team can't reconcile it. Could you look into it?",
        "Why were we charged ${total} in {month}? It doesn't look right.",
    ),
    specific={
        "duplicate_charge": "My credit card shows two charges of ${total} on {month} {day}. "
        "Did you charge us twice?",
        "duplicate_invoice": "We seem to have received two identical invoices for {month}, "
        "and we were charged twice, ${total} each time.",
        "cancel_not_respected": "We asked to cancel our subscription a while ago, "
        "so why were we still charged ${total} in {month}?",
        "quantity_change_ignored": "We reduced our seats last month, "
        "but the {month} invoice of ${total} doesn't look any lower.",
        "upgrade_proration": "We upgraded our plan and the {month} invoice of ${total} has two extra lines, "
        '"Unused time" and "Remaining time". Were we overcharged?',
        "tax_line": "Our plan has a fixed price, so why is the {month} invoice ${total}? "
        "What is the extra amount?",
        "coupon_ended": "Our {month} invoice suddenly went up to ${total} and we haven't changed our plan. "
        "What happened?",
        "annual_renewal": "You suddenly charged us ${total} in {month}. That's a lot of money. "
        "Was it a mistake?",
    },
)


def complaint(kind: str, truth: Truth, ledger: ScenarioLedger, rng: random.Random) -> str:
    """What the customer writes: Chinese for customers in CN, English for everyone else.

    Kinds with a wording of their own use it 60% of the time, benign kinds included, so generic wording
    never tells a fault from no fault. Every complaint names the invoice's month and amount.
    """
    invoice = ledger.invoice(truth.invoice_ids[0])
    templates = CHINESE if ledger.customer.country == "CN" else ENGLISH
    values = {
        "month": templates.month(invoice.issued_at),
        "day": invoice.issued_at.day,
        "total": fmt(invoice.total),
    }
    specific = templates.specific.get(kind)
    if specific is not None and rng.random() < SPECIFIC_SHARE:
        return specific.format(**values)
    return rng.choice(templates.generic).format(**values)


# ---------- scenarios ----------


def make_scenario(seed: int, index: int, kind: str) -> tuple[ScenarioLedger, Truth, str]:
    """Scenario `index` (1-based): correct ledger → one fault injected → payments → complaint. No I/O."""
    if kind not in INJECTORS and kind not in BENIGN_KINDS:
        raise ValueError(f"unknown scenario kind {kind!r}")
    rng = scenario_rng(seed, index)
    ledger = correct_ledger(rng, index, kind)
    injector = INJECTORS.get(kind)
    truth = injector(ledger) if injector else benign_truth(kind, ledger)
    ledger.pay_all()  # after injecting: customers pay what the broken invoice says
    return ledger, truth, complaint(kind, truth, ledger, rng)


def base_scenarios(seed: int = DEFAULT_SEED) -> list[Scenario]:
    """S001…S100: one customer, one fault or none, one complaint about that invoice."""
    scenarios = []
    for index, kind in enumerate(scenario_kinds(seed), start=1):
        ledger, truth, question = make_scenario(seed, index, kind)
        scenarios.append(Scenario(f"S{index:03d}", kind, seed, ledger, truth, question))
    return scenarios


def scenario_json(scenario: Scenario) -> str:
    return json.dumps(scenario.to_json(), ensure_ascii=False, indent=2) + "\n"
