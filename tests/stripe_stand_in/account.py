"""A Stripe account's objects, shaped as Stripe's published fixtures (vendor/fixtures.json): every object
starts as a copy of its resource's fixture, takes the fields the test describes, and gets the derived ones
(an invoice's totals from its lines) so what the SDK reads is consistent. Loadable from a plain description:

    account = StripeAccount()
    account.load({"customer": [{"id": "cus_1", "name": "Acme"}],
                  "invoice": [{"id": "in_1", "customer": "cus_1", "status": "paid",
                               "lines": [{"id": "il_1", "amount": 2000}]}]})
"""

from __future__ import annotations

import copy
import itertools
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from tests.stripe_stand_in.operations import fixtures

ID_PREFIXES = {
    "charge": "ch",
    "coupon": "co",
    "credit_note": "cn",
    "credit_note_line_item": "cnli",
    "customer": "cus",
    "customer_balance_transaction": "cbtxn",
    "event": "evt",
    "invoice": "in",
    "line_item": "il",
    "payment_intent": "pi",
    "price": "price",
    "product": "prod",
    "refund": "re",
    "subscription": "sub",
    "subscription_item": "si",
    "tax_rate": "txr",
}
# Where a list's objects are: the resource each collection of the API path names.
COLLECTIONS = {
    "charges": "charge",
    "coupons": "coupon",
    "credit_notes": "credit_note",
    "customers": "customer",
    "events": "event",
    "invoices": "invoice",
    "payment_intents": "payment_intent",
    "prices": "price",
    "products": "product",
    "refunds": "refund",
    "subscriptions": "subscription",
    "tax_rates": "tax_rate",
}
FIRST_CREATED = 1_780_000_000  # 2026-05-28: objects a test adds are created a second apart from here

# Fixture fields that hold made-up sample values and must not leak into a test's objects.
_INVOICE_RESET = {
    "amount_overpaid": 0,
    "amount_shipping": 0,
    "from_invoice": None,
    "last_finalization_error": None,
    "post_payment_credit_notes_amount": 0,
    "pre_payment_credit_notes_amount": 0,
    "shipping_cost": None,
    "starting_balance": 0,
    "ending_balance": 0,
    "total_discount_amounts": [],
    "total_pretax_credit_amounts": [],
    "total_taxes": [],
    "parent": None,
}


class StripeAccount:
    """Objects by resource and id, in creation order, plus the events Stripe would have recorded."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        self._clock = itertools.count(FIRST_CREATED)

    def now(self) -> int:
        return next(self._clock)

    def new_id(self, resource: str) -> str:
        return f"{ID_PREFIXES.get(resource, 'obj')}_{secrets.token_hex(8)}"

    def load(self, description: Mapping[str, Iterable[Mapping[str, Any]]]) -> None:
        for resource, described in description.items():
            for fields in described:
                self.add(resource, **fields)

    def add(self, resource: str, **fields: Any) -> dict[str, Any]:
        """A new object of this resource: the fixture, then these fields; invoices get their totals."""
        if resource == "invoice":
            return self._add_invoice(fields)
        stored = self.shaped(resource, fields)
        self.objects.setdefault(resource, {})[stored["id"]] = stored
        return stored

    def shaped(self, resource: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(fixtures()[resource])
        stored.update(livemode=False, metadata={}, created=self.now())
        stored.update(fields)
        if not fields.get("id"):
            stored["id"] = self.new_id(resource)
        return stored

    def get(self, resource: str, object_id: str) -> dict[str, Any] | None:
        return self.objects.get(resource, {}).get(object_id)

    def all(self, resource: str) -> list[dict[str, Any]]:
        return list(self.objects.get(resource, {}).values())

    def record_event(
        self, event_type: str, data_object: Mapping[str, Any], *, at: int | None = None, **extra: Any
    ) -> dict[str, Any]:
        """An event as Stripe records one (listed newest first by /v1/events), created now or `at`."""
        return self.add(
            "event",
            type=event_type,
            data={"object": copy.deepcopy(dict(data_object)), **extra},
            api_version=None,
            pending_webhooks=0,
            request={"id": None, "idempotency_key": None},
            **({"created": at} if at is not None else {}),
        )

    def change_subscription(
        self, subscription_id: str, at: int, *, price: str | None = None, quantity: int | None = None
    ) -> dict[str, Any]:
        """The subscription's first item moved to another price and/or quantity at `at`, as
        `POST /v1/subscriptions/:id` does; returns the `customer.subscription.updated` event Stripe records,
        whose `data.previous_attributes.items` is the whole items list as it was (Stripe sends an array
        attribute whole when any element of it changed). Prorations are the test's to add, or not (as with
        `proration_behavior=none`)."""
        subscription = self.objects["subscription"][subscription_id]
        before = copy.deepcopy(subscription["items"])
        first = subscription["items"]["data"][0]
        if price is not None:
            first["price"] = copy.deepcopy(self.get("price", price) or {"id": price})
        if quantity is not None:
            first["quantity"] = quantity
        return self.record_event(
            "customer.subscription.updated", subscription, at=at, previous_attributes={"items": before}
        )

    def _add_invoice(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        described = dict(fields)
        lines = described.pop("lines", [])
        invoice = self.shaped("invoice", {**_INVOICE_RESET, **described})
        invoice["lines"] = {
            "object": "list",
            "data": [self._invoice_line(invoice, line) for line in lines],
            "has_more": False,
            "url": f"/v1/invoices/{invoice['id']}/lines",
        }
        _settle_totals(invoice, described)
        self.objects.setdefault("invoice", {})[invoice["id"]] = invoice
        return invoice

    def _invoice_line(self, invoice: Mapping[str, Any], line: Mapping[str, Any]) -> dict[str, Any]:
        shaped = copy.deepcopy(fixtures()["line_item"])
        shaped.update(
            invoice=invoice["id"],
            currency=invoice["currency"],
            livemode=False,
            metadata={},
            parent=None,
            pretax_credit_amounts=[],
            taxes=[],
        )
        shaped.update(line)
        if "subtotal" not in line:
            shaped["subtotal"] = shaped["amount"]
        if not line.get("id"):
            shaped["id"] = self.new_id("line_item")
        return shaped


def _settle_totals(invoice: dict[str, Any], described: Mapping[str, Any]) -> None:
    """Totals from the lines unless the description names them; a paid invoice was paid in full."""
    subtotal = sum(line["amount"] for line in invoice["lines"]["data"])
    tax = sum(entry.get("amount", 0) for entry in invoice.get("total_taxes") or [])
    defaults = {
        "subtotal": subtotal,
        "subtotal_excluding_tax": subtotal,
        "total_excluding_tax": subtotal,
        "total": subtotal + tax,
    }
    for name, value in defaults.items():
        if name not in described:
            invoice[name] = value
    if "amount_due" not in described:
        invoice["amount_due"] = invoice["total"]
    if "amount_paid" not in described:
        invoice["amount_paid"] = invoice["amount_due"] if invoice.get("status") == "paid" else 0
    if "amount_remaining" not in described:
        invoice["amount_remaining"] = invoice["amount_due"] - invoice["amount_paid"]
