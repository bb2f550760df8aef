"""Scenario ledgers as the Stripe objects that would have billed them: the inverse of engine.stripe_map.

Pure: plain dicts shaped as Stripe's API returns them (API 2026-06-24.dahlia, the fields engine.stripe_map
and the sync read, with Stripe's id shapes), no SDK, no I/O. One account holds every ledger given: the
price book once (scenarios.stripe_price_book), then per ledger a customer, its subscription, its
invoices with their lines and paid invoice payments, and a `customer.subscription.updated` event per
plan, seat or cancel change (`previous_attributes` as Stripe sends them: the whole `items` list as it
was, or the cancel fields as they were).

Instants follow Stripe's rules: the subscription's anchor is its creation instant, and every period
boundary is that instant moved by whole days (engine.billing.boundary_at's rule for the STRIPE profile);
a change is at its event's instant. Amounts are minor units. An invoice's discount and tax lines become
each line's `discount_amounts` and `taxes` (shared out in proportion, the remainder on the largest line),
which engine.stripe_map adds up again.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import date, datetime

from approvals.stripe_issuing import in_minor_units
from engine.billing import CONFIG_CHANGES, add_months, local_date
from engine.model import Event, Invoice, Line, Payment
from scenarios.faults import ScenarioLedger
from scenarios.stripe_price_book import (
    NotSayableInStripe,
    Obj,
    StripeAccount,
    price_book,
    seconds,
    stripe_id,
)

# ---- a ledger: customer, subscription, invoices, events ----


@dataclass(frozen=True)
class _Billed:
    """One ledger being rendered: the account, and its subscription's instants (the anchor is its
    creation; a period boundary is the anchor moved by whole days)."""

    account: StripeAccount
    ledger: ScenarioLedger
    anchor: datetime
    as_of: date

    def at(self, day: date) -> int:
        return seconds(self.anchor) + (day - self.ledger.subscription.start_date).days * 86_400

    def id(self, ledger_id: str) -> str:
        return self.account.ids[ledger_id]

    def period_containing(self, day: date) -> tuple[date, date]:
        sub = self.ledger.subscription
        create = next(ev for ev in sub.events if ev.type == "create")
        step = 12 if self.ledger.plans[str(create.payload["plan_id"])].interval == "year" else 1
        start = sub.start_date
        while (end := add_months(start, step, sub.billing_anchor_day)) <= day:
            start = end
        return start, end

    def local_day(self, event: Event) -> date:
        return local_date(event.effective_at, self.ledger.customer.country)


def render(ledgers: list[ScenarioLedger], as_of: date) -> StripeAccount:
    """One Stripe account billing all these ledgers (their payments taken: ScenarioLedger.pay_all), as it
    stands on `as_of`."""
    account = StripeAccount()
    price_book(account, ledgers)
    for ledger in ledgers:
        _render_ledger(account, ledger, as_of)
    return account


def _render_ledger(account: StripeAccount, ledger: ScenarioLedger, as_of: date) -> None:
    sub = ledger.subscription
    events = sorted(sub.events, key=lambda ev: ev.effective_at)
    create = next(ev for ev in events if ev.type == "create")
    billed = _Billed(account, ledger, create.effective_at, as_of)
    account.ids[ledger.customer.id] = stripe_id("cus", ledger.customer.id)
    account.ids[sub.id] = stripe_id("sub", sub.id)
    account.add("customer", _customer(billed, seconds(create.effective_at) - 600))
    history = _history(billed, events)
    account.add("subscription", history[-1][1])
    account.states[sub.id] = [(seconds(event.effective_at), state) for event, state, _ in history]
    for event, after, previous in history[1:]:
        account.add("event", _updated(event, after, previous))
    by_period: dict[date, int] = {}
    for invoice in ledger.invoices:
        again = by_period[invoice.period_start] = by_period.get(invoice.period_start, -1) + 1
        paid = [p for p in ledger.payments if p.invoice_id == invoice.id]
        account.add("invoice", _invoice(billed, invoice, again, paid))


def _customer(billed: _Billed, created: int) -> Obj:
    customer = billed.ledger.customer
    slug = "".join(ch for ch in customer.name.lower() if ch.isascii() and ch.isalnum()) or "billing"
    return {
        "id": billed.id(customer.id),
        "object": "customer",
        "name": customer.name,
        "email": f"ap@{slug}.example",
        "address": {"country": customer.country, "city": None, "line1": None, "line2": None}
        | {"postal_code": None, "state": None},
        "currency": customer.currency.lower(),
        "created": created,
        "metadata": {},
    }


def _history(billed: _Billed, events: list[Event]) -> list[tuple[Event, Obj, Obj]]:
    """The subscription after each of its events, with the attributes the event changed (Stripe's
    `previous_attributes`); the last one is the subscription as it stands on as_of."""
    create = events[0]
    plan_id, quantity = str(create.payload["plan_id"]), int(create.payload["quantity"])
    state = _subscription(billed, _items(billed, plan_id, quantity, billed.local_day(create)))
    history: list[tuple[Event, Obj, Obj]] = [(create, state, {})]
    for event in events[1:]:
        before, state = state, copy.deepcopy(state)
        day = billed.local_day(event)
        if event.type in CONFIG_CHANGES:
            plan_id = str(event.payload.get("to_plan", plan_id))
            quantity = int(event.payload.get("to_quantity", quantity))
            state["items"] = _items(billed, plan_id, quantity, day)
            previous = {"items": before["items"]}
        elif event.type == "cancel":
            # Canceled at period end: the period the request falls in is the last one billed.
            ends = billed.period_containing(day)[1]
            state |= {"cancel_at": billed.at(ends), "canceled_at": seconds(event.effective_at)}
            state["cancel_at_period_end"] = True
            previous = {"cancel_at": None, "canceled_at": None, "cancel_at_period_end": False}
        else:
            raise NotSayableInStripe(f"a {event.type} event is not rendered in Stripe")
        history.append((event, state, previous))
    final = history[-1][1]
    ended = final["cancel_at"] is not None and final["cancel_at"] <= billed.at(billed.as_of)
    last_day = billed.as_of
    if ended:
        final |= {"status": "canceled", "ended_at": final["cancel_at"]}
        last_day = _last_billed_day(billed)
    for item in final["items"]["data"]:
        start, end = billed.period_containing(last_day)
        item |= {"current_period_start": billed.at(start), "current_period_end": billed.at(end)}
    return history


def _last_billed_day(billed: _Billed) -> date:
    """The first day of the last period of a subscription canceled at period end."""
    cancel = next(ev for ev in billed.ledger.subscription.events if ev.type == "cancel")
    return billed.period_containing(billed.local_day(cancel))[0]


def _subscription(billed: _Billed, items: Obj) -> Obj:
    ledger = billed.ledger
    sub, anchor = ledger.subscription, seconds(billed.anchor)
    discounts = []
    if ledger.coupon is not None:
        coupon = ledger.coupon
        ends = add_months(sub.start_date, coupon.duration_months, sub.billing_anchor_day)
        discounts.append(
            {
                "id": stripe_id("di", sub.id),
                "object": "discount",
                "source": {"type": "coupon", "coupon": billed.id(coupon.id)},
                "customer": billed.id(ledger.customer.id),
                "subscription": billed.id(sub.id),
                "start": anchor,
                "end": None if coupon.duration == "forever" else billed.at(ends),
            }
        )
    return {
        "id": billed.id(sub.id),
        "object": "subscription",
        "customer": billed.id(ledger.customer.id),
        "currency": ledger.customer.currency.lower(),
        "status": "active",
        "created": anchor,
        "start_date": anchor,
        "billing_cycle_anchor": anchor,
        "cancel_at": None,
        "canceled_at": None,
        "cancel_at_period_end": False,
        "ended_at": None,
        "collection_method": "charge_automatically",
        "discounts": discounts,
        "items": items,
        "metadata": {},
    }


def _items(billed: _Billed, plan_id: str, quantity: int, day: date) -> Obj:
    """The subscription's one item on `day` (its id stays through plan and seat changes, as Stripe's
    does)."""
    sub = billed.ledger.subscription
    start, end = billed.period_containing(day)
    price = next(p for p in billed.account.objects["price"] if p["id"] == billed.id(plan_id))
    item = {
        "id": stripe_id("si", sub.id),
        "object": "subscription_item",
        "subscription": billed.id(sub.id),
        "price": copy.deepcopy(price),
        "quantity": quantity,
        "current_period_start": billed.at(start),
        "current_period_end": billed.at(end),
        "discounts": [],
        "tax_rates": [],
        "created": seconds(billed.anchor),
        "metadata": {},
    }
    url = f"/v1/subscription_items?subscription={billed.id(sub.id)}"
    return {"object": "list", "data": [item], "has_more": False, "total_count": 1, "url": url}


def _updated(event: Event, after: Obj, previous: Obj) -> Obj:
    return {
        "id": stripe_id("evt", event.id),
        "object": "event",
        "type": "customer.subscription.updated",
        "created": seconds(event.effective_at),
        "api_version": "2026-06-24.dahlia",
        "data": {"object": copy.deepcopy(after), "previous_attributes": copy.deepcopy(previous)},
        "livemode": False,
        "pending_webhooks": 0,
        "request": {"id": None, "idempotency_key": None},
    }


# ---- invoices ----


def _spread(total: int, weights: list[int]) -> list[int]:
    """`total` shared out in proportion to the weights, exactly (the remainder on the largest weight)."""
    if not weights:
        return []
    whole = sum(weights)
    shares = [total * w // whole if whole else 0 for w in weights]
    largest = max(range(len(weights)), key=lambda i: abs(weights[i]))
    shares[largest] += total - sum(shares)
    return shares


def _invoice(billed: _Billed, invoice: Invoice, again: int, paid: list[Payment]) -> Obj:
    """`again`: how many invoices for this period came before it (a copy is created two hours later)."""
    ledger, currency = billed.ledger, invoice.currency.lower()
    invoice_id = billed.account.ids[invoice.id] = stripe_id("in", invoice.id)
    created = billed.at(invoice.issued_at) + again * 7200
    charges = [line for line in invoice.lines if line.kind not in ("discount", "tax")]
    amounts = [in_minor_units(line.amount, currency) for line in charges]
    lines = [
        _invoice_line(billed, invoice_id, line, amount) for line, amount in zip(charges, amounts, strict=True)
    ]
    discount_id = stripe_id("di", ledger.subscription.id)
    off = -sum(in_minor_units(line.amount, currency) for line in invoice.lines if line.kind == "discount")
    discounts = _spread(off, amounts)
    for line, share in zip(lines, discounts, strict=True):
        if share:
            line["discount_amounts"] = [{"amount": share, "discount": discount_id}]
    taxable = [amount - share for amount, share in zip(amounts, discounts, strict=True)]
    total_taxes = []
    for tax in (line for line in invoice.lines if line.kind == "tax"):
        rate_id, tax_minor = billed.id(str(tax.tax_code)), in_minor_units(tax.amount, currency)
        behavior = "inclusive" if tax.inclusive else "exclusive"
        for line, share, base in zip(lines, _spread(tax_minor, taxable), taxable, strict=True):
            line["taxes"].append(_tax(rate_id, behavior, share, base))
        total_taxes.append(_tax(rate_id, behavior, tax_minor, sum(taxable)))
    subtotal = sum(amounts)
    exclusive = sum(t["amount"] for t in total_taxes if t["tax_behavior"] == "exclusive")
    total = subtotal - off + exclusive
    amount_paid = sum(in_minor_units(p.amount, currency) for p in paid)
    return {
        "id": invoice_id,
        "object": "invoice",
        "customer": billed.id(ledger.customer.id),
        "currency": currency,
        "status": invoice.status,
        "created": created,
        "effective_at": created + 3600,
        "billing_reason": "subscription_create" if invoice is ledger.invoices[0] else "subscription_cycle",
        "parent": {
            "type": "subscription_details",
            "subscription_details": {"subscription": billed.id(ledger.subscription.id), "metadata": {}},
            "quote_details": None,
        },
        "status_transitions": {"finalized_at": created + 3600, "paid_at": created + 3660},
        "period_start": created,  # Stripe's: the window pending invoice items were gathered in
        "period_end": created,
        "lines": {
            "object": "list",
            "data": lines,
            "has_more": False,
            "url": f"/v1/invoices/{invoice_id}/lines",
        },
        "discounts": [discount_id] if off else [],
        "total_discount_amounts": [{"amount": off, "discount": discount_id}] if off else [],
        "total_taxes": total_taxes,
        "subtotal": subtotal,
        "subtotal_excluding_tax": subtotal,
        "total_excluding_tax": subtotal - off,
        "total": total,
        "amount_due": total,
        "amount_paid": amount_paid,
        "amount_remaining": max(total - amount_paid, 0),
        "amount_overpaid": max(amount_paid - total, 0),
        "payments": _payments(invoice_id, paid, created + 3600, currency),
        "metadata": {},
    }


def _invoice_line(billed: _Billed, invoice_id: str, line: Line, amount: int) -> Obj:
    """A subscription item's line: its period's instants (a proration's starts at the change's)."""
    sub = billed.ledger.subscription
    assert line.period_start is not None and line.period_end is not None, "a charge line has a period"
    start, end = billed.at(line.period_start), billed.at(line.period_end)
    if line.kind == "proration":
        start = _change_instant(billed, line.period_start) or start
    currency = billed.ledger.customer.currency
    price = _price_of(billed, line)
    return {
        "id": stripe_id("il", f"{invoice_id}:{line.description}:{line.amount}"),
        "object": "line_item",
        "invoice": invoice_id,
        "amount": amount,
        "subtotal": amount,
        "currency": currency.lower(),
        "description": line.description,
        "quantity": line.quantity,
        "period": {"start": start, "end": end},
        "parent": {
            "type": "subscription_item_details",
            "subscription_item_details": {
                "subscription": billed.id(sub.id),
                "subscription_item": stripe_id("si", sub.id),
                "proration": line.kind == "proration",
                "invoice_item": None,
                "proration_details": {"credited_items": None},
            },
            "invoice_item_details": None,
        },
        "pricing": {
            "type": "price_details",
            "price_details": {"price": price["id"], "product": price["product"]},
            "unit_amount_decimal": str(in_minor_units(line.unit_amount, currency)),
        },
        "discount_amounts": [],
        "discounts": [],
        "taxes": [],
        "pretax_credit_amounts": [],
        "metadata": {},
    }


def _price_of(billed: _Billed, line: Line) -> Obj:
    """The price a charge line bills: the plan its text names (engine.billing.plan_label's "<plan> × N
    seats"; the longest name that fits, so no plan is taken for another whose name it starts)."""
    plans = [plan for plan in billed.ledger.plans.values() if f"{plan.name} × " in line.description]
    plan = max(plans, key=lambda plan: len(plan.name))
    return next(p for p in billed.account.objects["price"] if p["id"] == billed.id(plan.id))


def _change_instant(billed: _Billed, day: date) -> int | None:
    """A proration starts at the instant of the plan or seat change made on that (local) day."""
    for event in billed.ledger.subscription.events:
        if event.type in CONFIG_CHANGES and billed.local_day(event) == day:
            return seconds(event.effective_at)
    return None


def _tax(rate_id: str, behavior: str, amount: int, taxable: int) -> Obj:
    return {
        "type": "tax_rate_details",
        "amount": amount,
        "tax_behavior": behavior,
        "taxable_amount": taxable,
        "taxability_reason": "standard_rated",
        "tax_rate_details": {"tax_rate": rate_id},
    }


def _payments(invoice_id: str, paid: list[Payment], at: int, currency: str) -> Obj:
    """The invoice's paid invoice payments, each with its own payment intent, as far apart as charged."""
    data = []
    first = min((p.attempted_at for p in paid), default=None)
    for payment in paid:
        assert first is not None
        paid_at = at + 60 + int((payment.attempted_at - first).total_seconds())
        amount = in_minor_units(payment.amount, currency)
        data.append(
            {
                "id": stripe_id("inpay", payment.id),
                "object": "invoice_payment",
                "invoice": invoice_id,
                "amount_paid": amount,
                "amount_requested": amount,
                "currency": currency,
                "is_default": payment is paid[0],
                "status": "paid",
                "payment": {"type": "payment_intent", "payment_intent": stripe_id("pi", payment.id)},
                "status_transitions": {"paid_at": paid_at, "canceled_at": None},
                "created": paid_at - 1,
            }
        )
    url = f"/v1/invoice_payments?invoice={invoice_id}"
    return {"object": "list", "data": data, "has_more": False, "url": url}
