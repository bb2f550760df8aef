"""Properties of the billing engine that must hold for any subscription history (Hypothesis).

Histories are random: anchor day, start date, seats, plan, coupon, country, and a list of events at
random local times (plan and seat changes within the same interval, pause/resume, cancel).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.billing import add_months, build_invoices, local_date
from engine.model import Coupon, Customer, Event, Invoice, Line, Plan, Subscription
from engine.money import money, prorate
from engine.pricebook import COUNTRY_TZ, COUPONS, PLANS, TAX_RATES

PROFILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLAN_BY_NAME = {plan.name: plan for plan in PLANS.values()}
CHANGES = ("upgrade", "downgrade", "quantity_change")
LIFECYCLE = ("pause", "resume", "cancel")


@dataclass(frozen=True)
class History:
    customer: Customer
    subscription: Subscription
    plan: Plan
    coupon: Coupon | None
    until: date

    @property
    def step_months(self) -> int:
        return 12 if self.plan.interval == "year" else 1

    def bill(self) -> list[Invoice]:
        return build_invoices(self.customer, self.subscription, PLANS, self.coupon, TAX_RATES, self.until)

    def dated_events(self, *kinds: str) -> list[tuple[date, Event]]:
        """The events of these kinds with the customer's local date of each."""
        return [
            (local_date(ev.effective_at, self.customer.country), ev)
            for ev in self.subscription.events
            if ev.type in kinds
        ]

    def event_days(self, kind: str) -> list[date]:
        return [day for day, _ in self.dated_events(kind)]


@st.composite
def histories(
    draw: st.DrawFn, kinds: tuple[str, ...] = CHANGES + LIFECYCLE, min_events: int = 1, max_events: int = 6
) -> History:
    country = draw(st.sampled_from(sorted(COUNTRY_TZ)))
    zone = ZoneInfo(COUNTRY_TZ[country])
    anchor = draw(st.integers(1, 28))
    start = draw(st.dates(date(2024, 1, 1), date(2026, 12, 31)))
    interval = draw(st.sampled_from(["month", "year"]))
    same_interval = sorted(p.id for p in PLANS.values() if p.interval == interval)
    plan = PLANS[draw(st.sampled_from(same_interval))]
    seats = draw(st.integers(1, 20))
    coupon = draw(st.none() | st.sampled_from(sorted(COUPONS)))
    horizon = 400 if interval == "month" else 3 * 366
    last_event = horizon - (40 if interval == "month" else 370)  # leave room for the next invoice

    def local_instant() -> datetime:
        day = start + timedelta(days=draw(st.integers(-20, last_event)))
        clock = draw(st.times(time(0, 0), time(23, 59)))
        return datetime.combine(day, clock, tzinfo=zone)

    events = [
        Event(
            "E0",
            "create",
            datetime.combine(start, time(9), tzinfo=zone),
            {"plan_id": plan.id, "quantity": seats},
        )
    ]
    for n in range(1, draw(st.integers(min_events, max_events)) + 1):
        kind = draw(st.sampled_from(kinds))
        payload: dict[str, object] = {}
        if kind in ("upgrade", "downgrade"):
            payload["to_plan"] = draw(st.sampled_from(same_interval))
            if draw(st.booleans()):
                payload["to_quantity"] = draw(st.integers(1, 20))
        elif kind == "quantity_change":
            payload["to_quantity"] = draw(st.integers(1, 20))
        events.append(Event(f"E{n}", kind, local_instant(), payload))

    customer = Customer("C-0001", "Property customer", country, "USD", country)
    subscription = Subscription("SUB-0001", customer.id, start, anchor, coupon, events)
    until = start + timedelta(days=horizon)
    return History(customer, subscription, plan, COUPONS[coupon] if coupon else None, until)


# Pauses only leave a gap between invoices when a resume follows; without cancels in the mix they do often.
ANY_HISTORY = histories() | histories(kinds=(*CHANGES, "pause", "resume"), min_events=2)


def index_of(invoice: Invoice) -> int:
    return int(invoice.id.rsplit("-", 1)[1])


def proration_pairs(invoice: Invoice) -> list[tuple[Line, Line]]:
    """Each change yields a credit for the old configuration followed by a charge for the new one."""
    prorations = [line for line in invoice.lines if line.kind == "proration"]
    assert len(prorations) % 2 == 0
    pairs = list(zip(prorations[::2], prorations[1::2], strict=True))
    for credit, charge in pairs:
        assert credit.description.startswith("Unused time on ")
        assert charge.description.startswith("Remaining time on ")
        assert (credit.period_start, credit.period_end) == (charge.period_start, charge.period_end)
    return pairs


def full_price(line: Line) -> Decimal:
    """The whole-period price of the configuration a proration line names ("<plan> × <n> seats")."""
    name = line.description.split(" on ", 1)[1].split(" × ", 1)[0]
    return PLAN_BY_NAME[name].unit_price * line.quantity


def sign(value: Decimal) -> int:
    return (value > 0) - (value < 0)


# --- totals -------------------------------------------------------------------------------------------


