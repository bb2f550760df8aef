"""The twelve billing faults, and "no error".

Each injector takes a correct ledger (built by the reference engine), breaks it the way a real billing bug
would, and returns the ground truth. Lines are changed and the discount and tax are recomputed with the
engine's own apply_discount_and_tax, so a broken invoice still adds up: finding the fault takes comparing
it with the rules, not spotting a header that disagrees with its lines. Payments are taken afterwards
(ScenarioLedger.pay_all), because customers pay what the broken invoice says.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Literal

from engine.billing import (
    add_months,
    apply_discount_and_tax,
    local_date,
    months_between,
    plan_label,
    rate_on,
)
from engine.model import Coupon, Customer, Event, Invoice, Payment, Plan, Subscription, TaxRate
from engine.money import ZERO, money, prorate

ROOT_CAUSES: dict[str, str] = {
    "proration_wrong_days": "Proration used the wrong number of days (a hard-coded 30-day month)",
    "proration_missing_credit": "The upgrade never credited the old plan's unused days",
    "duplicate_charge": "One invoice was charged twice",
    "duplicate_invoice": "Two invoices were issued for the same billing period",
    "expired_tax_rate": "A tax rate that had already expired was applied",
    "wrong_tax_region": "Another region's tax rate was applied",
    "coupon_not_applied": "A coupon still within its term was not applied",
    "coupon_wrong_base": "A percent coupon was applied to the recurring charge only, not to the prorations",
    "quantity_change_ignored": "A seat reduction was ignored: still billed for the old seat count",
    "cancel_not_respected": "The subscription was billed again after it was canceled at period end",
    "timezone_change_date": "The plan change was dated in UTC, so the proration counted one day too many",
    "wrong_plan_price": "The recurring unit price does not match the price book",
    "no_error": "The invoice is correct; the customer misread it",
}

Action = Literal["credit_note", "explain_only"]


@dataclass
class ScenarioLedger:
    """Everything one scenario's customer has on record. Injectors change it in place."""

    customer: Customer
    subscription: Subscription
    plans: dict[str, Plan]
    coupon: Coupon | None
    rates: list[TaxRate]
    invoices: list[Invoice]
    payments: list[Payment] = field(default_factory=list)
    extra_payments: list[Payment] = field(default_factory=list)  # charges an injector adds (a double charge)

    def rate(self, invoice: Invoice) -> TaxRate:
        """The tax rate the rules use for this invoice."""
        return rate_on(self.rates, self.customer.tax_region, invoice.period_start)

    def months_in(self, invoice: Invoice) -> int:
        return months_between(self.subscription.start_date, invoice.period_start)

    def invoice(self, invoice_id: str) -> Invoice:
        return next(inv for inv in self.invoices if inv.id == invoice_id)

    def pay_all(self) -> None:
        """Charge every invoice its (possibly broken) total once, plus any extra charge an injector made.

        Call it after injecting: the card is charged what the invoice says. An invoice whose total is not
        positive has nothing to charge.
        """
        self.payments = [_payment_for(inv) for inv in self.invoices if inv.total > ZERO]
        self.payments += self.extra_payments


def _payment_for(invoice: Invoice, suffix: str = "", after: timedelta = timedelta(0)) -> Payment:
    attempted = datetime.combine(invoice.issued_at, time(2, 0), tzinfo=UTC) + after
    return Payment(
        id=invoice.id.replace("INV", "PAY", 1) + (f"-{suffix}" if suffix else ""),
        invoice_id=invoice.id,
        amount=invoice.total,
        status="succeeded",
        attempted_at=attempted,
        gateway_ref=f"gw_{invoice.id[4:].replace('-', '')}{suffix.lower()}",
    )


@dataclass(frozen=True)
class OtherFinding:
    """An overcharge on the account besides the one the complaint is about."""

    invoice_id: str
    root_cause: str
    overcharge: Decimal


@dataclass(frozen=True)
class Truth:
    root_cause: str
    invoice_ids: list[str]
    overcharge: Decimal  # what the customer paid beyond the rules, tax included; ZERO when nothing is wrong
    expected_action: Action
    detail: str  # one sentence for a human
    # The account's other overcharges. None: the scenario does not say (the first 100, whose files predate
    # it, have one fault each); () says there are none.
    other_findings: tuple[OtherFinding, ...] | None = None


