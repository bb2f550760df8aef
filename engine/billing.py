"""The reference billing engine: CloudLedger's published rules turned into the invoices that SHOULD exist.

Rules (from the help centre):
- Invoices follow the billing anchor day: one per period (monthly or yearly); period_end is exclusive and
  the invoice is issued on the period's first day.
- A plan or seat change mid-period is settled by the day on the NEXT invoice: a credit for the unused
  days of the old configuration, then a charge for the remaining days of the new one.
- Event dates are the customer's local dates (time zone by country).
- A coupon applies to the subtotal (recurring + proration) of invoices within its first N months.
- Tax = (subtotal − discount) × the rate valid on the issue date, rounded to the cent.
- Cancel means cancel at period end: the current period is billed, nothing after it.
- Pause stops the recurring charge from the next period; resume restarts it. A plan or seat change
  during a paused (uncharged) period is not prorated: the new configuration applies from the resume.
- Switching between monthly and yearly is refused: cancel and start a new subscription instead.

A ledger synced from Stripe is judged by Stripe's rules where they differ (engine.profiles): prorations by
the second between the period's instants. A tax rate marked inclusive (format 2) is already inside the
prices: its tax line shows the part of the discounted subtotal that is tax and adds nothing to the total.

Each customer's history is computed in a single pass over periods and (sorted) events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache, lru_cache
from zoneinfo import ZoneInfo

from engine.model import BillingError, Coupon, Customer, Invoice, Line, Plan, Subscription, TaxRate
from engine.money import money, prorate
from engine.pricebook import COUNTRY_TZ
from engine.profiles import CLOUDLEDGER, RulesProfile

CONFIG_CHANGES = ("upgrade", "downgrade", "quantity_change")


def add_months(day: date, months: int, anchor_day: int) -> date:
    """The anchor day `months` after `day`'s month (anchor days are 1–28, so always valid)."""
    year, month0 = divmod(day.month - 1 + months, 12)
    return date(day.year + year, month0 + 1, anchor_day)


def months_between(a: date, b: date) -> int:
    return (b.year - a.year) * 12 + (b.month - a.month)


@cache
def _zone(country: str) -> ZoneInfo:
    try:
        return ZoneInfo(COUNTRY_TZ[country])
    except KeyError:
        raise BillingError(f"unknown country {country!r}: expected one of {', '.join(COUNTRY_TZ)}") from None


def local_date(instant: datetime, country: str) -> date:
    """The customer's local calendar date of an instant (billing rules run on local dates)."""
    if instant.tzinfo is None:
        raise BillingError(f"event time {instant.isoformat()} has no time zone")
    return instant.astimezone(_zone(country)).date()


def rate_on(rates: Iterable[TaxRate], region: str, day: date) -> TaxRate:
    for rate in rates:
        if rate.region == region and rate.valid_on(day):
            return rate
    raise BillingError(f"no tax rate for region {region!r} valid on {day.isoformat()}")


def plan_label(plan: Plan, quantity: int) -> str:
    return f"{plan.name} × {quantity} seats"


@lru_cache(maxsize=4096)  # bounded: a long-running bot meets new plans and seat counts for ever
def _recurring(plan: Plan, quantity: int) -> tuple[Decimal, str]:
    """A period's recurring charge and its line's text: the same for every period on this plan and count
    (a sweep bills hundreds of thousands of periods from a handful of plans)."""
    return money(plan.unit_price * quantity), plan_label(plan, quantity)