@PROFILE
@given(ANY_HISTORY)
def test_lines_sum_to_the_total_and_the_headline_adds_up(history: History) -> None:
    for invoice in history.bill():
        assert invoice.lines
        assert invoice.total == money(sum((line.amount for line in invoice.lines), Decimal(0)))
        assert invoice.total == money(invoice.subtotal - invoice.discount + invoice.tax)
        # A coupon never takes off more than the base it applies to, and never adds anything
        assert Decimal(0) <= invoice.discount <= max(invoice.subtotal, Decimal(0))


# --- periods ------------------------------------------------------------------------------------------


@PROFILE
@given(ANY_HISTORY)
def test_periods_are_contiguous_and_end_exclusively(history: History) -> None:
    invoices = history.bill()
    sub = history.subscription
    assert invoices, "the first period is always billed"
    assert invoices[0].period_start == sub.start_date and index_of(invoices[0]) == 1
    for invoice in invoices:
        assert invoice.issued_at == invoice.period_start <= history.until
        assert invoice.period_end == add_months(
            invoice.period_start, history.step_months, sub.billing_anchor_day
        )
        days = (invoice.period_end - invoice.period_start).days
        if invoice.period_start.day == sub.billing_anchor_day:  # every period but a short first one
            assert days in ((28, 29, 30, 31) if history.step_months == 1 else (365, 366))
        for line in invoice.lines:
            if line.kind == "recurring":
                assert (line.period_start, line.period_end) == (invoice.period_start, invoice.period_end)
            if line.kind == "proration":
                # Settles the previous period, which ends (exclusively) where this one starts
                assert line.period_end == invoice.period_start
                assert line.period_start is not None and line.period_start < line.period_end
    for before, after in pairwise(invoices):
        assert index_of(after) > index_of(before)
        if index_of(after) == index_of(before) + 1:
            assert after.period_start == before.period_end  # contiguous: no gap, no overlap
        else:
            assert after.period_start > before.period_end  # skipped periods were paused
    if not history.event_days("pause"):
        assert [index_of(i) for i in invoices] == list(range(1, len(invoices) + 1))


@PROFILE
@given(histories())
def test_nothing_is_billed_after_the_period_a_cancel_falls_in(history: History) -> None:
    cancels = [day for day in history.event_days("cancel") if day >= history.subscription.start_date]
    if cancels:
        assert all(invoice.period_start <= min(cancels) for invoice in history.bill())


# --- proration direction -------------------------------------------------------------------------------


@PROFILE
@given(ANY_HISTORY)
def test_net_proration_has_the_sign_of_the_price_change(history: History) -> None:
    for invoice in history.bill():
        for credit, charge in proration_pairs(invoice):
            old, new = full_price(credit), full_price(charge)
            assert credit.amount <= 0 <= charge.amount
            assert sign(charge.amount + credit.amount) == sign(new - old)


@PROFILE
@given(ANY_HISTORY)
def test_prorations_only_settle_periods_that_were_charged(history: History) -> None:
    invoices = history.bill()
    charged = {
        (line.period_start, line.period_end)
        for invoice in invoices
        for line in invoice.lines
        if line.kind == "recurring"
    }
    for invoice in invoices:
        for line in invoice.lines:
            if line.kind == "proration":
                assert any(start <= line.period_start and line.period_end == end for start, end in charged)


@PROFILE
@given(histories(kinds=CHANGES, min_events=1, max_events=1))
def test_a_single_change_is_settled_on_the_next_invoice(history: History) -> None:
    invoices = history.bill()
    changes = history.dated_events(*CHANGES)
    if not changes:
        return
    ((day, change),) = changes
    billed = {invoice.period_start: invoice for invoice in invoices}
    # The period the change falls in, if it was billed and a next invoice exists
    holder = next((i for i in invoices if i.period_start <= day < i.period_end), None)
    if holder is None or holder.period_end not in billed:
        return
    pairs = proration_pairs(billed[holder.period_end])
    assert len(pairs) == 1
    credit, charge = pairs[0]
    assert credit.period_start == day
    remaining, days = (holder.period_end - day).days, (holder.period_end - holder.period_start).days
    old_seats = history.subscription.events[0].payload["quantity"]
    assert isinstance(old_seats, int) and credit.quantity == old_seats
    # Rounded once: the whole-period price × remaining / days, never a rounded daily rate
    assert credit.amount == -prorate(money(history.plan.unit_price * old_seats), remaining, days)
    if change.type == "quantity_change" and charge.quantity > old_seats:
        assert charge.amount + credit.amount > 0  # a pure seat increase always costs something
    assert all(not proration_pairs(i) for i in invoices if i is not billed[holder.period_end])


# --- money never sees a float -------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_money_refuses_every_float(value: float) -> None:
    with pytest.raises(TypeError):
        money(value)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        prorate(value, 1, 30)  # type: ignore[arg-type]


@PROFILE
@given(ANY_HISTORY)
def test_every_amount_is_a_decimal_in_cents(history: History) -> None:
    for invoice in history.bill():
        headline = (invoice.subtotal, invoice.discount, invoice.tax, invoice.total)
        for amount in (*headline, *(x for line in invoice.lines for x in (line.amount, line.unit_amount))):
            assert type(amount) is Decimal
            assert amount.as_tuple().exponent == -2