def refinalize(
    invoice: Invoice, ledger: ScenarioLedger, *, without_coupon: bool = False, tax: TaxRate | None = None
) -> None:
    """After changing an invoice's charge lines, drop its discount and tax lines and compute them again."""
    invoice.lines = [line for line in invoice.lines if line.kind not in ("discount", "tax")]
    coupon = None if without_coupon else ledger.coupon
    apply_discount_and_tax(invoice, coupon, ledger.months_in(invoice), tax or ledger.rate(invoice))


def _sorted_events(ledger: ScenarioLedger) -> list[Event]:
    return sorted(ledger.subscription.events, key=lambda ev: ev.effective_at)


def invoice_after_event(ledger: ScenarioLedger, event_type: str) -> Invoice:
    """The invoice after the period in which the event happened: the one carrying its prorations."""
    event = next(ev for ev in ledger.subscription.events if ev.type == event_type)
    day = local_date(event.effective_at, ledger.customer.country)
    for index, invoice in enumerate(ledger.invoices[:-1]):
        if invoice.period_start <= day < invoice.period_end:
            return ledger.invoices[index + 1]
    raise LookupError(f"no invoice after the {event_type} event of {ledger.subscription.id}")


def _increase(before: Decimal, invoice: Invoice) -> Decimal:
    return money(invoice.total - before)


@dataclass(frozen=True)
class ConfigChange:
    """A plan or seat change replayed from the events: full-period amounts before and after, and where."""

    old_full: Decimal
    new_full: Decimal
    local_day: date
    invoice: Invoice  # the invoice carrying its prorations

    @property
    def period_end(self) -> date:
        return self.invoice.period_start


def _config_change(ledger: ScenarioLedger, event_type: str) -> ConfigChange:
    events = _sorted_events(ledger)
    create = next(ev for ev in events if ev.type == "create")
    plan, qty = ledger.plans[create.payload["plan_id"]], int(create.payload["quantity"])
    for event in events:
        if event.type == "create":
            continue
        new_plan = ledger.plans[event.payload.get("to_plan", plan.id)]
        new_qty = int(event.payload.get("to_quantity", qty))
        if event.type == event_type:
            return ConfigChange(
                money(plan.unit_price * qty),
                money(new_plan.unit_price * new_qty),
                local_date(event.effective_at, ledger.customer.country),
                invoice_after_event(ledger, event_type),
            )
        plan, qty = new_plan, new_qty
    raise LookupError(f"no {event_type} event on {ledger.subscription.id}")


def _previous(ledger: ScenarioLedger, invoice: Invoice) -> Invoice:
    return ledger.invoices[ledger.invoices.index(invoice) - 1]


def _rewrite_prorations(change: ConfigChange, used_days: int, period_days: int, start: date) -> None:
    """Recompute the invoice's proration pair with a (buggy) day count and start date."""
    for line in change.invoice.lines:
        if line.kind != "proration":
            continue
        is_charge = line.amount > 0
        amount = prorate(change.new_full if is_charge else change.old_full, used_days, period_days)
        line.amount = line.unit_amount = amount if is_charge else -amount
        line.description = re.sub(r"\(\d{4}-\d{2}-\d{2}", f"({start.isoformat()}", line.description)
        line.period_start = start


# ---------- the twelve injectors ----------


def proration_wrong_days(ledger: ScenarioLedger) -> Truth:
    change = _config_change(ledger, "upgrade")
    invoice, previous = change.invoice, _previous(ledger, change.invoice)
    real_days = (previous.period_end - previous.period_start).days
    before = invoice.total
    _rewrite_prorations(change, (change.period_end - change.local_day).days, 30, change.local_day)
    refinalize(invoice, ledger)
    return Truth(
        "proration_wrong_days",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"The period starting {previous.period_start} has {real_days} days, "
        "but the upgrade was prorated over 30",
    )


