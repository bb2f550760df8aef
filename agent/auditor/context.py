"""What a detector may look at: one overpaid invoice in its customer's ledger (`Context`: the rules'
invoice, the subscription, its coupon, tax rate, plan and seat changes replayed on the customer's local
dates, and a re-bill of the period), what a detector concludes (`Diagnosis`), and how lines read in its
evidence. The detectors themselves are agent/auditor/causes.py. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date
from decimal import Decimal
from functools import cached_property

from engine.billing import (
    CONFIG_CHANGES,
    Instants,
    add_months,
    apply_discount_and_tax,
    local_date,
    months_between,
    proration_instants,
    proration_lines,
    rate_on,
    tax_percent,
)
from engine.diff import InvoiceCheck, most_rounding
from engine.model import (
    CHARGE_KINDS,
    Coupon,
    CustomerLedger,
    Event,
    Invoice,
    Line,
    Plan,
    PriceBook,
    Subscription,
    TaxRate,
)
from engine.money import ZERO, fmt, money
from engine.profiles import RulesProfile, profile_for

Period = tuple[date, date]


@dataclass(frozen=True)
class Diagnosis:
    root_cause: str
    evidence: list[str]
    reproduced: bool  # re-billing the period with this bug gives the billed total to the cent
    related_invoice_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigChange:
    """A plan or seat change, replayed from the subscription's events on the customer's local date."""

    event: Event
    day: date
    old: tuple[Plan, int]
    new: tuple[Plan, int]

    @property
    def utc_day(self) -> date:
        return self.event.effective_at.astimezone(UTC).date()

    @property
    def full_amounts(self) -> tuple[Decimal, Decimal]:
        """A whole period of the old and of the new configuration (what prorations are taken from)."""
        (old_plan, old_qty), (new_plan, new_qty) = self.old, self.new
        return money(old_plan.unit_price * old_qty), money(new_plan.unit_price * new_qty)


def config_changes(sub: Subscription, book: PriceBook, country: str) -> list[ConfigChange]:
    """Replay the plan and seat changes; an unknown plan ends the replay (the rules refuse it anyway)."""
    ordered = sorted(sub.events, key=lambda e: e.effective_at)
    create = next((e for e in ordered if e.type == "create"), None)
    plan = book.plans.get(str(create.payload.get("plan_id"))) if create else None
    if create is None or plan is None:
        return []
    qty = seats_of(create.payload.get("quantity"))
    out: list[ConfigChange] = []
    for event in ordered:
        if event.type not in CONFIG_CHANGES or qty is None:
            continue
        new_plan = book.plans.get(str(event.payload.get("to_plan", plan.id)))
        new_qty = seats_of(event.payload.get("to_quantity", qty))
        if new_plan is None or new_qty is None:
            break
        day = local_date(event.effective_at, country)
        out.append(ConfigChange(event, day, (plan, qty), (new_plan, new_qty)))
        plan, qty = new_plan, new_qty
    return out


def seats_of(value: object) -> int | None:
    """A seat count from an event payload, or None when it is not one (the rules refuse those)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Context:
    """One overpaid invoice, with everything a detector may look at."""

    ledger: CustomerLedger
    book: PriceBook
    check: InvoiceCheck
    billed: Invoice

    @property
    def rules(self) -> Invoice | None:
        """The rules' invoice, when this one should exist but bills more: what line-level bugs look at."""
        check = self.check
        if check.should_exist and check.expected is not None and check.billing_difference > ZERO:
            return check.expected
        return None

    @cached_property
    def profile(self) -> RulesProfile:
        """The rules this ledger is judged by (its source's: engine.profiles)."""
        return profile_for(self.ledger.customer.source)

    @property
    def customer_region(self) -> str:
        return self.ledger.customer.tax_region

    @cached_property
    def subscription(self) -> Subscription | None:
        return next((s for s in self.ledger.subscriptions if s.id == self.billed.subscription_id), None)

    @cached_property
    def coupon(self) -> Coupon | None:
        sub = self.subscription
        return self.book.coupons.get(sub.coupon_id) if sub and sub.coupon_id else None

    @cached_property
    def months_in(self) -> int:
        sub = self.subscription
        return months_between(sub.start_date, self.billed.period_start) if sub else 0

    @cached_property
    def rules_rate(self) -> TaxRate:
        """The rate the rules apply: the customer's region's rate valid on the issue date."""
        return rate_on(self.book.tax_rates, self.customer_region, self.billed.period_start)

    def rate(self, code: str | None) -> TaxRate | None:
        return next((r for r in self.book.tax_rates if r.code == code), None)

    @cached_property
    def changes(self) -> list[ConfigChange]:
        sub = self.subscription
        return config_changes(sub, self.book, self.ledger.customer.country) if sub else []

    @cached_property
    def step(self) -> int:
        """Months per billing period (the interval cannot change within a subscription)."""
        sub = self.subscription
        create = next((e for e in sub.events if e.type == "create"), None) if sub else None
        plan = self.book.plans.get(str(create.payload.get("plan_id"))) if create else None
        return 12 if plan is not None and plan.interval == "year" else 1

    def period_of(self, day: date) -> Period | None:
        """The rules' billing period holding a day (walks from the start: a few dozen steps at most)."""
        sub = self.subscription
        if sub is None or day < sub.start_date:
            return None
        start = sub.start_date
        while True:
            end = add_months(start, self.step, sub.billing_anchor_day)
            if day < end:
                return start, end
            start = end

    @cached_property
    def settled_changes(self) -> list[tuple[ConfigChange, Period]]:
        """Changes made in the period just before this invoice (the rules settle them on it)."""
        out = []
        for change in self.changes:
            period = self.period_of(change.day)
            if period is not None and period[1] == self.billed.period_start:
                out.append((change, period))
        return out

    def rebill(
        self, charges: Iterable[Line], *, rate: TaxRate | None = None, without_coupon: bool = False
    ) -> Invoice:
        """This period billed from these charge lines by the rules' discount and tax steps."""
        invoice = replace(self.billed, lines=[replace(line) for line in charges])
        coupon = None if without_coupon else self.coupon
        apply_discount_and_tax(invoice, coupon, self.months_in, rate or self.rules_rate)
        return invoice

    def reproduces(self, invoice: Invoice) -> bool:
        """Whether a re-bill gives the billed total: to the cent, or within the profile's rounding of
        each billed line where the billing system does not publish its rounding."""
        leeway = most_rounding(self.billed.lines, self.profile.rounding(self.billed.currency))
        return abs(invoice.total - self.billed.total) <= leeway

    def prorations(self, change: ConfigChange, period: Period) -> list[Line]:
        """The proration pair the rules give for a change in a period: by the day, or by the second
        between the period's instants where the profile says so."""
        return proration_lines(change.old, change.new, change.day, period, self._instants(change, period))

    def proration_share(self, change: ConfigChange, period: Period) -> str:
        """How much of the period the rules prorate, as their evidence states it: "12/31" (days) or
        "1036800/2678400 seconds"."""
        instants = self._instants(change, period)
        if instants is None:
            return f"{(period[1] - change.day).days}/{(period[1] - period[0]).days}"
        changed, start, end = (moment.timestamp() for moment in instants)
        return f"{int(end - changed)}/{int(end - start)} seconds"

    def _instants(self, change: ConfigChange, period: Period) -> Instants | None:
        sub = self.subscription
        create = next((e for e in sub.events if e.type == "create"), None) if sub else None
        if sub is None or create is None:
            return None
        return proration_instants(
            self.profile, create.effective_at, sub.start_date, change.event.effective_at, period
        )


# ---------- reading lines ----------


def lines_of(invoice: Invoice, kind: str, sign: int = 0) -> list[Line]:
    """The invoice's lines of a kind; sign -1 / +1 keeps only negative / non-negative amounts."""
    return [
        line for line in invoice.lines if line.kind == kind and (sign == 0 or (line.amount < 0) == (sign < 0))
    ]


def charges_of(invoice: Invoice) -> list[Line]:
    return [line for line in invoice.lines if line.kind in CHARGE_KINDS]


def tax_code_of(invoice: Invoice) -> str | None:
    taxes = lines_of(invoice, "tax")
    return taxes[0].tax_code if taxes else None


def sorted_amounts(lines: Iterable[Line]) -> list[Decimal]:
    return sorted(line.amount for line in lines)


def quote(line: Line) -> str:
    return f"'{line.description}' {fmt(line.amount)}"


def joined(lines: Iterable[Line]) -> str:
    return " and ".join(quote(line) for line in lines)


def percent(rate: TaxRate) -> str:
    return f"{tax_percent(rate.rate)}%"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def paid_amounts(ledger: CustomerLedger, invoice_id: str) -> list[Decimal]:
    return [p.amount for p in ledger.payments if p.invoice_id == invoice_id and p.status == "succeeded"]
