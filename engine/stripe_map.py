"""Stripe's objects as `billsleuth-ledger/2` records: pure functions, no SDK, no database.

Each takes the object as Stripe's API returns it (a plain dict, API version 2026-06-24.dahlia) and returns
its records, or None when the ledger cannot hold it (a customer in a country the billing rules do not
know, a price that is not a per-unit monthly or yearly one, a draft invoice); engine.stripe_sync counts
those as skipped. Amounts are Stripe's minor units, written back in the currency's decimals; instants
are unix seconds, written in the customer's time zone so that the dates beside them are the customer's
local dates, which the billing rules read.

What is Stripe's and what is ours:
- a price is a plan (per seat and period); its product names it;
- a subscription's first item is its plan and seats (what the rules bill); all its items are `items`;
  it starts with a `create` event (the configuration before its first change) and, once Stripe says it
  ends, a `cancel` event; its plan and seat changes are engine.stripe_history's;
- an invoice's lines keep their Stripe ids; its discounts and taxes become one discount line and one tax
  line per rate (inclusive ones marked), so its header adds up as Stripe's does;
- a payment is an invoice payment that was paid, named by its payment intent (else its charge), which is
  also what a refund names;
- a credit note BillSleuth itself created (metadata `billsleuth_credit_note`) is not imported: the note
  is already ours and counts once; a refund it made names our note.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

from engine.money import minor_unit
from engine.pricebook import COUNTRY_TZ

Record = dict[str, Any]
Obj = Mapping[str, Any]
OUR_NOTE = "billsleuth_credit_note"  # the metadata key of a credit note BillSleuth created in Stripe
CREATE, CANCEL = ":create", ":cancel"  # the suffixes of a subscription's own event ids


@cache
def _zone(country: str) -> ZoneInfo:
    return ZoneInfo(COUNTRY_TZ[country])


def money(minor: int | None, currency: str) -> str:
    """Stripe's minor units as the format writes money: exactly the currency's decimals."""
    places = minor_unit(currency)
    return f"{Decimal(minor or 0).scaleb(-places):.{places}f}"


def instant(seconds: int, country: str) -> datetime:
    return datetime.fromtimestamp(seconds, UTC).astimezone(_zone(country))


def local_day(seconds: int, country: str) -> str:
    return instant(seconds, country).date().isoformat()


def _at(seconds: int, country: str) -> str:
    return instant(seconds, country).isoformat()


def ref_id(value: Any) -> str | None:
    """An expandable field: the id, whether Stripe sent it or the object."""
    if isinstance(value, Mapping):
        return value.get("id")
    return value if isinstance(value, str) else None


# ---- customers and the price book ----


def customer(c: Obj, fallback_currency: str | None) -> Record | None:
    """None: a country the rules do not know, or no currency yet (nothing billed)."""
    country = ((c.get("address") or {}).get("country") or "").upper()
    currency = (c.get("currency") or fallback_currency or "").upper()
    if country not in COUNTRY_TZ or not currency:
        return None
    record: Record = {
        "type": "customer",
        "id": c["id"],
        "name": c.get("name") or c.get("email") or c["id"],
        "country": country,
        "currency": currency,
        "tax_region": country,
    }
    if c.get("email"):
        record["contact_email"] = c["email"]
    return record


def plan(price: Obj, product_name: str | None) -> Record | None:
    """A per-unit monthly or yearly price; None for any other (one-time, tiered, metered, every N)."""
    recurring = price.get("recurring") or {}
    if (
        price.get("billing_scheme") != "per_unit"
        or recurring.get("interval") not in ("month", "year")
        or recurring.get("interval_count", 1) != 1
        or price.get("unit_amount") is None
    ):
        return None
    currency = price["currency"].upper()
    name = " · ".join(part for part in (product_name, price.get("nickname")) if part) or price["id"]
    return {
        "type": "plan",
        "id": price["id"],
        "name": name,
        "interval": recurring["interval"],
        "unit_price": money(price["unit_amount"], currency),
    }


def coupon(c: Obj) -> Record:
    record: Record = {"type": "coupon", "id": c["id"], "duration": c["duration"]}
    if c.get("percent_off") is not None:
        record |= {"kind": "percent", "value": f"{Decimal(str(c['percent_off'])):.2f}"}
    else:
        currency = c["currency"].upper()
        record |= {"kind": "amount", "value": money(c["amount_off"], currency), "currency": currency}
    if c["duration"] == "repeating":
        record["duration_months"] = c.get("duration_in_months") or 1
    return record


def tax_rate(r: Obj) -> Record:
    """Valid from its creation; the ledger holds a rate to four decimals (Stripe's 8.875 % → 0.0888)."""
    rate = (Decimal(str(r["percentage"])) / 100).quantize(Decimal("0.0001"))
    return {
        "type": "tax_rate",
        "code": r["id"],
        "region": (r.get("country") or r.get("jurisdiction") or "").upper() or r["id"],
        "rate": f"{rate}",
        "valid_from": datetime.fromtimestamp(r["created"], UTC).date().isoformat(),
        "inclusive": bool(r.get("inclusive")),
    }


# ---- subscriptions ----

_STATUS = {"canceled": "canceled", "incomplete_expired": "canceled", "paused": "paused"}


def subscription_items(s: Obj) -> list[Obj]:
    """A subscription's items, first first (its `items` list object's data)."""
    return (s.get("items") or {}).get("data") or []


def holds_subscription(s: Obj, plans: set[str]) -> bool:
    """Whether the ledger can hold the subscription: its first item's price is a plan."""
    items = subscription_items(s)
    return bool(items) and ref_id(items[0]["price"]) in plans


def subscription(
    s: Obj, country: str, plans: set[str], initial: tuple[str, int] | None = None
) -> list[Record] | None:
    """The subscription and its own events; None when its first item's price is not a plan. initial: the
    first item's price and quantity before its first change (engine.stripe_history), else the current."""
    if not holds_subscription(s, plans):
        return None
    items = subscription_items(s)
    first = items[0]
    start = s.get("start_date") or s["created"]
    period_start = first.get("current_period_start") or s.get("current_period_start") or start
    period_end = first.get("current_period_end") or s.get("current_period_end") or period_start + 1
    record: Record = {
        "type": "subscription",
        "id": s["id"],
        "customer_id": ref_id(s["customer"]),
        "plan_id": ref_id(first["price"]),
        "quantity": max(first.get("quantity") or 1, 1),
        "status": _STATUS.get(s["status"], "active"),
        "start_date": local_day(start, country),
        "current_period_start": local_day(period_start, country),
        "current_period_end": _after(local_day(period_end, country), local_day(period_start, country)),
        # The rules anchor on days 1-28; a subscription anchored on the 29th-31st bills on the 28th.
        "billing_anchor_day": min(instant(s.get("billing_cycle_anchor") or start, country).day, 28),
        "items": [
            {"id": item["id"], "plan_id": ref_id(item["price"]), "quantity": item.get("quantity") or 0}
            for item in items
            if ref_id(item["price"]) in plans
        ],
    }
    coupon_id = _subscription_coupon(s)
    if coupon_id is not None:
        record["coupon_id"] = coupon_id
    events = [
        {
            "type": "subscription_event",
            "id": s["id"] + CREATE,
            "subscription_id": s["id"],
            "event_type": "create",
            "effective_at": _at(start, country),
            "payload": {
                "plan_id": initial[0] if initial else record["plan_id"],
                "quantity": initial[1] if initial else record["quantity"],
            },
        }
    ]
    ends = s.get("canceled_at") or s.get("cancel_at")
    if ends:
        events.append(
            {
                "type": "subscription_event",
                "id": s["id"] + CANCEL,
                "subscription_id": s["id"],
                "event_type": "cancel",
                "effective_at": _at(ends, country),
                "payload": {},
            }
        )
    return [record, *events]


# How late a discount may begin and still have begun with its subscription (Stripe stamps one added at
# creation with the creation's second, a few seconds after the subscription's own `created` at most).
WITH_THE_SUBSCRIPTION = 3600


def _subscription_coupon(s: Obj) -> str | None:
    """The coupon of a discount that began with the subscription. The rules count a coupon's duration
    from the subscription's start, so one applied later is not held: held, it would make the invoices
    before it look short of a discount, a false `coupon_not_applied` overcharge."""
    began = max(s.get("created") or 0, s.get("start_date") or 0) + WITH_THE_SUBSCRIPTION
    for discount in s.get("discounts") or []:
        if isinstance(discount, Mapping) and (discount.get("start") or 0) <= began:
            source = discount.get("source") or {}
            found = ref_id(source.get("coupon")) or ref_id(discount.get("coupon"))
            if found:
                return found
    return None


def _after(end: str, start: str) -> str:
    """A period's end date after its start (a period shorter than a day ends the next day)."""
    if end > start:
        return end
    return (date.fromisoformat(start) + timedelta(days=1)).isoformat()


# ---- invoices, payments, refunds, credit notes ----

_INVOICE_STATUS = {"paid": "paid", "open": "open", "void": "void", "uncollectible": "open"}


def invoice_subscription(inv: Obj) -> str | None:
    details = ((inv.get("parent") or {}).get("subscription_details")) or {}
    return ref_id(details.get("subscription")) or ref_id(inv.get("subscription"))


def _proration(line: Obj) -> tuple[bool, bool]:
    """(from a subscription item, a proration)."""
    parent = line.get("parent") or {}
    sub_item = parent.get("subscription_item_details")
    if parent.get("type") == "subscription_item_details" and sub_item:
        return True, bool(sub_item.get("proration"))
    item = parent.get("invoice_item_details") or {}
    return False, bool(item.get("proration"))


def invoice(inv: Obj, country: str, subscriptions: set[str]) -> Record | None:
    """None for a draft (not billed yet) or an invoice of a subscription the ledger does not hold."""
    status = _INVOICE_STATUS.get(inv.get("status") or "")
    subscription_id = invoice_subscription(inv)
    if status is None or (subscription_id is not None and subscription_id not in subscriptions):
        return None
    currency = inv["currency"].upper()
    lines, discount, taxes = [], 0, defaultdict(int)
    period: tuple[int, int] | None = None
    for line in (inv.get("lines") or {}).get("data") or []:
        from_item, proration = _proration(line)
        kind = "proration" if proration else ("recurring" if from_item else "adjustment")
        quantity = line.get("quantity") or 1
        start, end = (line.get("period") or {}).get("start"), (line.get("period") or {}).get("end")
        if kind == "recurring" and period is None and start and end:
            period = (start, end)
        lines.append(_line(line, kind, quantity, currency, country))
        discount += sum(d.get("amount", 0) for d in line.get("discount_amounts") or [])
        for tax in line.get("taxes") or []:
            rate = ref_id((tax.get("tax_rate_details") or {}).get("tax_rate")) or "tax"
            taxes[(rate, tax.get("tax_behavior") == "inclusive")] += tax.get("amount", 0)
    if discount:
        lines.append(_extra(inv["id"], "discount", "Discounts", -discount, currency))
    for (rate, inclusive), amount in sorted(taxes.items()):
        tax_line = _extra(inv["id"], f"tax:{rate}", "Tax", amount, currency) | {"tax_code": rate}
        lines.append(tax_line | ({"inclusive": True} if inclusive else {}))
    # A subscription invoice's period is its recurring line's (Stripe's own period_start/end are the
    # window invoice items were collected in); a one-off invoice's is the day it was created.
    start, end = period or (inv["created"], inv["created"])
    issued = (inv.get("status_transitions") or {}).get("finalized_at") or inv["created"]
    record: Record = {
        "type": "invoice",
        "id": inv["id"],
        "customer_id": ref_id(inv["customer"]),
        "period_start": local_day(start, country),
        "period_end": _after(local_day(end, country), local_day(start, country)),
        "period_start_at": _at(start, country),
        "issued_at": local_day(issued, country),
        "status": status,
        "currency": currency,
        "created_at": _at(inv["created"], country),
        "lines": lines,
        **_header(lines, currency),
    }
    if end > start:
        record["period_end_at"] = _at(end, country)
    if subscription_id is not None:
        record["subscription_id"] = subscription_id
    return record


def _line(line: Obj, kind: str, quantity: int, currency: str, country: str) -> Record:
    amount = line.get("amount", 0)
    unit = (line.get("pricing") or {}).get("unit_amount_decimal")
    unit_minor = Decimal(unit) if unit is not None else Decimal(amount) / quantity
    record: Record = {
        "id": line["id"],
        "kind": kind,
        "description": line.get("description") or "",
        "quantity": quantity,
        "unit_amount": money(int(unit_minor.to_integral_value()), currency),
        "amount": money(amount, currency),
    }
    period = line.get("period") or {}
    if period.get("start") and period.get("end"):
        start, end = period["start"], period["end"]
        record |= {"period_start": local_day(start, country), "period_start_at": _at(start, country)}
        record["period_end"] = _after(local_day(end, country), record["period_start"])
        if end > start:
            record["period_end_at"] = _at(end, country)
    return record


def _extra(invoice_id: str, suffix: str, description: str, minor: int, currency: str) -> Record:
    amount = money(minor, currency)
    return {
        "id": f"{invoice_id}:{suffix}",
        "kind": suffix.split(":")[0],
        "description": description,
        "quantity": 1,
        "unit_amount": amount,
        "amount": amount,
    }


def _header(lines: list[Record], currency: str) -> Record:
    """The header as the lines add up (what the format checks and Stripe's own totals say)."""
    places = minor_unit(currency)

    def total(kinds: tuple[str, ...], inclusive: bool | None = None) -> Decimal:
        return sum(
            (
                Decimal(line["amount"])
                for line in lines
                if line["kind"] in kinds and (inclusive is None or line.get("inclusive", False) == inclusive)
            ),
            Decimal(0),
        )

    subtotal = total(("recurring", "proration", "adjustment"))
    discount = -total(("discount",))
    tax, inclusive = total(("tax",)), total(("tax",), inclusive=True)
    figures = {
        "subtotal": subtotal,
        "discount": discount,
        "tax": tax,
        "total": subtotal - discount + tax - inclusive,
    }
    header = {name: f"{value:.{places}f}" for name, value in figures.items()}
    if inclusive:
        header["inclusive_tax"] = f"{inclusive:.{places}f}"
    return header


def payment_id(charge: Any, payment_intent: Any) -> str | None:
    """A payment's id in the ledger: its payment intent's, else its charge's (what refunds name too)."""
    return ref_id(payment_intent) or ref_id(charge)


def payments(inv: Obj, country: str) -> list[Record]:
    """The invoice's paid invoice payments (Stripe lists them under `payments` when expanded)."""
    currency = inv["currency"].upper()
    found = []
    for paid in (inv.get("payments") or {}).get("data") or []:
        source = paid.get("payment") or {}
        ledger_id = payment_id(source.get("charge"), source.get("payment_intent"))
        if paid.get("status") != "paid" or ledger_id is None or not paid.get("amount_paid"):
            continue
        at = (paid.get("status_transitions") or {}).get("paid_at") or paid.get("created") or inv["created"]
        found.append(
            {
                "type": "payment",
                "id": ledger_id,
                "invoice_id": inv["id"],
                "amount": money(paid["amount_paid"], currency),
                "status": "succeeded",
                "attempted_at": _at(at, country),
                "gateway_ref": ref_id(source.get("charge")) or ledger_id,
            }
        )
    return found


def refund(r: Obj, credit_note_id: str | None) -> Record:
    """credit_note_id: the credit note that made it (Stripe's, or our own note's id), if one did."""
    currency = r["currency"].upper()
    record: Record = {
        "type": "refund",
        "id": r["id"],
        "payment_id": payment_id(r.get("charge"), r.get("payment_intent")),
        "amount": money(r["amount"], currency),
        "status": r.get("status") if r.get("status") in ("succeeded", "pending", "failed") else "canceled",
        "created_at": datetime.fromtimestamp(r["created"], UTC).isoformat(),
    }
    if credit_note_id is not None:
        record["credit_note_id"] = credit_note_id
    return record


def ours(note: Obj) -> str | None:
    """The id of BillSleuth's own note a Stripe credit note was created for, if it was."""
    value = (note.get("metadata") or {}).get(OUR_NOTE)
    return value or None


def credit_note(note: Obj, country: str) -> Record | None:
    """A credit note Stripe issued itself; None for one BillSleuth created (already ours: counted once)."""
    if ours(note) is not None:
        return None
    currency = note["currency"].upper()
    return {
        "type": "credit_note",
        "id": note["id"],
        "invoice_id": ref_id(note["invoice"]),
        "amount": money(note["amount"], currency),
        "reason": note.get("reason") or "other",
        "status": "void" if note.get("status") == "void" else "issued",
        "currency": currency,
        "issued_at": _at(note.get("effective_at") or note["created"], country),
    }


def refunds_of_notes(notes: list[Obj]) -> dict[str, str]:
    """refund id → the note that made it: Stripe's note, or, for one BillSleuth created, our note."""
    found: dict[str, str] = {}
    for note in notes:
        for entry in note.get("refunds") or []:
            refund_id = ref_id(entry.get("refund")) if isinstance(entry, Mapping) else ref_id(entry)
            if refund_id:
                found[refund_id] = ours(note) or note["id"]
    return found
