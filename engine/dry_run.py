"""`billsleuth dry-run`: a JSON description of one subscription in, the invoices the rules produce out.

Money in the input must be a JSON string ("39.00"); a JSON number in a money field is refused, because it
has already been parsed as a binary float by the time anyone looks at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypeVar

from engine.billing import build_invoices
from engine.model import (
    EVENT_TYPES,
    BillingError,
    Coupon,
    Customer,
    Event,
    Invoice,
    Plan,
    Subscription,
    TaxRate,
)
from engine.money import fmt, money
from engine.pricebook import COUNTRY_TZ, COUPONS, PLANS, TAX_RATES

T = TypeVar("T")

# A billing history is bounded: `until` at most this many years after the start (1200 monthly invoices),
# and the dates it bills between these days, so period arithmetic never leaves what a date can hold.
MAX_YEARS = 100
EARLIEST, LATEST = date(1900, 1, 1), date(2999, 12, 31)


@dataclass(frozen=True)
class DryRun:
    customer: Customer
    subscription: Subscription
    plans: dict[str, Plan]
    coupons: dict[str, Coupon]
    tax_rates: list[TaxRate]
    until: date


def _field(obj: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise BillingError(f"{where} must be a JSON object")
    if key not in obj or obj[key] is None:
        raise BillingError(f"{where}.{key} is missing")
    return obj[key]


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = _field(obj, key, where)
    if not isinstance(value, str) or not value.strip():
        raise BillingError(f"{where}.{key} must be a non-empty string")
    return value


def _money(obj: dict[str, Any], key: str, where: str) -> Decimal:
    value = _field(obj, key, where)
    if not isinstance(value, str):
        raise BillingError(
            f'{where}.{key} must be a money string like "39.00", not a JSON {type(value).__name__}'
        )
    try:
        return money(value)
    except (ValueError, ArithmeticError):  # ArithmeticError: too many digits to hold to the cent
        raise BillingError(f"{where}.{key} is not an amount: {value!r}") from None


def _decimal(obj: dict[str, Any], key: str, where: str) -> Decimal:
    value = _field(obj, key, where)
    if not isinstance(value, str):
        raise BillingError(
            f'{where}.{key} must be a decimal string like "0.06", not a JSON {type(value).__name__}'
        )
    try:
        number = Decimal(value)
    except ArithmeticError:
        raise BillingError(f"{where}.{key} is not a number: {value!r}") from None
    if not number.is_finite():
        raise BillingError(f"{where}.{key} is not a finite number: {value!r}")
    return number


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    value = _field(obj, key, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BillingError(f"{where}.{key} must be a whole number")
    return value


def _date(value: Any, where: str) -> date:
    if not isinstance(value, str):
        raise BillingError(f"{where} must be a date string YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BillingError(f"{where} is not a date (YYYY-MM-DD): {value!r}") from None


def _billable(day: date, where: str) -> date:
    if not EARLIEST <= day <= LATEST:
        raise BillingError(f"{where} must be between {EARLIEST} and {LATEST}, got {day}")
    return day


def _instant(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise BillingError(f"{where} must be an ISO 8601 timestamp with a time zone")
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise BillingError(f"{where} is not an ISO 8601 timestamp: {value!r}") from None
    if instant.tzinfo is None:
        raise BillingError(f"{where} needs a time zone offset, e.g. 2026-07-15T00:30:00+08:00")
    _billable(instant.date(), where)
    return instant


def _list(
    data: dict[str, Any], key: str, parse: Callable[[dict[str, Any], str], T], default: T
) -> list[T] | T:
    if key not in data:
        return default
    items = data[key]
    if not isinstance(items, list):
        raise BillingError(f"{key} must be a JSON list")
    return [parse(item, f"{key}[{i}]") for i, item in enumerate(items)]


def _plan(obj: dict[str, Any], where: str) -> Plan:
    interval = _text(obj, "interval", where)
    if interval not in ("month", "year"):
        raise BillingError(f"{where}.interval must be month or year, got {interval!r}")
    price = _money(obj, "unit_price", where)
    if price < 0:
        raise BillingError(f"{where}.unit_price must not be negative, got {fmt(price)}")
    return Plan(_text(obj, "id", where), _text(obj, "name", where), interval, price)  # type: ignore[arg-type]


def _coupon(obj: dict[str, Any], where: str) -> Coupon:
    kind = _text(obj, "kind", where)
    if kind not in ("percent", "amount"):
        raise BillingError(f"{where}.kind must be percent or amount, got {kind!r}")
    value = _decimal(obj, "value", where)
    if value <= 0 or (kind == "percent" and value > 100):
        what = "a percent coupon" if kind == "percent" else "an amount coupon"
        limits = "more than 0 and at most 100" if kind == "percent" else "more than 0"
        raise BillingError(f"{where}.value of {what} must be {limits}, got {value}")
    months = _int(obj, "duration_months", where)
    if months <= 0:
        raise BillingError(f"{where}.duration_months must be at least 1, got {months}")
    return Coupon(_text(obj, "id", where), kind, value, months)  # type: ignore[arg-type]


def _rate(obj: dict[str, Any], where: str) -> TaxRate:
    valid_to = obj.get("valid_to") if isinstance(obj, dict) else None
    rate = TaxRate(
        _text(obj, "code", where),
        _text(obj, "region", where),
        _decimal(obj, "rate", where),
        _date(_field(obj, "valid_from", where), f"{where}.valid_from"),
        _date(valid_to, f"{where}.valid_to") if valid_to is not None else None,
    )
    if not 0 <= rate.rate < 1:
        raise BillingError(
            f"{where}.rate is a fraction (0.06 for 6%): at least 0 and below 1, got {rate.rate}"
        )
    if rate.valid_to is not None and rate.valid_to < rate.valid_from:
        raise BillingError(f"{where}.valid_to ({rate.valid_to}) is before valid_from ({rate.valid_from})")
    return rate


def _event(obj: dict[str, Any], where: str) -> Event:
    kind = _text(obj, "type", where)
    if kind not in EVENT_TYPES:
        raise BillingError(f"{where}.type must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    payload = obj.get("payload", {})
    if not isinstance(payload, dict):
        raise BillingError(f"{where}.payload must be a JSON object")
    return Event(
        _text(obj, "id", where),
        kind,
        _instant(_field(obj, "effective_at", where), f"{where}.effective_at"),
        payload,
    )


def parse_request(data: Any) -> DryRun:
    """Validate a dry-run request; every problem is a BillingError naming the field."""
    if not isinstance(data, dict):
        raise BillingError("the input must be a JSON object")
    c = _field(data, "customer", "input")
    customer = Customer(
        _text(c, "id", "customer"),
        _text(c, "name", "customer"),
        _text(c, "country", "customer"),
        _text(c, "currency", "customer"),
        _text(c, "tax_region", "customer"),
    )
    if customer.country not in COUNTRY_TZ:
        raise BillingError(
            f"customer.country must be one of {', '.join(COUNTRY_TZ)}, got {customer.country!r}"
        )
    s = _field(data, "subscription", "input")
    anchor = _int(s, "billing_anchor_day", "subscription")
    if not 1 <= anchor <= 28:
        raise BillingError(f"subscription.billing_anchor_day must be 1–28, got {anchor}")
    coupon_id = s.get("coupon_id")
    if coupon_id is not None and not isinstance(coupon_id, str):
        raise BillingError("subscription.coupon_id must be a coupon id string or null")
    events = _field(data, "events", "input")
    if not isinstance(events, list):
        raise BillingError("events must be a JSON list")
    subscription = Subscription(
        _text(s, "id", "subscription"),
        customer.id,
        _billable(
            _date(_field(s, "start_date", "subscription"), "subscription.start_date"),
            "subscription.start_date",
        ),
        anchor,
        coupon_id or None,
        [_event(e, f"events[{i}]") for i, e in enumerate(events)],
    )
    plans = {p.id: p for p in _list(data, "plans", _plan, list(PLANS.values()))}
    coupons = {k.id: k for k in _list(data, "coupons", _coupon, list(COUPONS.values()))}
    rates = _list(data, "tax_rates", _rate, list(TAX_RATES))
    if subscription.coupon_id and subscription.coupon_id not in coupons:
        raise BillingError(f"unknown coupon {subscription.coupon_id!r}")
    if not any(r.region == customer.tax_region for r in rates):
        raise BillingError(f"unknown tax region {customer.tax_region!r}")
    until = _billable(_date(_field(data, "until", "input"), "until"), "until")
    start = subscription.start_date
    if until > start.replace(year=start.year + MAX_YEARS, day=min(start.day, 28)):
        raise BillingError(f"until must be at most {MAX_YEARS} years after subscription.start_date ({start})")
    return DryRun(customer, subscription, plans, coupons, rates, until)


def run(request: DryRun) -> list[Invoice]:
    coupon = request.coupons.get(request.subscription.coupon_id) if request.subscription.coupon_id else None
    try:
        return build_invoices(
            request.customer, request.subscription, request.plans, coupon, request.tax_rates, request.until
        )
    except ArithmeticError:
        # Decimal's context gives up on figures with more digits than it keeps (absurd prices, seats, coupons)
        raise BillingError(
            "the prices, seat counts or coupon values are too large to bill to the cent"
        ) from None


def _day(value: date | None) -> str | None:
    return value.isoformat() if value else None


def invoice_json(invoice: Invoice) -> dict[str, Any]:
    return {
        "id": invoice.id,
        "period_start": invoice.period_start.isoformat(),
        "period_end": invoice.period_end.isoformat(),
        "issued_at": invoice.issued_at.isoformat(),
        "subtotal": fmt(invoice.subtotal),
        "discount": fmt(invoice.discount),
        "tax": fmt(invoice.tax),
        "total": fmt(invoice.total),
        "lines": [
            {
                "kind": line.kind,
                "description": line.description,
                "quantity": line.quantity,
                "unit_amount": fmt(line.unit_amount),
                "amount": fmt(line.amount),
                "period_start": _day(line.period_start),
                "period_end": _day(line.period_end),
                "tax_code": line.tax_code,
            }
            for line in invoice.lines
        ],
    }