def proration_missing_credit(ledger: ScenarioLedger) -> Truth:
    invoice = invoice_after_event(ledger, "upgrade")
    before = invoice.total
    invoice.lines = [ln for ln in invoice.lines if not (ln.kind == "proration" and ln.amount < 0)]
    refinalize(invoice, ledger)
    return Truth(
        "proration_missing_credit",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"{invoice.id} charges the new plan's remaining days but never credits the old plan's unused days",
    )


def duplicate_charge(ledger: ScenarioLedger) -> Truth:
    invoice = ledger.invoices[-2]
    ledger.extra_payments.append(_payment_for(invoice, suffix="R", after=timedelta(minutes=3)))
    return Truth(
        "duplicate_charge",
        [invoice.id],
        invoice.total,
        "credit_note",
        f"{invoice.id} was charged successfully twice on the same day, three minutes apart",
    )


def duplicate_invoice(ledger: ScenarioLedger) -> Truth:
    original = ledger.invoices[-2]
    copy_ = copy.deepcopy(original)
    copy_.id = original.id + "D"
    ledger.invoices.insert(ledger.invoices.index(original) + 1, copy_)
    return Truth(
        "duplicate_invoice",
        [copy_.id],
        copy_.total,
        "credit_note",
        f"The period starting {original.period_start} was invoiced twice, {original.id} and {copy_.id}, "
        "and both were paid",
    )


def expired_tax_rate(ledger: ScenarioLedger) -> Truth:
    invoice = ledger.invoices[-1]
    current = ledger.rate(invoice)
    expired = next(
        r
        for r in ledger.rates
        if r.region == current.region and r.valid_to is not None and r.valid_to < invoice.period_start
    )
    before = invoice.total
    refinalize(invoice, ledger, tax=expired)
    return Truth(
        "expired_tax_rate",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"{invoice.id} applied {expired.code}, which expired on {expired.valid_to}; {current.code} applies",
    )


def wrong_tax_region(ledger: ScenarioLedger) -> Truth:
    invoice = ledger.invoices[-1]
    current = ledger.rate(invoice)
    wrong = max(
        (r for r in ledger.rates if r.region != current.region and r.valid_to is None), key=lambda r: r.rate
    )
    before = invoice.total
    refinalize(invoice, ledger, tax=wrong)
    return Truth(
        "wrong_tax_region",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"The customer's tax region is {current.region}, but {invoice.id} applied {wrong.code}",
    )


def coupon_not_applied(ledger: ScenarioLedger) -> Truth:
    coupon = ledger.coupon
    assert coupon is not None, "coupon_not_applied needs a subscription with a coupon"
    invoice = next(inv for inv in ledger.invoices if 0 < ledger.months_in(inv) < coupon.duration_months)
    before = invoice.total
    refinalize(invoice, ledger, without_coupon=True)
    return Truth(
        "coupon_not_applied",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"{coupon.id} was still within its {coupon.duration_months}-month term, "
        f"but {invoice.id} has no discount",
    )


def coupon_wrong_base(ledger: ScenarioLedger) -> Truth:
    coupon = ledger.coupon
    assert coupon is not None and coupon.kind == "percent", "coupon_wrong_base needs a percent coupon"
    invoice = invoice_after_event(ledger, "upgrade")
    before = invoice.total
    charges = [ln for ln in invoice.lines if ln.kind not in ("discount", "tax")]
    # The buggy base: the discount the engine would give on the recurring line alone.
    recurring_only = copy.deepcopy(invoice)
    recurring_only.lines = [ln for ln in recurring_only.lines if ln.kind == "recurring"]
    apply_discount_and_tax(recurring_only, coupon, ledger.months_in(invoice), ledger.rate(invoice))
    invoice.lines = charges + [ln for ln in recurring_only.lines if ln.kind == "discount"]
    apply_discount_and_tax(invoice, None, ledger.months_in(invoice), ledger.rate(invoice))
    return Truth(
        "coupon_wrong_base",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"{coupon.id} applies to the subtotal including prorations, "
        f"but {invoice.id} discounted only the recurring line",
    )


