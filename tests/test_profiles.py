"""Rules profiles (engine.profiles): a Stripe-sourced ledger is judged by Stripe's rules where they differ
from CloudLedger's (prorations by the second, one minor unit per line of unpublished rounding), and every
ledger honours inclusive tax rates."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal as D

from agent.auditor.audit import audit_customer, has_overpaid_invoice
from engine.billing import build_invoices
from engine.diff import check_ledger
from engine.model import (
    Customer,
    CustomerLedger,
    Event,
    Invoice,
    Line,
    Payment,
    PriceBook,
    Subscription,
    TaxRate,
)
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from engine.profiles import CLOUDLEDGER, STRIPE, profile_for

BOOK = PriceBook(PLANS, COUPONS, TAX_RATES)
STRIPE_CUSTOMER = Customer("cus_Q1", "Quill Labs", "US", "USD", "US", source="stripe")
AS_OF = date(2026, 5, 15)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def upgraded(customer: Customer = STRIPE_CUSTOMER) -> Subscription:
    """Team × 3 from March 1st 10:00 New York time, upgraded to Business × 3 on March 20th 16:30, in a
    period that spans the change to daylight-saving time (March 8th, 2026)."""
    create = Event("ev_c", "create", at("2026-03-01T10:00:00-05:00"), {"plan_id": "team-m", "quantity": 3})
    upgrade = Event("ev_u", "upgrade", at("2026-03-20T16:30:00-04:00"), {"to_plan": "business-m"})
    return Subscription("sub_Q1", customer.id, date(2026, 3, 1), 1, None, [create, upgrade])


def billed(customer: Customer, sub: Subscription, book: PriceBook = BOOK) -> list[Invoice]:
    """What the customer's source's rules bill, as copies a test may change."""
    invoices = build_invoices(
        customer, sub, book.plans, None, book.tax_rates, AS_OF, profile=profile_for(customer.source)
    )
    return copy.deepcopy(invoices)


def paid_ledger(customer: Customer, sub: Subscription, invoices: list[Invoice]) -> CustomerLedger:
    payments = [
        Payment(f"pi_{inv.id}", inv.id, inv.total, "succeeded", at(f"{inv.issued_at}T12:00:00+00:00"), "ch")
        for inv in invoices
    ]
    return CustomerLedger(customer, [sub], invoices, payments)


def test_profile_is_chosen_by_the_ledger_source() -> None:
    assert profile_for("stripe") is STRIPE
    assert profile_for(None) is CLOUDLEDGER and profile_for("acme-billing") is CLOUDLEDGER
    assert STRIPE.rounding("USD") == D("0.01") and STRIPE.rounding("JPY") == D("1")
    assert CLOUDLEDGER.rounding("USD") == D("0")


def test_stripe_prorates_by_the_second_across_daylight_saving() -> None:
    april = next(inv for inv in billed(STRIPE_CUSTOMER, upgraded()) if inv.period_start == date(2026, 4, 1))
    credit, charge = [line for line in april.lines if line.kind == "proration"]
    # The period runs from March 1st 15:00 UTC to April 1st 15:00 UTC: 31 days exactly, 2,678,400 s; the
    # change at 20:30 UTC on March 20th leaves 11 days 18.5 hours = 1,017,000 s. (Counted as wall-clock
    # time in New York, the period would be an hour shorter.)
    assert (credit.amount, charge.amount) == (D("-44.43"), D("101.38"))
    assert charge.amount == (D("267.00") * 1_017_000 / 2_678_400).quantize(D("0.01"))
    # CloudLedger counts 12 of 31 days from the local date March 20th: other figures.
    cloud = replace(STRIPE_CUSTOMER, source=None)
    april_cloud = next(inv for inv in billed(cloud, upgraded(cloud)) if inv.period_start == date(2026, 4, 1))
    assert [ln.amount for ln in april_cloud.lines if ln.kind == "proration"] == [D("-45.29"), D("103.35")]


def test_a_correct_stripe_bill_has_no_finding_and_a_day_counted_one_has() -> None:
    sub = upgraded()
    ledger = paid_ledger(STRIPE_CUSTOMER, sub, billed(STRIPE_CUSTOMER, sub))
    assert audit_customer(ledger, BOOK, AS_OF) == []
    # Billed by the day instead: April's prorations and their tax come to 1.16 more than Stripe's rules.
    by_day = paid_ledger(STRIPE_CUSTOMER, sub, billed(replace(STRIPE_CUSTOMER, source=None), upgraded()))
    findings = audit_customer(by_day, BOOK, AS_OF)
    assert [(f.invoice_id, f.overcharge) for f in findings] == [("sub_Q1-02", D("1.16"))]
    assert any("billed 103.35, the rules say 101.38" in line for line in findings[0].evidence)


def _nudged(invoice: Invoice, kind: str, by: D) -> None:
    """Move one line of a kind by `by`, as a billing system's own rounding would."""
    line = next(ln for ln in invoice.lines if ln.kind == kind)
    line.amount += by
    line.unit_amount += by


