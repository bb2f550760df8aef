"""How each billing bug shows on the ledger: one detector per root cause, checked the way an analyst would.

A detector looks at one invoice the customer overpaid and first looks for its bug's signature: the line
that differs from the rules in the way that bug makes it differ (a 30-day denominator, a proration dated on
the UTC day, a tax code of another region…). It then re-bills the period WITH that bug and checks that it
gives the billed total to the cent. A reproduced diagnosis beats one whose signature is merely present, so
a coincidence on one line cannot outvote the figures. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, timedelta
from decimal import Decimal
from functools import cached_property
from zoneinfo import ZoneInfo

from engine.billing import (
    CONFIG_CHANGES,
    add_months,
    apply_discount_and_tax,
    local_date,
    months_between,
    proration_lines,
    rate_on,
    tax_percent,
)
from engine.diff import InvoiceCheck
from engine.model import (
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
from engine.money import ZERO, fmt, money, total
from engine.pricebook import COUNTRY_TZ

CHARGE_KINDS = ("recurring", "proration", "adjustment")
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
    qty = _seats(create.payload.get("quantity"))
    out: list[ConfigChange] = []
    for event in ordered:
        if event.type not in CONFIG_CHANGES or qty is None:
            continue
        new_plan = book.plans.get(str(event.payload.get("to_plan", plan.id)))
        new_qty = _seats(event.payload.get("to_quantity", qty))
        if new_plan is None or new_qty is None:
            break
        day = local_date(event.effective_at, country)
        out.append(ConfigChange(event, day, (plan, qty), (new_plan, new_qty)))
        plan, qty = new_plan, new_qty
    return out


def _seats(value: object) -> int | None:
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
        return invoice.total == self.billed.total


# ---------- reading lines ----------


def lines_of(invoice: Invoice, kind: str, sign: int = 0) -> list[Line]:
    """The invoice's lines of a kind; sign -1 / +1 keeps only negative / non-negative amounts."""
    return [
        line for line in invoice.lines if line.kind == kind and (sign == 0 or (line.amount < 0) == (sign < 0))
    ]


def charges_of(invoice: Invoice) -> list[Line]:
    return [line for line in invoice.lines if line.kind in CHARGE_KINDS]


def _tax_code(invoice: Invoice) -> str | None:
    taxes = lines_of(invoice, "tax")
    return taxes[0].tax_code if taxes else None


def _amounts(lines: Iterable[Line]) -> list[Decimal]:
    return sorted(line.amount for line in lines)


def quote(line: Line) -> str:
    return f"'{line.description}' {fmt(line.amount)}"


def _joined(lines: Iterable[Line]) -> str:
    return " and ".join(quote(line) for line in lines)


def _percent(rate: TaxRate) -> str:
    return f"{tax_percent(rate.rate)}%"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _paid(ledger: CustomerLedger, invoice_id: str) -> list[Decimal]:
    return [p.amount for p in ledger.payments if p.invoice_id == invoice_id and p.status == "succeeded"]


# ---------- structural faults: an invoice or a payment that should not exist ----------


def duplicate_invoice(ctx: Context) -> Diagnosis | None:
    check = ctx.check
    original_id = check.expected_invoice_id
    if check.should_exist or original_id is None:
        return None
    original = next((inv for inv in ctx.ledger.invoices if inv.id == original_id), None)
    if original is None:
        return None
    evidence = [
        f"{ctx.billed.id} and {original_id} both bill the period {check.period_start} to {check.period_end}; "
        f"the rules give one invoice for it, {original_id}",
        f"{original_id} billed {fmt(original.total)} and was paid "
        f"{fmt(total(_paid(ctx.ledger, original_id)))}",
    ]
    same_lines = [(ln.kind, ln.amount) for ln in ctx.billed.lines] == [
        (ln.kind, ln.amount) for ln in original.lines
    ]
    return Diagnosis("duplicate_invoice", evidence, same_lines, (original_id,))


def cancel_not_respected(ctx: Context) -> Diagnosis | None:
    check, sub = ctx.check, ctx.subscription
    if check.should_exist or check.expected_invoice_id is not None or sub is None:
        return None
    for event in sorted(sub.events, key=lambda e: e.effective_at):
        day = local_date(event.effective_at, ctx.ledger.customer.country)
        period = ctx.period_of(day)
        if event.type != "cancel" or period is None or period[1] > ctx.billed.period_start:
            continue
        evidence = [
            f"cancellation requested on {day} (at period end): the subscription ended on {period[1]}",
            f"{ctx.billed.id} bills the period {check.period_start} to {check.period_end}, after the end",
        ]
        # The bug bills one more period of the last configuration, at the rules' discount and tax.
        last = ctx.changes[-1].new if ctx.changes else _created_config(sub, ctx.book)
        reproduced = False
        if last is not None:
            plan, qty = last
            recurring = Line("recurring", "", qty, plan.unit_price, money(plan.unit_price * qty))
            reproduced = ctx.reproduces(ctx.rebill([recurring]))
        return Diagnosis("cancel_not_respected", evidence, reproduced)
    return None


