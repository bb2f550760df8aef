"""The Stripe side of a scenario account's price book, and what every Stripe object shares: Stripe-shaped
ids (the same for the same ledger id every time), instants as unix seconds, amounts as minor units.

A product and a per-unit recurring price per plan, a coupon per coupon, a tax rate per rate an invoice
uses. Stripe tax rates have no validity window (an expired one is archived and a new one made), so a
rate that expires cannot be said in Stripe's terms: rendering one is refused.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from approvals.stripe_issuing import in_minor_units
from engine.model import Coupon, Plan, TaxRate
from scenarios.faults import ScenarioLedger

Obj = dict[str, Any]
RESOURCES = ("product", "price", "coupon", "tax_rate", "customer", "subscription", "invoice", "event")
PRICE_BOOK_CREATED = 1_767_225_600  # 2026-01-01T00:00:00Z: before any scenario's subscription starts
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = {"cus": 14, "si": 14, "di": 24, "co": 8}  # the rest: 24 characters, as Stripe's in_1Pgc…


class NotSayableInStripe(ValueError):
    """The ledger holds something Stripe's objects cannot carry (a tax rate with a validity window)."""


def stripe_id(prefix: str, key: str) -> str:
    """A Stripe-shaped id (cus_QXg1o8vcGmoR32), the same for the same key every time."""
    number = int.from_bytes(hashlib.sha256(f"{prefix}:{key}".encode()).digest(), "big")
    chars = []
    for _ in range(_ID_LENGTH.get(prefix, 24)):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    body = "".join(chars)
    return body.upper() if prefix == "co" else f"{prefix}_{body}"  # a coupon's id is 8 capitals


def seconds(instant: datetime) -> int:
    return int(instant.astimezone(UTC).timestamp())


@dataclass
class StripeAccount:
    """The account's objects by resource (in creation order) and what each ledger id became in Stripe."""

    objects: dict[str, list[Obj]] = field(default_factory=lambda: {r: [] for r in RESOURCES})
    ids: dict[str, str] = field(default_factory=dict)  # ledger id → Stripe id (customers, invoices, …)
    # Each subscription as it stood from an instant on (its creation, then each change): what Stripe
    # answered at the time, for an account read as it was (as_of).
    states: dict[str, list[tuple[int, Obj]]] = field(default_factory=dict)

    def add(self, resource: str, obj: Obj) -> Obj:
        self.objects[resource].append(obj)
        return obj

    def description(self) -> dict[str, list[Obj]]:
        """For the stand-in's StripeAccount.load (copies: the stand-in changes what it holds)."""
        return {resource: copy.deepcopy(objs) for resource, objs in self.objects.items() if objs}

    def as_of(self, instant: int) -> StripeAccount:
        """The account as Stripe would have shown it at this instant (unix seconds): the objects created
        by then, each subscription as it stood then."""
        then = StripeAccount(ids=dict(self.ids), states=self.states)
        for resource, objs in self.objects.items():
            if resource != "subscription":
                then.objects[resource] = [copy.deepcopy(o) for o in objs if o["created"] <= instant]
        for states in self.states.values():
            standing = [state for since, state in states if since <= instant]
            if standing:
                then.objects["subscription"].append(copy.deepcopy(standing[-1]))
        return then


# ---- the price book ----


def price_book(account: StripeAccount, ledgers: Iterable[ScenarioLedger]) -> None:
    plans: dict[str, Plan] = {}
    coupons: dict[str, Coupon] = {}
    rates: dict[str, TaxRate] = {}
    for ledger in ledgers:
        plans.update(ledger.plans)
        if ledger.coupon is not None:
            coupons[ledger.coupon.id] = ledger.coupon
        for invoice in ledger.invoices:
            for line in invoice.lines:
                if line.kind == "tax" and line.tax_code:
                    rates[line.tax_code] = next(r for r in ledger.rates if r.code == line.tax_code)
    for plan in plans.values():
        _plan(account, plan)
    for coupon in coupons.values():
        account.add("coupon", _coupon(account, coupon))
    for rate in rates.values():
        account.add("tax_rate", _tax_rate(account, rate))


def _plan(account: StripeAccount, plan: Plan) -> None:
    product = stripe_id("prod", plan.id)
    price = stripe_id("price", plan.id)
    account.ids[plan.id] = price
    account.add(
        "product", {"id": product, "object": "product", "name": plan.name, "created": PRICE_BOOK_CREATED}
    )
    account.add(
        "price",
        {
            "id": price,
            "object": "price",
            "active": True,
            "product": product,
            "currency": "usd",
            "unit_amount": in_minor_units(plan.unit_price, "USD"),
            "unit_amount_decimal": str(in_minor_units(plan.unit_price, "USD")),
            "billing_scheme": "per_unit",
            "type": "recurring",
            "recurring": {"interval": plan.interval, "interval_count": 1, "usage_type": "licensed"},
            "nickname": None,
            "tax_behavior": "unspecified",
            "created": PRICE_BOOK_CREATED,
        },
    )


def _coupon(account: StripeAccount, coupon: Coupon) -> Obj:
    coupon_id = account.ids[coupon.id] = stripe_id("co", coupon.id)
    duration = coupon.duration or "repeating"
    found: Obj = {
        "id": coupon_id,
        "object": "coupon",
        "name": coupon.id,  # what the customer typed
        "duration": duration,
        "duration_in_months": coupon.duration_months if duration == "repeating" else None,
        "percent_off": None,
        "amount_off": None,
        "currency": None,
        "valid": True,
        "created": PRICE_BOOK_CREATED,
    }
    if coupon.kind == "percent":
        found["percent_off"] = float(coupon.value)
    else:
        found |= {"amount_off": in_minor_units(coupon.value, "USD"), "currency": "usd"}
    return found


def _tax_rate(account: StripeAccount, rate: TaxRate) -> Obj:
    if rate.valid_to is not None:
        raise NotSayableInStripe(
            f"{rate.code} is valid until {rate.valid_to}: a Stripe tax rate has no validity window"
        )
    rate_id = account.ids[rate.code] = stripe_id("txr", rate.code)
    return {
        "id": rate_id,
        "object": "tax_rate",
        "active": True,
        "country": rate.region,
        "jurisdiction": rate.region,
        "display_name": "VAT" if rate.region in ("CN", "DE") else "GST" if rate.region == "SG" else "Tax",
        "description": rate.code,
        "percentage": float(rate.rate * 100),
        "effective_percentage": float(rate.rate * 100),
        "inclusive": rate.inclusive,
        "created": PRICE_BOOK_CREATED,
    }