def test_one_minor_unit_per_line_is_rounding_on_stripe_only() -> None:
    sub = upgraded()
    invoices = billed(STRIPE_CUSTOMER, sub)
    march = invoices[0]  # no proration on it: both profiles' rules bill it alike
    for kind in ("recurring", "tax"):
        _nudged(march, kind, D("0.01"))  # two lines, each a cent up: 0.02 more, all of it rounding
    stripe_ledger = paid_ledger(STRIPE_CUSTOMER, sub, invoices)
    assert audit_customer(stripe_ledger, BOOK, AS_OF) == []
    check = next(c for c in check_ledger(stripe_ledger, BOOK, AS_OF) if c.invoice_id == march.id)
    assert (check.rounding, check.line_diffs, check.outstanding) == (D("0.02"), [], D("0.00"))
    # The same bill judged by CloudLedger's rules (published rounding): 0.02 overcharged.
    cloud = replace(STRIPE_CUSTOMER, source=None)
    cloud_findings = audit_customer(replace(stripe_ledger, customer=cloud), BOOK, AS_OF)
    assert [(f.invoice_id, f.overcharge) for f in cloud_findings] == [(march.id, D("0.02"))]


def test_more_than_a_minor_unit_or_a_line_too_many_is_not_rounding() -> None:
    sub = upgraded()
    invoices = billed(STRIPE_CUSTOMER, sub)
    may = invoices[2]
    _nudged(may, "recurring", D("0.02"))
    may.lines.insert(1, Line("adjustment", "Setup fee", 1, D("0.01"), D("0.01")))
    findings = audit_customer(paid_ledger(STRIPE_CUSTOMER, sub, invoices), BOOK, AS_OF)
    assert [(f.invoice_id, f.overcharge) for f in findings] == [(may.id, D("0.03"))]


def test_rounding_below_the_rules_total_is_still_screened_for_an_overcharge() -> None:
    """The sweep's screen (no lines) must flag what the whole audit finds, even when a bill rounded its
    lines down and the customer paid a cent more than it: due is the bill's figure, not the rules'."""
    sub = upgraded()
    invoices = billed(STRIPE_CUSTOMER, sub)
    may = invoices[2]
    _nudged(may, "tax", D("-0.01"))
    ledger = paid_ledger(STRIPE_CUSTOMER, sub, invoices)
    payment = next(p for p in ledger.payments if p.invoice_id == may.id)
    ledger.payments[ledger.payments.index(payment)] = replace(payment, amount=payment.amount + D("0.01"))
    findings = audit_customer(ledger, BOOK, AS_OF)
    assert [(f.invoice_id, f.overcharge) for f in findings] == [(may.id, D("0.01"))]
    assert has_overpaid_invoice(ledger, BOOK, AS_OF)


def test_an_inclusive_rate_is_inside_the_prices() -> None:
    inclusive = TaxRate("DE-VAT19-INCL", "DE", D("0.19"), date(2007, 1, 1), None, inclusive=True)
    book = PriceBook(PLANS, COUPONS, [inclusive])
    customer = Customer("cus_D1", "Dach GmbH", "DE", "EUR", "DE", source="stripe")
    create = Event("ev_c", "create", at("2026-03-01T10:00:00+01:00"), {"plan_id": "team-m", "quantity": 1})
    sub = Subscription("sub_D1", customer.id, date(2026, 3, 1), 1, None, [create])
    first = billed(customer, sub, book)[0]
    tax = next(line for line in first.lines if line.kind == "tax")
    # 39.00 holds 19 % VAT: 39.00 − 39.00 / 1.19 = 6.23, and the customer pays 39.00, not 45.23.
    assert (tax.amount, tax.inclusive, first.total, first.inclusive_tax) == (
        D("6.23"),
        True,
        D("39.00"),
        D("6.23"),
    )
    assert audit_customer(paid_ledger(customer, sub, [first]), book, AS_OF) == []


def test_a_tax_line_summing_several_lines_may_round_a_minor_unit_for_each() -> None:
    """Stripe rounds each line's tax apart and the ledger holds their sum: April's tax covers its
    recurring line and two prorations, so up to 0.03 is rounding and 0.04 is not."""
    sub = upgraded()
    for off, overcharge in ((D("0.03"), None), (D("0.04"), D("0.04"))):
        invoices = billed(STRIPE_CUSTOMER, sub)
        april = invoices[1]
        assert sum(1 for line in april.lines if line.kind in ("recurring", "proration")) == 3
        _nudged(april, "tax", off)
        findings = audit_customer(paid_ledger(STRIPE_CUSTOMER, sub, invoices), BOOK, AS_OF)
        expected = [] if overcharge is None else [(april.id, overcharge)]
        assert [(f.invoice_id, f.overcharge) for f in findings] == expected
