"""How each billing bug shows on the ledger: one detector per root cause, checked the way an analyst would.

A detector looks at one invoice the customer overpaid and first looks for its bug's signature: the line
that differs from the rules in the way that bug makes it differ (a 30-day denominator, a proration dated on
the UTC day, a tax code of another region…). It then re-bills the period WITH that bug and checks that it
gives the billed total to the cent. A reproduced diagnosis beats one whose signature is merely present, so
a coincidence on one line cannot outvote the figures. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

from agent.auditor.context import (
    ConfigChange,
    Context,
    Diagnosis,
    Period,
    charges_of,
    joined,
    lines_of,
    paid_amounts,
    percent,
    plural,
    quote,
    seats_of,
    sorted_amounts,
    tax_code_of,
)
from engine.billing import local_date, months_between, proration_lines
from engine.model import Coupon, Invoice, Line, Plan, PriceBook, Subscription, TaxRate
from engine.money import ZERO, fmt, money, total
from engine.pricebook import COUNTRY_TZ

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
        f"{fmt(total(paid_amounts(ctx.ledger, original_id)))}",
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
    seats = seats_of(create.payload.get("quantity")) if create else None
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
        evidence.append(f"no proration for the change; the rules settle it with {joined(rules_prorations)}")
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
    if sorted_amounts(lines_of(ctx.billed, "proration", 1)) != sorted_amounts(rules_charges):
        return None
    evidence = [
        f"no credit for the unused time of the old plan; the rules give {joined(rules_credits)}",
        f"the charge for the remaining time is billed as the rules say: {joined(rules_charges)}",
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
        Reprorated(change, period, ctx.prorations(change, period), bug(change, period))
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
    if not replayed or sorted_amounts(bugged) != sorted_amounts(billed_prorations):
        return None
    evidence: list[str] = []
    for r in replayed:
        (start, end), day = r.period, r.change.day
        days, remaining = (end - start).days, (end - day).days
        share = ctx.proration_share(r.change, r.period)
        evidence.append(f"the change on {day} falls in the period {start} to {end}, which has {days} days")
        for rule, wrong, full in zip(r.rules, r.bug, r.change.full_amounts, strict=True):
            evidence.append(
                f"proration line '{rule.description}' billed {fmt(wrong.amount)} = {fmt(full)} × "
                f"{remaining}/30; the rules say {fmt(rule.amount)} = {fmt(full)} × {share}"
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
    if not replayed or sorted_amounts(bugged) != sorted_amounts(billed_prorations):
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
        f"no discount line billed; the rules give {joined(lines_of(rules, 'discount'))}",
        *_discounts_past_duration(ctx, coupon),
    ]
    rebilled = ctx.rebill(charges_of(rules), without_coupon=True)
    return Diagnosis("coupon_not_applied", evidence, ctx.reproduces(rebilled))


def _discounts_past_duration(ctx: Context, coupon: Coupon) -> list[str]:
    """The subscription's invoices that got a discount after the coupon's duration: a coupon applied late
    skips an invoice it covers (the overcharge) and discounts one it does not (an undercharge)."""
    sub = ctx.subscription
    out = []
    for invoice in ctx.ledger.invoices:
        months_in = months_between(sub.start_date, invoice.period_start) if sub else 0
        discount = lines_of(invoice, "discount")
        if invoice.subscription_id != ctx.billed.subscription_id or coupon.covers(months_in) or not discount:
            continue
        off = fmt(-total(line.amount for line in discount))
        out.append(
            f"{invoice.id} was billed a discount of {off} from {coupon.id} in month {months_in + 1}, "
            f"past its {coupon.duration_months}-month duration"
        )
    return out


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
    rules, code = ctx.rules, tax_code_of(ctx.billed)
    if rules is None or code is None or code == tax_code_of(rules):
        return None
    used = ctx.rate(code)
    return (rules, used) if used is not None else None


def _tax_evidence(ctx: Context, rules: Invoice, used: TaxRate) -> list[str]:
    return [
        f"tax line uses {used.code} at {percent(used)}: {fmt(ctx.billed.tax)}",
        f"on {ctx.billed.issued_at} the customer's region {ctx.customer_region} has {ctx.rules_rate.code} at "
        f"{percent(ctx.rules_rate)}: {fmt(rules.tax)}",
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