def quantity_change_ignored(ledger: ScenarioLedger) -> Truth:
    invoice = invoice_after_event(ledger, "quantity_change")
    event = next(ev for ev in ledger.subscription.events if ev.type == "quantity_change")
    create = next(ev for ev in ledger.subscription.events if ev.type == "create")
    old_qty = int(create.payload["quantity"])
    plan = ledger.plans[current_plan_id(ledger)]
    before = invoice.total
    invoice.lines = [ln for ln in invoice.lines if ln.kind != "proration"]
    for line in invoice.lines:
        if line.kind == "recurring":
            line.quantity = old_qty
            line.amount = money(line.unit_amount * old_qty)
            line.description = plan_label(plan, old_qty)
    refinalize(invoice, ledger)
    return Truth(
        "quantity_change_ignored",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"Seats went from {old_qty} to {event.payload['to_quantity']}, but {invoice.id} still bills "
        f"{old_qty} seats and has no proration",
    )


def current_plan_id(ledger: ScenarioLedger) -> str:
    """The plan in force after replaying every event."""
    events = _sorted_events(ledger)
    plan_id = str(next(ev for ev in events if ev.type == "create").payload["plan_id"])
    for event in events:
        plan_id = str(event.payload.get("to_plan", plan_id))
    return plan_id


def cancel_not_respected(ledger: ScenarioLedger) -> Truth:
    last = ledger.invoices[-1]
    step = 12 if ledger.plans[current_plan_id(ledger)].interval == "year" else 1
    extra = copy.deepcopy(last)
    extra.id = f"{last.id[:-2]}{int(last.id[-2:]) + 1:02d}"
    extra.period_start = last.period_end
    extra.period_end = add_months(last.period_end, step, ledger.subscription.billing_anchor_day)
    extra.issued_at = extra.period_start
    extra.lines = [ln for ln in extra.lines if ln.kind == "recurring"]
    for line in extra.lines:
        line.period_start, line.period_end = extra.period_start, extra.period_end
    refinalize(extra, ledger)
    ledger.invoices.append(extra)
    return Truth(
        "cancel_not_respected",
        [extra.id],
        extra.total,
        "credit_note",
        f"The subscription was canceled at period end on {last.period_end}; {extra.id} should not exist",
    )


def timezone_change_date(ledger: ScenarioLedger) -> Truth:
    change = _config_change(ledger, "upgrade")
    invoice, previous = change.invoice, _previous(ledger, change.invoice)
    period_days = (previous.period_end - previous.period_start).days
    utc_day = change.local_day - timedelta(days=1)  # the buggy system took the UTC date: a day early
    before = invoice.total
    _rewrite_prorations(change, (change.period_end - utc_day).days, period_days, utc_day)
    refinalize(invoice, ledger)
    return Truth(
        "timezone_change_date",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"The plan changed early on {change.local_day} local time; the system dated it {utc_day} (UTC) "
        "and prorated one day too many",
    )


def wrong_plan_price(ledger: ScenarioLedger) -> Truth:
    invoice = ledger.invoices[-1]
    before = invoice.total
    for line in invoice.lines:
        if line.kind == "recurring":
            line.unit_amount = money(line.unit_amount + Decimal("6.00"))
            line.amount = money(line.unit_amount * line.quantity)
    refinalize(invoice, ledger)
    return Truth(
        "wrong_plan_price",
        [invoice.id],
        _increase(before, invoice),
        "credit_note",
        f"{invoice.id} bills 6.00 more per seat than the price book",
    )


def no_error(ledger: ScenarioLedger, invoice: Invoice, detail: str) -> Truth:
    return Truth("no_error", [invoice.id], ZERO, "explain_only", detail)


Injector = Callable[[ScenarioLedger], Truth]

# The order matters: the generator hands out scenarios in this order (the first eight get one more each).
INJECTORS: dict[str, Injector] = {
    "proration_wrong_days": proration_wrong_days,
    "proration_missing_credit": proration_missing_credit,
    "duplicate_charge": duplicate_charge,
    "duplicate_invoice": duplicate_invoice,
    "expired_tax_rate": expired_tax_rate,
    "wrong_tax_region": wrong_tax_region,
    "coupon_not_applied": coupon_not_applied,
    "coupon_wrong_base": coupon_wrong_base,
    "quantity_change_ignored": quantity_change_ignored,
    "cancel_not_respected": cancel_not_respected,
    "timezone_change_date": timezone_change_date,
    "wrong_plan_price": wrong_plan_price,
}
