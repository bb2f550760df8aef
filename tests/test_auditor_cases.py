"""The auditor on ledgers the benchmark does not hold: unknown bugs, credit notes already issued, negative
rules totals, several overcharges on one account, and a bug whose signature shows but figures don't."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal

from agent.auditor.audit import NO_ERROR, UNKNOWN, audit_customer, has_overpaid_invoice, investigate
from agent.cases.intake import Asked, parse_complaint
from engine.billing import apply_discount_and_tax, build_invoices
from engine.model import CreditNote, Customer, CustomerLedger, Event, Line, Payment, PriceBook, Subscription
from engine.money import ZERO, fmt, money
from engine.pricebook import COUPONS, PLANS, TAX_RATES
from scenarios import faults
from scenarios.faults import ScenarioLedger
from scenarios.generator import AS_OF, DEFAULT_SEED, make_scenario, scenario_kinds

BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))


def scenario(kind: str) -> ScenarioLedger:
    index = scenario_kinds().index(kind) + 1
    ledger, _, _ = make_scenario(DEFAULT_SEED, index, kind)
    return ledger


def ledger_of(s: ScenarioLedger, notes: list[CreditNote] | None = None) -> CustomerLedger:
    return CustomerLedger(s.customer, [s.subscription], list(s.invoices), list(s.payments), notes or [])


def repay(s: ScenarioLedger, invoice_id: str) -> None:
    """The card is charged what the (changed) invoice now says."""
    invoice = s.invoice(invoice_id)
    s.payments = [replace(p, amount=invoice.total) if p.invoice_id == invoice_id else p for p in s.payments]


def test_an_overcharge_no_known_bug_explains_is_reported_as_unknown_with_the_differing_line() -> None:
    s = scenario("tax_line")
    last = s.invoices[-1]
    last.lines.insert(1, Line("adjustment", "Manual adjustment", 1, Decimal("5.00"), Decimal("5.00")))
    repay(s, last.id)
    [finding] = audit_customer(ledger_of(s), BOOK, AS_OF)
    assert (finding.invoice_id, finding.root_cause, finding.overcharge) == (last.id, UNKNOWN, Decimal("5.00"))
    assert any(
        "'Manual adjustment' (adjustment) billed 5.00, the rules say 0.00" in e for e in finding.evidence
    )
    result = investigate(ledger_of(s), BOOK, AS_OF)
    assert (result.root_cause, result.expected_action) == (UNKNOWN, "credit_note")


def test_a_signature_without_matching_figures_keeps_its_cause_and_says_so() -> None:
    s = scenario("wrong_tax_region")
    last = s.invoices[-1]
    tax = next(line for line in last.lines if line.kind == "tax")
    tax.amount = money(tax.amount + Decimal("0.50"))
    repay(s, last.id)
    [finding] = audit_customer(ledger_of(s), BOOK, AS_OF)
    assert finding.root_cause == "wrong_tax_region"
    assert "re-billing the period with this bug does not give the billed total exactly" in finding.evidence


def test_issued_credit_notes_reduce_the_overcharge_and_a_full_one_settles_it() -> None:
    s = scenario("wrong_plan_price")
    [before] = audit_customer(ledger_of(s), BOOK, AS_OF)
    part = CreditNote("CN-0001", before.invoice_id, Decimal("10.00"), "partial", "issued")
    [after] = audit_customer(ledger_of(s, [part]), BOOK, AS_OF)
    assert after.overcharge == before.overcharge - Decimal("10.00")
    assert f"10.00 already credited on {before.invoice_id}" in after.evidence
    draft = CreditNote("CN-0002", before.invoice_id, before.overcharge, "not issued yet", "draft")
    assert audit_customer(ledger_of(s, [draft]), BOOK, AS_OF)[0].overcharge == before.overcharge
    full = CreditNote("CN-0003", before.invoice_id, before.overcharge, "settled", "issued")
    assert audit_customer(ledger_of(s, [full]), BOOK, AS_OF) == []
    # The sweep's screen agrees: a partly credited invoice is still flagged, a settled one is not.
    assert has_overpaid_invoice(ledger_of(s, [part]), BOOK, AS_OF) is True
    assert has_overpaid_invoice(ledger_of(s, [full]), BOOK, AS_OF) is False


def test_a_correct_negative_invoice_nobody_paid_is_not_a_finding() -> None:
    customer = Customer("C-0900", "Downsizer", "DE", "USD", "DE")
    at = datetime(2026, 6, 5, 8, 0, tzinfo=UTC)
    events = [
        Event("EV-1", "create", at, {"plan_id": "business-m", "quantity": 10}),
        Event("EV-2", "downgrade", at.replace(day=7), {"to_plan": "starter-m", "to_quantity": 1}),
    ]
    sub = Subscription("SUB-0900", customer.id, date(2026, 6, 5), 5, None, events)
    invoices = build_invoices(customer, sub, BOOK.plans, None, BOOK.tax_rates, until=date(2026, 8, 5))
    assert invoices[1].total < ZERO  # the downgrade's credit is larger than the new plan's month
    payments = [
        Payment(inv.id.replace("INV", "PAY"), inv.id, inv.total, "succeeded", at, "gw")
        for inv in invoices
        if inv.total > ZERO
    ]
    ledger = CustomerLedger(customer, [sub], invoices, payments)
    assert audit_customer(ledger, BOOK, date(2026, 8, 5)) == []
    assert has_overpaid_invoice(ledger, BOOK, date(2026, 8, 5)) is False
    result = investigate(ledger, BOOK, date(2026, 8, 5), Asked(month=7))
    assert (result.root_cause, result.invoice_ids, result.variant) == (
        NO_ERROR,
        [invoices[1].id],
        "upgrade_proration",
    )


def two_faults() -> tuple[ScenarioLedger, str, str]:
    """A double charge on the second-to-last invoice and a wrong price on the last one."""
    s = scenario("duplicate_charge")
    faults.wrong_plan_price(s)
    s.pay_all()
    return s, s.invoices[-2].id, s.invoices[-1].id


def test_several_overcharges_are_all_found() -> None:
    s, doubled, mispriced = two_faults()
    found = {(f.invoice_id, f.root_cause) for f in audit_customer(ledger_of(s), BOOK, AS_OF)}
    assert found == {(doubled, "duplicate_charge"), (mispriced, "wrong_plan_price")}


def test_investigate_takes_the_invoice_the_complaint_names_else_the_largest() -> None:
    s, doubled, mispriced = two_faults()
    ledger = ledger_of(s)
    by_id = {f.invoice_id: f for f in audit_customer(ledger, BOOK, AS_OF)}
    largest = max(by_id.values(), key=lambda f: f.overcharge).invoice_id
    assert investigate(ledger, BOOK, AS_OF).invoice_ids[0] == largest
    for target in (doubled, mispriced):
        invoice = s.invoice(target)
        by_amount = investigate(ledger, BOOK, AS_OF, Asked(amount=invoice.total))
        by_month = investigate(ledger, BOOK, AS_OF, Asked(month=invoice.issued_at.month))
        assert by_amount.invoice_ids[0] == target == by_month.invoice_ids[0]
        assert by_amount.overcharge == by_id[target].overcharge
        assert "1 other overpaid invoice" in by_amount.reasoning


def test_an_invoice_id_the_customer_quotes_outweighs_a_month_and_an_amount() -> None:
    s, doubled, mispriced = two_faults()
    ledger = ledger_of(s)
    other = s.invoice(mispriced)
    complaint = parse_complaint(
        f"Please check {doubled.lower()}: {fmt(other.total)} in month {other.issued_at.month} looked fine",
        invoice_ids=[inv.id for inv in ledger.invoices],
    )
    assert complaint.invoice_id == doubled
    asked = Asked(month=other.issued_at.month, amount=other.total, invoice_id=complaint.invoice_id)
    assert investigate(ledger, BOOK, AS_OF, asked).invoice_ids[0] == doubled


def test_investigate_on_a_customer_without_invoices_explains_nothing_is_owed() -> None:
    s = scenario("tax_line")
    empty = CustomerLedger(s.customer, [s.subscription], [], [])
    result = investigate(empty, BOOK, AS_OF)
    assert (result.root_cause, result.invoice_ids, result.overcharge, result.expected_action) == (
        NO_ERROR,
        [],
        ZERO,
        "explain_only",
    )


def test_results_serialise_money_as_two_decimal_strings() -> None:
    s = scenario("coupon_not_applied")
    [finding] = audit_customer(ledger_of(s), BOOK, AS_OF)
    data = finding.as_json()
    assert set(data) == {"customer_id", "invoice_id", "root_cause", "overcharge", "currency", "evidence"}
    assert data["overcharge"] == f"{finding.overcharge:.2f}" and isinstance(data["evidence"], list)
    answer = investigate(ledger_of(s), BOOK, AS_OF).as_json()
    assert answer["overcharge"] == data["overcharge"] and answer["expected_action"] == "credit_note"


def test_a_coupon_billed_past_its_duration_is_named_beside_the_invoice_it_skipped() -> None:
    """A coupon applied one period late: the invoice it skipped is the overcharge, and the evidence names
    the invoice that got the discount past the coupon's duration (finance may weigh the two)."""
    s = scenario("coupon_not_applied")
    coupon = s.coupon
    assert coupon is not None
    late = next(inv for inv in s.invoices if s.months_in(inv) == coupon.duration_months)
    assert not any(line.kind == "discount" for line in late.lines)
    # The coupon's discount taken off the first invoice past its duration, as if its months began there.
    late.lines = [line for line in late.lines if line.kind not in ("discount", "tax")]
    apply_discount_and_tax(late, coupon, 0, s.rate(late))
    repay(s, late.id)
    [finding] = audit_customer(ledger_of(s), BOOK, AS_OF)
    assert finding.root_cause == "coupon_not_applied"
    discount = fmt(-sum(line.amount for line in late.lines if line.kind == "discount"))
    assert (
        f"{late.id} was billed a discount of {discount} from {coupon.id} in month "
        f"{s.months_in(late) + 1}, past its {coupon.duration_months}-month duration"
    ) in finding.evidence
