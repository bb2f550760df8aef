"""The billing domain's value objects: what the ledger holds and what the rules produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from engine.money import ZERO, money

Interval = Literal["month", "year"]
LineKind = Literal["recurring", "proration", "discount", "tax", "adjustment"]
# The lines that charge (what a discount and a tax are taken from), and those that each sum a part of
# every charge line (a billing system may round each part apart).
CHARGE_KINDS: tuple[str, ...] = ("recurring", "proration", "adjustment")
SUMMED_KINDS: tuple[str, ...] = ("discount", "tax")
EventType = Literal["create", "upgrade", "downgrade", "quantity_change", "cancel", "pause", "resume"]
EVENT_TYPES: tuple[str, ...] = (
    "create",
    "upgrade",
    "downgrade",
    "quantity_change",
    "cancel",
    "pause",
    "resume",
)


class BillingError(ValueError):
    """A request the rules refuse (e.g. switching between monthly and yearly), or inconsistent input."""


@dataclass(frozen=True)
class Customer:
    id: str
    name: str
    country: str  # CN / SG / DE / US: also decides the time zone
    currency: str
    tax_region: str
    source: str | None = None  # the ledger file's `source` (engine.profiles picks the rules by it)


@dataclass(frozen=True)
class Plan:
    id: str
    name: str
    interval: Interval
    unit_price: Decimal  # per seat per billing period


@dataclass(frozen=True)
class Coupon:
    id: str
    kind: Literal["percent", "amount"]
    value: Decimal  # percent: 20 means 20 %; amount: 10.00 off
    duration_months: int
    duration: str | None = None  # once / repeating / forever (format 2); None: the first duration_months

    def covers(self, months_in: int) -> bool:
        """Whether the coupon still applies to an invoice `months_in` months after the subscription began."""
        return self.duration == "forever" or months_in < self.duration_months


@dataclass(frozen=True)
class TaxRate:
    code: str
    region: str
    rate: Decimal  # 0.09 means 9 %
    valid_from: date
    valid_to: date | None  # inclusive; None = still valid
    inclusive: bool = False  # already inside the prices it applies to (format 2)

    def valid_on(self, day: date) -> bool:
        return self.valid_from <= day and (self.valid_to is None or day <= self.valid_to)


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    effective_at: datetime  # timezone-aware
    payload: dict[str, Any]


@dataclass
class Subscription:
    id: str
    customer_id: str
    start_date: date
    billing_anchor_day: int
    coupon_id: str | None
    events: list[Event]


@dataclass
class Line:
    kind: str
    description: str
    quantity: int
    unit_amount: Decimal
    amount: Decimal
    period_start: date | None = None
    period_end: date | None = None
    tax_code: str | None = None
    inclusive: bool = False  # a tax already inside the other lines' amounts: not added to the total


@dataclass
class Invoice:
    """An invoice whose header figures are always derived from its lines, so they can never disagree."""

    id: str
    customer_id: str
    subscription_id: str | None  # None: a one-off invoice (format 2), which the rules do not judge
    period_start: date
    period_end: date  # exclusive
    issued_at: date
    currency: str
    status: str = "paid"
    lines: list[Line] = field(default_factory=list)
    created_at: datetime | None = None  # the billing system's creation instant, where it gives one

    def _sum(self, *kinds: str) -> Decimal:
        return money(sum([ln.amount for ln in self.lines if ln.kind in kinds], ZERO))

    @property
    def subtotal(self) -> Decimal:
        return self._sum(*CHARGE_KINDS)

    @property
    def discount(self) -> Decimal:
        return -self._sum("discount")  # discount lines are negative; the header holds a positive figure

    @property
    def tax(self) -> Decimal:
        return self._sum("tax")

    @property
    def inclusive_tax(self) -> Decimal:
        """The part of `tax` already inside the subtotal's prices (format 2): not added to the total."""
        return money(sum([ln.amount for ln in self.lines if ln.inclusive], ZERO))

    @property
    def total(self) -> Decimal:
        return money(sum([ln.amount for ln in self.lines if not ln.inclusive], ZERO))


@dataclass(frozen=True)
class Payment:
    id: str
    invoice_id: str
    amount: Decimal
    status: str  # succeeded / failed / refunded
    attempted_at: datetime
    gateway_ref: str


@dataclass(frozen=True)
class CreditNote:
    id: str
    invoice_id: str
    amount: Decimal
    reason: str
    status: str  # draft / approved / issued / rejected / expired


@dataclass
class CustomerLedger:
    """Everything the ledger holds about one customer, as billed (not as the rules say)."""

    customer: Customer
    subscriptions: list[Subscription]
    invoices: list[Invoice]
    payments: list[Payment]
    credit_notes: list[CreditNote] = field(default_factory=list)


@dataclass(frozen=True)
class PriceBook:
    plans: dict[str, Plan]
    coupons: dict[str, Coupon]
    tax_rates: list[TaxRate]
