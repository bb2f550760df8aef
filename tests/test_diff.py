"""engine.diff.check_ledger on hand-built ledgers: what was billed and paid vs what the rules say."""

from __future__ import annotations

import copy
from datetime import date, datetime
from decimal import Decimal as D

from engine.billing import add_months, build_invoices
from engine.diff import InvoiceCheck, LineDiff, check_ledger
from engine.model import (
    CreditNote,
    Customer,
    CustomerLedger,
    Event,
    Invoice,
    Line,
    Payment,
    PriceBook,
    Subscription,
)
from engine.pricebook import COUPONS, PLANS, TAX_RATES

BOOK = PriceBook(PLANS, COUPONS, TAX_RATES)
CUSTOMER = Customer("C-0001", "Test customer", "CN", "USD", "CN")
AS_OF = date(2026, 8, 15)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def subscription(*events: Event) -> Subscription:
    create = Event("E0", "create", at("2026-06-05T09:00:00+08:00"), {"plan_id": "team-m", "quantity": 3})
    return Subscription("SUB-0001", CUSTOMER.id, date(2026, 6, 5), 5, None, [create, *events])


def correct_invoices(sub: Subscription, until: date = AS_OF) -> list[Invoice]:
    """What the rules bill, as independent copies the tests can then damage."""
    return copy.deepcopy(build_invoices(CUSTOMER, sub, PLANS, None, TAX_RATES, until))


def payment(
    invoice: Invoice, amount: D | None = None, suffix: str = "", status: str = "succeeded"
) -> Payment:
    return Payment(
        f"{invoice.id.replace('INV', 'PAY')}{suffix}",
        invoice.id,
        invoice.total if amount is None else amount,
        status,
        datetime.combine(invoice.issued_at, datetime.min.time()).astimezone(),
        f"gw_{invoice.id}{suffix}",
    )


def ledger(
    sub: Subscription,
    invoices: list[Invoice],
    extra: list[Payment] | None = None,
    notes: list[CreditNote] | None = None,
) -> CustomerLedger:
    """Every invoice paid once, in full, plus any extra payments."""
    payments = [payment(invoice) for invoice in invoices] + (extra or [])
    return CustomerLedger(CUSTOMER, [sub], invoices, payments, notes or [])


def checks(book: CustomerLedger, as_of: date = AS_OF) -> dict[str, InvoiceCheck]:
    return {check.invoice_id: check for check in check_ledger(book, BOOK, as_of)}


def by_id(invoices: list[Invoice], invoice_id: str) -> Invoice:
    return next(invoice for invoice in invoices if invoice.id == invoice_id)


def test_clean_ledger_has_no_differences() -> None:
    sub = subscription()
    result = checks(ledger(sub, correct_invoices(sub)))
    assert list(result) == ["INV-0001-01", "INV-0001-02", "INV-0001-03"]
    for invoice_id, check in result.items():
        assert check.should_exist and check.expected_invoice_id == invoice_id
        assert check.billed_total == check.expected_total == check.paid_total == D("124.02")
        assert check.successful_payments == 1
        assert check.line_diffs == []
        assert check.overcharge == check.billing_difference == check.outstanding == D("0.00")


def test_doubled_payment_overcharges_the_whole_invoice() -> None:
    sub = subscription()
    invoices = correct_invoices(sub)
    second = by_id(invoices, "INV-0001-02")
    retry = payment(second, suffix="-R")
    declined = payment(second, suffix="-F", status="failed")  # a failed attempt took no money
    result = checks(ledger(sub, invoices, extra=[retry, declined]))
    check = result["INV-0001-02"]
    assert check.successful_payments == 2
    assert check.paid_total == D("248.04")
    assert check.overcharge == check.outstanding == D("124.02")
    assert check.billing_difference == D("0.00") and check.line_diffs == []  # the invoice itself is right
    assert result["INV-0001-01"].overcharge == result["INV-0001-03"].overcharge == D("0.00")


def test_duplicate_invoice_copy_should_not_exist() -> None:
    sub = subscription()
    invoices = correct_invoices(sub)
    original = by_id(invoices, "INV-0001-02")
    duplicate = copy.deepcopy(original)
    duplicate.id = "INV-0001-02D"
    invoices.insert(2, duplicate)
    result = checks(ledger(sub, invoices))
    assert result["INV-0001-02"].should_exist
    assert result["INV-0001-02"].overcharge == D("0.00")
    copy_check = result["INV-0001-02D"]
    assert not copy_check.should_exist
    assert copy_check.expected_invoice_id == "INV-0001-02"  # the one the rules bill for that period
    assert copy_check.overcharge == copy_check.billing_difference == D("124.02")
    assert copy_check.expected is None
    # Every line of the copy is extra
    assert [(d.kind, d.billed, d.expected) for d in copy_check.line_diffs] == [
        ("recurring", D("117.00"), D("0.00")),
        ("tax", D("7.02"), D("0.00")),
    ]
    assert all(d.expected_description is None for d in copy_check.line_diffs)