def apply_discount_and_tax(invoice: Invoice, coupon: Coupon | None, months_in: int, tax: TaxRate) -> None:
    """Append the discount and tax lines to an invoice holding its charge lines; tag every line's tax code."""
    base = invoice.subtotal
    if coupon is not None and coupon.covers(months_in) and base > 0:
        if coupon.kind == "percent":
            off = money(base * coupon.value / 100)
            label = f"Coupon {coupon.id} (-{coupon.value.normalize():f}%)"
        else:
            off = min(money(coupon.value), base)
            label = f"Coupon {coupon.id} (-{money(coupon.value)})"
        invoice.lines.append(Line("discount", label, 1, -off, -off))
    taxed = base - invoice.discount  # the subtotal is base: a discount is not in it
    # An inclusive rate's tax is the part of the taxed amount that is tax, not an amount on top of it.
    tax_amount = money(taxed * tax.rate / (1 + tax.rate) if tax.inclusive else taxed * tax.rate)
    for line in invoice.lines:
        line.tax_code = tax.code
    invoice.lines.append(
        Line(
            "tax",
            _tax_label(tax.code, tax.rate),
            1,
            tax_amount,
            tax_amount,
            tax_code=tax.code,
            inclusive=tax.inclusive,
        )
    )


@lru_cache(maxsize=1024)
def _tax_label(code: str, rate: Decimal) -> str:
    return f"Tax {code} ({tax_percent(rate)}%)"


def invoice_id(subscription_id: str, period_index: int) -> str:
    """INV-<subscription number>-<period index>, e.g. SUB-0001's fifth period is INV-0001-05."""
    return f"{subscription_id.replace('SUB', 'INV', 1)}-{period_index:02d}"


def _plan(plans: Mapping[str, Plan], plan_id: object) -> Plan:
    try:
        return plans[str(plan_id)]
    except KeyError:
        raise BillingError(f"unknown plan {plan_id!r}") from None