def _created_config(sub: Subscription, book: PriceBook) -> tuple[Plan, int] | None:
    create = next((e for e in sub.events if e.type == "create"), None)
    plan = book.plans.get(str(create.payload.get("plan_id"))) if create else None
    seats = _seats(create.payload.get("quantity")) if create else None
    return (plan, seats) if plan is not None and seats is not None else None


def duplicate_charge(ctx: Context) -> Diagnosis | None:
    check = ctx.check
    if not check.should_exist or check.billing_difference != ZERO or check.successful_payments < 2:
        return None
    payments = [p for p in ctx.ledger.payments if p.invoice_id == ctx.billed.id and p.status == "succeeded"]
    listed = ", ".join(
        f"{p.id} {fmt(p.amount)} at {p.attempted_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" for p in payments
    )
    evidence = [
        f"{ctx.billed.id} is billed as the rules say ({fmt(check.billed_total)}) but was paid "
        f"{plural(len(payments), 'time')}: {listed}",
    ]
    reproduced = all(p.amount == check.billed_total for p in payments)
    return Diagnosis("duplicate_charge", evidence, reproduced)


# ---------- line-level faults: the right invoice, billed wrong ----------


def quantity_change_ignored(ctx: Context) -> Diagnosis | None:
    rules = ctx.rules
    if rules is None or lines_of(ctx.billed, "proration"):
        return None
    seat_changes = [c for c, _ in ctx.settled_changes if c.event.type == "quantity_change"]
    billed_recurring, rules_recurring = lines_of(ctx.billed, "recurring"), lines_of(rules, "recurring")
    if not seat_changes or not billed_recurring or not rules_recurring:
        return None
    old_qty, new_qty = seat_changes[0].old[1], seat_changes[-1].new[1]
    if old_qty == new_qty or any(line.quantity != old_qty for line in billed_recurring):
        return None
    evidence = [
        f"seat change on {seat_changes[-1].day}: {old_qty} → {new_qty} seats",
        f"{ctx.billed.id} still bills {old_qty} seats: {quote(billed_recurring[0])}; "
        f"the rules give {quote(rules_recurring[0])}",
    ]
    rules_prorations = lines_of(rules, "proration")
    if rules_prorations:
        evidence.append(f"no proration for the change; the rules settle it with {_joined(rules_prorations)}")
    # The bug: the old seat count kept, the change never settled.
    charges = [
        replace(line, quantity=old_qty, amount=money(line.unit_amount * old_qty))
        if line.kind == "recurring"
        else line
        for line in charges_of(rules)
        if line.kind != "proration"
    ]
    return Diagnosis("quantity_change_ignored", evidence, ctx.reproduces(ctx.rebill(charges)))


def wrong_plan_price(ctx: Context) -> Diagnosis | None:
    rules = ctx.rules
    if rules is None:
        return None
    billed, wanted = lines_of(ctx.billed, "recurring"), lines_of(rules, "recurring")
    if not billed or len(billed) != len(wanted):
        return None
    pairs = list(zip(billed, wanted, strict=True))
    if any(b.quantity != r.quantity for b, r in pairs):
        return None
    off_price = [(b, r) for b, r in pairs if b.unit_amount != r.unit_amount]
    if not off_price:
        return None
    evidence = [
        f"recurring line '{b.description}' charges {fmt(b.unit_amount)} a seat × {b.quantity} = "
        f"{fmt(b.amount)}; the price book's price is {fmt(r.unit_amount)} a seat ({fmt(r.amount)})"
        for b, r in off_price
    ]
    billed_for = {id(r): b for b, r in pairs}
    charges = [billed_for.get(id(line), line) for line in charges_of(rules)]
    return Diagnosis("wrong_plan_price", evidence, ctx.reproduces(ctx.rebill(charges)))


