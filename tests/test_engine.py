"""The reference billing engine, pinned with seed 002's hand-computed figures and the rules it states."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal as D

import pytest

from engine.billing import build_invoices, expected_by_period, local_date
from engine.model import BillingError, Coupon, Customer, Event, Invoice, Plan, Subscription
from engine.money import money, prorate
from engine.pricebook import COUPONS, PLANS, TAX_RATES

CN = Customer("C-0001", "Test customer", "CN", "USD", "CN")
SG = Customer("C-0002", "SG customer", "SG", "USD", "SG")
US = Customer("C-0003", "US customer", "US", "USD", "US")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def event(kind: str, when: str, **payload: object) -> Event:
    return Event(f"E-{kind}-{when}", kind, at(when), dict(payload))


def subscription(
    *events: Event,
    plan: str = "team-m",
    seats: int = 3,
    start: date = date(2026, 6, 5),
    anchor: int = 5,
    coupon_id: str | None = None,
) -> Subscription:
    create = Event(
        "E0", "create", at(f"{start.isoformat()}T09:00:00+08:00"), {"plan_id": plan, "quantity": seats}
    )
    return Subscription("SUB-0001", "C-0001", start, anchor, coupon_id, [create, *events])


def bill(
    sub: Subscription,
    until: date,
    customer: Customer = CN,
    coupon: Coupon | None = None,
    plans: dict[str, Plan] = PLANS,
) -> list[Invoice]:
    return build_invoices(customer, sub, plans, coupon, TAX_RATES, until=until)


def amounts(invoice: Invoice) -> list[tuple[str, D]]:
    return [(line.kind, line.amount) for line in invoice.lines]


def headline(invoice: Invoice) -> tuple[D, D, D, D]:
    return invoice.subtotal, invoice.discount, invoice.tax, invoice.total


# --- money -------------------------------------------------------------------------------------------


def test_money_refuses_float_and_rounds_half_up() -> None:
    with pytest.raises(TypeError, match="float"):
        money(0.1)  # type: ignore[arg-type]
    assert money("2.675") == D("2.68")  # round(2.675, 2) gives 2.67: the float was never 2.675
    assert money(D("0.125")) == D("0.13")  # HALF_UP, not the banker's rounding Decimal defaults to


def test_prorate_rounds_once_at_the_end() -> None:
    assert prorate(D("117.00"), 15, 30) == D("58.50")
    # 39 × 10 / 31 = 12.580645…; a rounded daily rate (1.26 × 10) would give 12.60
    assert prorate(D("39.00"), 10, 31) == D("12.58")


# --- seed 002's hand-computed cases -----------------------------------------------------------------


def test_plain_monthly_invoices_follow_the_anchor_day() -> None:
    invoices = bill(subscription(), until=date(2026, 8, 5))
    assert [i.period_start for i in invoices] == [date(2026, 6, 5), date(2026, 7, 5), date(2026, 8, 5)]
    first = invoices[0]
    assert (first.subtotal, first.tax, first.total) == (D("117.00"), D("7.02"), D("124.02"))
    assert first.id == "INV-0001-01"
    assert [i.id for i in invoices] == ["INV-0001-01", "INV-0001-02", "INV-0001-03"]
    # period_end is exclusive: it is the next period's first day, which is also that invoice's issue date
    assert first.period_end == invoices[1].period_start == invoices[1].issued_at == date(2026, 7, 5)


def test_upgrade_is_prorated_on_the_next_invoice() -> None:
    upgrade = event("upgrade", "2026-06-20T10:00:00+08:00", to_plan="business-m")
    first, second = bill(subscription(upgrade), until=date(2026, 7, 5))
    assert headline(first) == (D("117.00"), D("0.00"), D("7.02"), D("124.02"))  # the current one is untouched
    assert second.id == "INV-0001-02"
    assert amounts(second) == [
        ("proration", D("-58.50")),  # old plan 117 × 15/30
        ("proration", D("133.50")),  # new plan 267 × 15/30
        ("recurring", D("267.00")),
        ("tax", D("20.52")),
    ]
    assert (second.subtotal, second.tax, second.total) == (D("342.00"), D("20.52"), D("362.52"))


def test_event_date_is_the_customers_local_date() -> None:
    # 2026-06-19 17:30 UTC is 2026-06-20 01:30 in Shanghai: still 15 days left, not 16
    assert local_date(at("2026-06-19T17:30:00+00:00"), "CN") == date(2026, 6, 20)
    upgrade = event("upgrade", "2026-06-19T17:30:00+00:00", to_plan="business-m")
    second = bill(subscription(upgrade), until=date(2026, 7, 5))[1]
    assert second.lines[0].amount == D("-58.50")
    assert second.lines[0].period_start == date(2026, 6, 20)
    # The same instant is 10:30 on 06-19 in Los Angeles: 16 days left for a US customer
    us_second = bill(subscription(upgrade), until=date(2026, 7, 5), customer=US)[1]
    assert us_second.lines[0].amount == D("-62.40")  # 117 × 16/30


def test_percent_coupon_applies_only_within_its_duration() -> None:
    coupon = Coupon("WELCOME20", "percent", D("20"), 2)
    invoices = bill(subscription(coupon_id="WELCOME20"), until=date(2026, 8, 5), coupon=coupon)
    assert [i.discount for i in invoices] == [D("23.40"), D("23.40"), D("0.00")]
    assert invoices[0].tax == D("5.62")  # (117 − 23.40) × 6 % = 5.616
    assert invoices[0].total == D("99.22")
    assert not any(line.kind == "discount" for line in invoices[2].lines)


def test_cancel_takes_effect_at_period_end() -> None:
    cancel = event("cancel", "2026-07-10T12:00:00+08:00", at_period_end=True)
    invoices = bill(subscription(cancel), until=date(2026, 9, 5))
    assert [i.period_start for i in invoices] == [date(2026, 6, 5), date(2026, 7, 5)]
    assert invoices[1].total == D("124.02")  # the period the cancel falls in is billed in full
    assert expected_by_period(invoices).get(date(2026, 8, 5)) is None


def test_tax_rate_follows_its_validity_window() -> None:
    invoice = bill(subscription(), until=date(2026, 6, 5), customer=SG)[0]
    assert invoice.lines[-1].tax_code == "SG-GST9"
    assert invoice.tax == D("10.53")  # 117 × 9 %
    # Across the window's edge: December 2023 is still GST 8 %, January 2024 is 9 %
    old, new = bill(subscription(start=date(2023, 12, 5)), until=date(2024, 1, 5), customer=SG)
    assert (old.lines[-1].tax_code, old.tax) == ("SG-GST8", D("9.36"))
    assert (new.lines[-1].tax_code, new.tax) == ("SG-GST9", D("10.53"))


def test_lines_always_sum_to_total() -> None:
    change = event("quantity_change", "2026-07-12T08:00:00+08:00", to_quantity=5)
    coupon = Coupon("LAUNCH10", "amount", D("10.00"), 3)
    invoices = bill(subscription(change, coupon_id="LAUNCH10"), until=date(2026, 10, 5), coupon=coupon)
    assert len(invoices) == 5
    for invoice in invoices:
        assert invoice.total == money(sum((line.amount for line in invoice.lines), D(0)))
        assert invoice.total == money(invoice.subtotal - invoice.discount + invoice.tax)
    assert any(line.kind == "proration" for line in invoices[2].lines)


# --- rules the seed states without a test -----------------------------------------------------------


def test_yearly_plan_bills_once_a_year() -> None:
    sub = subscription(plan="team-y", start=date(2025, 10, 5))
    only = bill(sub, until=date(2026, 10, 4))
    assert [(i.period_start, i.period_end) for i in only] == [(date(2025, 10, 5), date(2026, 10, 5))]
    first, renewal = bill(sub, until=date(2026, 10, 5))
    assert renewal.period_start == first.period_end == date(2026, 10, 5)
    assert renewal.period_end == date(2027, 10, 5)
    assert headline(renewal) == (D("1170.00"), D("0.00"), D("70.20"), D("1240.20"))  # 390 × 3, 6 %


def test_coupon_months_count_from_the_subscription_start() -> None:
    # A three-month coupon on a yearly plan covers the first year's invoice only (months 0 and 12)
    sub = subscription(plan="team-y", start=date(2025, 10, 5), coupon_id="WELCOME20")
    first, renewal = bill(sub, until=date(2026, 10, 5), coupon=COUPONS["WELCOME20"])
    assert first.discount == D("234.00")
    assert renewal.discount == D("0.00")
    # Counted from the start even when the first period is a short one (start 06-20, anchor day 5)
    short_start = subscription(start=date(2026, 6, 20), coupon_id="WELCOME20")
    invoices = bill(short_start, until=date(2026, 9, 5), coupon=COUPONS["WELCOME20"])
    assert [i.period_start for i in invoices] == [date(2026, 6, 20), *(date(2026, m, 5) for m in (7, 8, 9))]
    assert [i.discount for i in invoices] == [D("23.40"), D("23.40"), D("23.40"), D("0.00")]


def test_pause_stops_the_next_period_and_resume_restarts_the_one_after() -> None:
    pause = event("pause", "2026-06-20T10:00:00+08:00")
    resume = event("resume", "2026-07-20T10:00:00+08:00")
    invoices = bill(subscription(pause, resume), until=date(2026, 9, 5))
    # June is billed (pause takes effect from the next period); July is not billed at all; August resumes
    assert [i.id for i in invoices] == ["INV-0001-01", "INV-0001-03", "INV-0001-04"]
    assert [i.total for i in invoices] == [D("124.02")] * 3
    still_paused = bill(subscription(pause), until=date(2026, 9, 5))
    assert [i.id for i in still_paused] == ["INV-0001-01"]


def test_proration_from_before_a_pause_still_reaches_the_next_invoice() -> None:
    upgrade = event("upgrade", "2026-06-20T10:00:00+08:00", to_plan="business-m")
    pause = event("pause", "2026-06-25T10:00:00+08:00")
    second = bill(subscription(upgrade, pause), until=date(2026, 7, 5))[1]
    assert amounts(second) == [("proration", D("-58.50")), ("proration", D("133.50")), ("tax", D("4.50"))]
    assert second.total == D("79.50")


def test_plan_change_during_a_paused_period_is_not_prorated() -> None:
    # July is paused and never charged: there are no unused days to credit and no remaining days to
    # charge. The new plan applies from the resume on.
    pause = event("pause", "2026-06-10T10:00:00+08:00")
    upgrade = event("upgrade", "2026-07-20T10:00:00+08:00", to_plan="business-m")
    resume = event("resume", "2026-07-25T10:00:00+08:00")
    invoices = bill(subscription(pause, upgrade, resume), until=date(2026, 8, 5))
    assert [i.id for i in invoices] == ["INV-0001-01", "INV-0001-03"]
    assert amounts(invoices[1]) == [("recurring", D("267.00")), ("tax", D("16.02"))]


def test_switching_between_monthly_and_yearly_is_refused() -> None:
    switch = event("upgrade", "2026-06-20T10:00:00+08:00", to_plan="team-y")
    with pytest.raises(BillingError, match=r"monthly and yearly.*cancel and start a new subscription"):
        bill(subscription(switch), until=date(2026, 8, 5))


def test_us_digital_services_tax_drops_from_5_to_3_percent_on_2026_07_01() -> None:
    june, july = bill(subscription(start=date(2026, 6, 1), anchor=1), until=date(2026, 7, 1), customer=US)
    assert (june.lines[-1].tax_code, june.tax, june.total) == ("US-DST5", D("5.85"), D("122.85"))
    assert (july.lines[-1].tax_code, july.tax, july.total) == ("US-DST3", D("3.51"), D("120.51"))


def test_amount_coupon_never_exceeds_the_base() -> None:
    plans = {**PLANS, "mini-m": Plan("mini-m", "Mini (monthly)", "month", D("4.00"))}
    invoice = bill(
        subscription(plan="mini-m", seats=1), until=date(2026, 6, 5), coupon=COUPONS["LAUNCH10"], plans=plans
    )[0]
    assert headline(invoice) == (D("4.00"), D("4.00"), D("0.00"), D("0.00"))


def test_big_downgrade_credit_can_make_the_total_negative() -> None:
    downgrade = event("downgrade", "2026-06-06T10:00:00+08:00", to_plan="starter-m", to_quantity=1)
    sub = subscription(downgrade, plan="business-m", seats=10, coupon_id="LAUNCH10")
    second = bill(sub, until=date(2026, 7, 5), coupon=COUPONS["LAUNCH10"])[1]
    assert amounts(second) == [
        ("proration", D("-860.33")),  # 890 × 29/30
        ("proration", D("14.50")),  # 15 × 29/30
        ("recurring", D("15.00")),
        ("tax", D("-49.85")),  # no clamping; and no coupon on a negative base
    ]
    assert headline(second) == (D("-830.83"), D("0.00"), D("-49.85"), D("-880.68"))


def test_events_before_the_start_are_ignored() -> None:
    early = event("upgrade", "2026-06-01T10:00:00+08:00", to_plan="business-m")
    invoices = bill(subscription(early), until=date(2026, 7, 5))
    assert [i.total for i in invoices] == [D("124.02"), D("124.02")]
    assert not any(line.kind == "proration" for i in invoices for line in i.lines)


def test_event_on_the_period_end_day_belongs_to_the_next_period() -> None:
    # 07-05 00:30 in Shanghai is the first day of the July period (period_end is exclusive)
    upgrade = event("upgrade", "2026-07-05T00:30:00+08:00", to_plan="business-m")
    _, july, august = bill(subscription(upgrade), until=date(2026, 8, 5))
    assert amounts(july) == [("recurring", D("117.00")), ("tax", D("7.02"))]
    assert amounts(august)[:2] == [("proration", D("-117.00")), ("proration", D("267.00"))]  # all 31 days


def test_naive_event_time_is_refused() -> None:
    naive = Event("E1", "upgrade", datetime(2026, 6, 20, 10, 0), {"to_plan": "business-m"})
    with pytest.raises(BillingError, match="no time zone"):
        bill(subscription(naive), until=date(2026, 7, 5))