def test_invoice_after_cancellation_should_not_exist() -> None:
    sub = subscription(Event("E1", "cancel", at("2026-07-10T12:00:00+08:00"), {"at_period_end": True}))
    invoices = correct_invoices(sub)
    assert [i.id for i in invoices] == ["INV-0001-01", "INV-0001-02"]
    # The billing system ignored the cancel and billed August as usual
    late = copy.deepcopy(invoices[-1])
    late.id = "INV-0001-03"
    late.period_start, late.period_end = late.period_end, add_months(late.period_end, 1, 5)
    late.issued_at = late.period_start
    invoices.append(late)
    result = checks(ledger(sub, invoices))
    assert result["INV-0001-01"].should_exist and result["INV-0001-02"].should_exist
    extra = result["INV-0001-03"]
    assert not extra.should_exist
    assert extra.expected_total is None and extra.expected_invoice_id is None
    assert extra.overcharge == D("124.02")


def test_wrong_unit_price_shows_as_a_recurring_line_difference() -> None:
    sub = subscription()
    invoices = correct_invoices(sub)
    third = by_id(invoices, "INV-0001-03")
    period = (third.period_start, third.period_end)
    third.lines = [
        Line(
            "recurring", "Team (monthly) × 3 seats", 3, D("45.00"), D("135.00"), *period, tax_code="CN-VAT6"
        ),
        Line("tax", "Tax CN-VAT6 (6%)", 1, D("8.10"), D("8.10"), tax_code="CN-VAT6"),
    ]
    check = checks(ledger(sub, invoices))["INV-0001-03"]
    assert check.should_exist
    assert check.billed_total == D("143.10")
    assert check.line_diffs == [
        LineDiff(
            "recurring", "Team (monthly) × 3 seats", "Team (monthly) × 3 seats", D("135.00"), D("117.00")
        ),
        LineDiff("tax", "Tax CN-VAT6 (6%)", "Tax CN-VAT6 (6%)", D("8.10"), D("7.02")),
    ]
    assert [d.difference for d in check.line_diffs] == [D("18.00"), D("1.08")]
    assert check.overcharge == check.billing_difference == D("19.08")


def test_missing_proration_credit_is_paired_by_direction() -> None:
    sub = subscription(Event("E1", "upgrade", at("2026-06-20T10:00:00+08:00"), {"to_plan": "business-m"}))
    invoices = correct_invoices(sub)
    second = by_id(invoices, "INV-0001-02")
    assert second.total == D("362.52")
    # The bug: the credit for the unused old plan is dropped and tax recomputed on 400.50
    second.lines = [ln for ln in second.lines if not (ln.kind == "proration" and ln.amount < 0)]
    tax = next(ln for ln in second.lines if ln.kind == "tax")
    tax.amount = tax.unit_amount = D("24.03")
    check = checks(ledger(sub, invoices))["INV-0001-02"]
    assert [(d.kind, d.billed, d.expected, d.difference) for d in check.line_diffs] == [
        ("proration", D("0.00"), D("-58.50"), D("58.50")),  # the +133.50 charge still matches its twin
        ("tax", D("24.03"), D("20.52"), D("3.51")),
    ]
    assert check.line_diffs[0].billed_description is None
    assert check.overcharge == D("62.01")  # 424.53 − 362.52


def test_issued_credit_note_reduces_outstanding() -> None:
    sub = subscription()
    invoices = correct_invoices(sub)
    second = by_id(invoices, "INV-0001-02")
    notes = [
        CreditNote("CN-0001", second.id, D("100.00"), "refund of the duplicate charge", "issued"),
        CreditNote("CN-0002", second.id, D("24.02"), "not approved yet", "draft"),
        CreditNote("CN-0003", second.id, D("24.02"), "turned down", "rejected"),
    ]
    check = checks(ledger(sub, invoices, extra=[payment(second, suffix="-R")], notes=notes))["INV-0001-02"]
    assert check.overcharge == D("124.02")
    assert check.credited_total == D("100.00")  # only issued notes gave money back
    assert check.outstanding == D("24.02")
    notes[1] = CreditNote("CN-0002", second.id, D("24.02"), "approved and issued", "issued")
    check = checks(ledger(sub, invoices, extra=[payment(second, suffix="-R")], notes=notes))["INV-0001-02"]
    assert check.outstanding == D("0.00")


def test_invoices_issued_after_as_of_are_not_judged() -> None:
    sub = subscription()
    result = checks(ledger(sub, correct_invoices(sub)), as_of=date(2026, 7, 20))
    assert list(result) == ["INV-0001-01", "INV-0001-02"]