def proration_missing_credit(ctx: Context) -> Diagnosis | None:
    rules = ctx.rules
    if rules is None:
        return None
    rules_credits, rules_charges = lines_of(rules, "proration", -1), lines_of(rules, "proration", 1)
    if not rules_credits or lines_of(ctx.billed, "proration", -1):
        return None
    if _amounts(lines_of(ctx.billed, "proration", 1)) != _amounts(rules_charges):
        return None
    evidence = [
        f"no credit for the unused time of the old plan; the rules give {_joined(rules_credits)}",
        f"the charge for the remaining time is billed as the rules say: {_joined(rules_charges)}",
    ]
    charges = [line for line in charges_of(rules) if not (line.kind == "proration" and line.amount < 0)]
    return Diagnosis("proration_missing_credit", evidence, ctx.reproduces(ctx.rebill(charges)))


Reprorate = Callable[[ConfigChange, Period], list[Line]]


@dataclass(frozen=True)
class Reprorated:
    change: ConfigChange
    period: Period
    rules: list[Line]  # the proration pair the rules give
    bug: list[Line]  # the pair the bug would bill


def _reprorate(ctx: Context, bug: Reprorate) -> list[Reprorated]:
    return [
        Reprorated(
            change, period, proration_lines(change.old, change.new, change.day, period), bug(change, period)
        )
        for change, period in ctx.settled_changes
    ]


def _rebill_prorations(ctx: Context, rules: Invoice, prorations: list[Line]) -> Invoice:
    return ctx.rebill([line for line in charges_of(rules) if line.kind != "proration"] + prorations)


def proration_wrong_days(ctx: Context) -> Diagnosis | None:
    rules, billed_prorations = ctx.rules, lines_of(ctx.billed, "proration")
    if rules is None or not billed_prorations:
        return None

    def over_thirty_days(change: ConfigChange, period: Period) -> list[Line]:
        end = period[1]
        return proration_lines(change.old, change.new, change.day, (end - timedelta(days=30), end))

    replayed = [r for r in _reprorate(ctx, over_thirty_days) if (r.period[1] - r.period[0]).days != 30]
    bugged = [line for r in replayed for line in r.bug]
    if not replayed or _amounts(bugged) != _amounts(billed_prorations):
        return None
    evidence: list[str] = []
    for r in replayed:
        (start, end), day = r.period, r.change.day
        days, remaining = (end - start).days, (end - day).days
        evidence.append(f"the change on {day} falls in the period {start} to {end}, which has {days} days")
        for rule, wrong, full in zip(r.rules, r.bug, r.change.full_amounts, strict=True):
            evidence.append(
                f"proration line '{rule.description}' billed {fmt(wrong.amount)} = {fmt(full)} × "
                f"{remaining}/30; the rules say {fmt(rule.amount)} = {fmt(full)} × {remaining}/{days}"
            )
    rebilled = _rebill_prorations(ctx, rules, bugged)
    return Diagnosis("proration_wrong_days", evidence, ctx.reproduces(rebilled))


def timezone_change_date(ctx: Context) -> Diagnosis | None:
    rules, billed_prorations = ctx.rules, lines_of(ctx.billed, "proration")
    if rules is None or not billed_prorations:
        return None

    def from_utc_day(change: ConfigChange, period: Period) -> list[Line]:
        return proration_lines(change.old, change.new, change.utc_day, period)

    replayed = [r for r in _reprorate(ctx, from_utc_day) if r.change.utc_day != r.change.day]
    bugged = [line for r in replayed for line in r.bug]
    if not replayed or _amounts(bugged) != _amounts(billed_prorations):
        return None
    zone = COUNTRY_TZ.get(ctx.ledger.customer.country, "UTC")
    evidence: list[str] = []
    for r in replayed:
        change, end, instant = r.change, r.period[1], r.change.event.effective_at
        evidence += [
            f"the {change.event.type} happened at {instant.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} {zone} "
            f"local time, {instant.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
            f"the prorations count {(end - change.utc_day).days} days from {change.utc_day}, the UTC date; "
            f"the rules count {(end - change.day).days} days from the customer's local date {change.day}",
        ]
        evidence += [
            f"proration line '{wrong.description}' billed {fmt(wrong.amount)}; "
            f"the rules say {fmt(rule.amount)}"
            for rule, wrong in zip(r.rules, r.bug, strict=True)
        ]
    rebilled = _rebill_prorations(ctx, rules, bugged)
    return Diagnosis("timezone_change_date", evidence, ctx.reproduces(rebilled))