def _quantity(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BillingError(f"quantity must be a whole number, got {value!r}")
    try:
        quantity = int(value)
    except ValueError:
        raise BillingError(f"quantity must be a whole number, got {value!r}") from None
    if quantity <= 0:
        raise BillingError(f"quantity must be positive, got {quantity}")
    return quantity


Instants = tuple[datetime, datetime, datetime]  # a change's instant and its period's start and end


def proration_lines(
    old: tuple[Plan, int],
    new: tuple[Plan, int],
    changed_on: date,
    period: tuple[date, date],
    at: Instants | None = None,
) -> list[Line]:
    """Credit the old configuration's unused time, charge the new one's remaining time: by the day from
    the local date, or, given the instants (`at`: Stripe's rules), by the second."""
    (old_plan, old_qty), (new_plan, new_qty) = old, new
    start, end = period
    if at is None:
        remaining, whole = (end - changed_on).days, (end - start).days
    else:
        changed, start_at, end_at = at
        remaining, whole = _seconds(changed, end_at), _seconds(start_at, end_at)
    credit = prorate(money(old_plan.unit_price * old_qty), remaining, whole)
    charge = prorate(money(new_plan.unit_price * new_qty), remaining, whole)
    span = f"({changed_on.isoformat()} to {end.isoformat()})"
    old_label, new_label = plan_label(old_plan, old_qty), plan_label(new_plan, new_qty)
    return [
        Line("proration", f"Unused time on {old_label} {span}", old_qty, -credit, -credit, changed_on, end),
        Line("proration", f"Remaining time on {new_label} {span}", new_qty, charge, charge, changed_on, end),
    ]


def _seconds(start: datetime, end: datetime) -> int:
    """Whole seconds from start to end, on the absolute time line (aware datetimes of one zone subtract as
    wall-clock times, which is off by an hour across a daylight-saving change)."""
    return int((end.astimezone(UTC) - start.astimezone(UTC)).total_seconds())


def boundary_at(anchor: datetime, start_date: date, day: date) -> datetime:
    """The instant a period boundary falls on under Stripe's rules: the subscription's anchor instant
    moved to that period's start date, at the anchor's time of day in UTC (Stripe counts in UTC)."""
    return anchor.astimezone(UTC) + timedelta(days=(day - start_date).days)


def proration_instants(
    profile: RulesProfile, anchor: datetime, start_date: date, changed: datetime, period: tuple[date, date]
) -> Instants | None:
    """What a change in this period is prorated between under the profile: its instant and the period's
    (anchor: the subscription's create instant), or None where the profile prorates by the day."""
    if profile.prorate_by != "second":
        return None
    start_at, end_at = (boundary_at(anchor, start_date, day) for day in period)
    return changed, start_at, end_at


def build_invoices(
    customer: Customer,
    sub: Subscription,
    plans: Mapping[str, Plan],
    coupon: Coupon | None,
    rates: Iterable[TaxRate],
    until: date,
    profile: RulesProfile = CLOUDLEDGER,
) -> list[Invoice]:
    """Every invoice the rules produce for periods starting on or before `until`, in one pass."""
    # The region's rates only, in the given order: rate_on picks the same one, a period at a time.
    rates = [rate for rate in rates if rate.region == customer.tax_region]
    dated = sorted(
        ((local_date(ev.effective_at, customer.country), ev) for ev in sub.events),
        key=lambda pair: pair[1].effective_at,
    )
    creates = [ev for _, ev in dated if ev.type == "create"]
    if len(creates) != 1:
        raise BillingError(f"subscription {sub.id} needs exactly one create event, found {len(creates)}")
    plan = _plan(plans, creates[0].payload.get("plan_id"))
    qty = _quantity(creates[0].payload.get("quantity"))
    step = 12 if plan.interval == "year" else 1
    changes = [(day, ev) for day, ev in dated if ev.type != "create"]

    invoices: list[Invoice] = []
    carried: list[Line] = []  # prorations from the previous period, billed on this invoice
    cancel_end: date | None = None
    paused = False
    next_event = 0
    period_start, index = sub.start_date, 1
    while period_start <= until and (cancel_end is None or period_start < cancel_end):
        period_end = add_months(period_start, step, sub.billing_anchor_day)
        invoice = Invoice(
            id=invoice_id(sub.id, index),
            customer_id=customer.id,
            subscription_id=sub.id,
            period_start=period_start,
            period_end=period_end,
            issued_at=period_start,
            currency=customer.currency,
        )
        invoice.lines.extend(carried)
        carried = []
        # Whether this period's recurring charge is billed; a paused period is not, so a change made
        # during it has nothing to settle (no paid days to credit, no used days to charge).
        charged = not paused
        if charged:
            recurring, label = _recurring(plan, qty)
            invoice.lines.append(
                Line("recurring", label, qty, plan.unit_price, recurring, period_start, period_end)
            )
        if invoice.lines:
            months_in = months_between(sub.start_date, period_start)
            apply_discount_and_tax(
                invoice, coupon, months_in, rate_on(rates, customer.tax_region, period_start)
            )
            invoices.append(invoice)

        # Events dated before this period (e.g. before the start) are ignored, as the help centre says.
        while next_event < len(changes) and changes[next_event][0] < period_start:
            next_event += 1
        while next_event < len(changes) and changes[next_event][0] < period_end:
            day, ev = changes[next_event]
            next_event += 1
            if ev.type in CONFIG_CHANGES:
                new_plan = _plan(plans, ev.payload.get("to_plan", plan.id))
                new_qty = _quantity(ev.payload.get("to_quantity", qty))
                if new_plan.interval != plan.interval:
                    raise BillingError(
                        f"event {ev.id}: switching between monthly and yearly billing is not supported; "
                        "cancel and start a new subscription"
                    )
                if charged:
                    period = (period_start, period_end)
                    anchor = creates[0].effective_at
                    at = proration_instants(profile, anchor, sub.start_date, ev.effective_at, period)
                    carried += proration_lines((plan, qty), (new_plan, new_qty), day, period, at)
                plan, qty = new_plan, new_qty
            elif ev.type == "cancel":
                cancel_end = period_end
            elif ev.type == "pause":
                paused = True
            elif ev.type == "resume":
                paused = False
            else:
                raise BillingError(f"event {ev.id}: unknown event type {ev.type!r}")
        period_start, index = period_end, index + 1
    return invoices


def expected_by_period(invoices: Iterable[Invoice]) -> dict[date, Invoice]:
    """Index the rules' invoices by period start, to compare with what was actually billed."""
    return {inv.period_start: inv for inv in invoices}


def tax_percent(rate: Decimal) -> str:
    return f"{(rate * 100).normalize():f}"