def coupon_not_applied(ctx: Context) -> Diagnosis | None:
    rules, coupon = ctx.rules, ctx.coupon
    if rules is None or coupon is None or not lines_of(rules, "discount") or lines_of(ctx.billed, "discount"):
        return None
    evidence = [
        f"coupon {coupon.id} runs for the first {plural(coupon.duration_months, 'month')}; "
        f"{ctx.billed.id} is in month {ctx.months_in + 1} of the subscription",
        f"no discount line billed; the rules give {_joined(lines_of(rules, 'discount'))}",
    ]
    rebilled = ctx.rebill(charges_of(rules), without_coupon=True)
    return Diagnosis("coupon_not_applied", evidence, ctx.reproduces(rebilled))


def coupon_wrong_base(ctx: Context) -> Diagnosis | None:
    rules, coupon = ctx.rules, ctx.coupon
    if rules is None or coupon is None or coupon.kind != "percent" or not lines_of(rules, "discount"):
        return None
    recurring = total(line.amount for line in lines_of(rules, "recurring"))
    off = money(recurring * coupon.value / 100)  # the bug's base: the recurring line alone
    billed_off = -total(line.amount for line in lines_of(ctx.billed, "discount"))
    rules_off = rules.discount
    if billed_off != off or billed_off == rules_off:
        return None
    pct = f"{coupon.value.normalize():f}%"
    evidence = [
        f"discount billed {fmt(billed_off)} = {pct} of the recurring line {fmt(recurring)} only",
        f"the rules take {pct} of the subtotal {fmt(rules.subtotal)} including prorations: {fmt(rules_off)}",
    ]
    rebilled = ctx.rebill(
        [*charges_of(rules), Line("discount", coupon.id, 1, -off, -off)], without_coupon=True
    )
    return Diagnosis("coupon_wrong_base", evidence, ctx.reproduces(rebilled))


def _other_tax_rate(ctx: Context) -> tuple[Invoice, TaxRate] | None:
    """The rules' invoice and the rate the bill used, when the bill used another rate than the rules."""
    rules, code = ctx.rules, _tax_code(ctx.billed)
    if rules is None or code is None or code == _tax_code(rules):
        return None
    used = ctx.rate(code)
    return (rules, used) if used is not None else None


def _tax_evidence(ctx: Context, rules: Invoice, used: TaxRate) -> list[str]:
    return [
        f"tax line uses {used.code} at {_percent(used)}: {fmt(ctx.billed.tax)}",
        f"on {ctx.billed.issued_at} the customer's region {ctx.customer_region} has {ctx.rules_rate.code} at "
        f"{_percent(ctx.rules_rate)}: {fmt(rules.tax)}",
    ]


def expired_tax_rate(ctx: Context) -> Diagnosis | None:
    found = _other_tax_rate(ctx)
    if found is None:
        return None
    rules, used = found
    if used.region != ctx.customer_region or used.valid_on(ctx.billed.issued_at):
        return None
    window = (
        f"valid {used.valid_from} to {used.valid_to}" if used.valid_to else f"valid from {used.valid_from}"
    )
    evidence = [*_tax_evidence(ctx, rules, used), f"{used.code} is {window}, not on {ctx.billed.issued_at}"]
    return Diagnosis("expired_tax_rate", evidence, ctx.reproduces(ctx.rebill(charges_of(rules), rate=used)))


def wrong_tax_region(ctx: Context) -> Diagnosis | None:
    found = _other_tax_rate(ctx)
    if found is None:
        return None
    rules, used = found
    if used.region == ctx.customer_region:
        return None
    evidence = [
        *_tax_evidence(ctx, rules, used),
        f"{used.code} is a {used.region} rate; the customer's tax region is {ctx.customer_region}",
    ]
    return Diagnosis("wrong_tax_region", evidence, ctx.reproduces(ctx.rebill(charges_of(rules), rate=used)))


# Structural faults first (whether the invoice or payment should exist at all), then the line-level ones
# in the order a bill is built: charges, prorations, discount, tax.
DETECTORS: tuple[Callable[[Context], Diagnosis | None], ...] = (
    duplicate_invoice,
    cancel_not_respected,
    duplicate_charge,
    quantity_change_ignored,
    wrong_plan_price,
    proration_missing_credit,
    proration_wrong_days,
    timezone_change_date,
    coupon_not_applied,
    coupon_wrong_base,
    expired_tax_rate,
    wrong_tax_region,
)

ROOT_CAUSES: tuple[str, ...] = tuple(detector.__name__ for detector in DETECTORS)


def diagnose(ctx: Context) -> Diagnosis | None:
    """The first detector that reproduces the billed figures; else the first whose signature is present."""
    found = [d for d in (detector(ctx) for detector in DETECTORS) if d is not None]
    return next((d for d in found if d.reproduced), found[0] if found else None)
