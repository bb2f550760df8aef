"""What should have been billed vs what was: a line-level comparison of one customer's invoices.

Pure: it takes a CustomerLedger and the price book and returns checks; no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from engine.billing import build_invoices
from engine.model import CHARGE_KINDS, SUMMED_KINDS, CustomerLedger, Invoice, Line, PriceBook
from engine.money import ZERO, money, total
from engine.profiles import profile_for


@dataclass(frozen=True)
class LineDiff:
    kind: str
    billed_description: str | None
    expected_description: str | None
    billed: Decimal  # ZERO when the line is missing from the bill
    expected: Decimal  # ZERO when the line should not be there

    @property
    def difference(self) -> Decimal:
        return money(self.billed - self.expected)


@dataclass(frozen=True)
class InvoiceCheck:
    invoice_id: str
    customer_id: str
    period_start: date
    period_end: date
    billed_total: Decimal
    should_exist: bool
    expected_invoice_id: str | None
    expected_total: Decimal | None  # None when the rules produce no invoice for it
    paid_total: Decimal
    successful_payments: int
    credited_total: Decimal  # issued credit notes on this invoice
    line_diffs: list[LineDiff] = field(default_factory=list)
    expected: Invoice | None = None
    # What the bill's lines differ from the rules' by no more than the profile's rounding, summed: billed
    # as the rules say, so due (engine.profiles; always zero under CloudLedger's published rounding).
    rounding: Decimal = ZERO

    @property
    def should_pay(self) -> Decimal:
        if not self.should_exist or self.expected_total is None:
            return ZERO
        return money(self.expected_total + self.rounding)

    @property
    def billing_difference(self) -> Decimal:
        """Billed − should have billed (the invoice itself)."""
        return money(self.billed_total - self.should_pay)

    @property
    def overcharge(self) -> Decimal:
        """Paid − should have paid: what the customer is owed before any credit note."""
        return money(self.paid_total - self.should_pay)

    @property
    def outstanding(self) -> Decimal:
        """The overcharge not yet given back by an issued credit note."""
        return money(self.overcharge - self.credited_total)


def _key(line: Line) -> tuple[str, int]:
    # Prorations come in pairs (credit for unused time, charge for remaining time): keep them apart.
    sign = -1 if line.kind == "proration" and line.amount < 0 else 1
    return line.kind, sign


def diff_lines(billed: list[Line], expected: list[Line]) -> list[LineDiff]:
    """Pair lines by kind (and proration direction) in billed order; report the ones that differ (in
    amount, or a line on one side only: a line's text may be the billing system's own)."""
    by_key_billed: dict[tuple[str, int], list[Line]] = defaultdict(list)
    by_key_expected: dict[tuple[str, int], list[Line]] = defaultdict(list)
    for line in billed:
        by_key_billed[_key(line)].append(line)
    for line in expected:
        by_key_expected[_key(line)].append(line)
    diffs: list[LineDiff] = []
    for key in list(dict.fromkeys([*by_key_expected, *by_key_billed])):
        got, want = by_key_billed.get(key, []), by_key_expected.get(key, [])
        for i in range(max(len(got), len(want))):
            b = got[i] if i < len(got) else None
            e = want[i] if i < len(want) else None
            b_amount, e_amount = (b.amount if b else ZERO), (e.amount if e else ZERO)
            same_text = b is not None and e is not None and b.description == e.description
            if b_amount != e_amount or not same_text:
                diffs.append(
                    LineDiff(
                        key[0], b.description if b else None, e.description if e else None, b_amount, e_amount
                    )
                )
    return [
        d
        for d in diffs
        if d.difference != ZERO or d.billed_description is None or d.expected_description is None
    ]


def line_rounding(kind: str, charge_lines: int, rounding: Decimal) -> Decimal:
    """The most one line may differ from the rules by rounding: `rounding` for a charge line, that many
    times the charge lines for a discount or tax line, which sums a part of each of them (Stripe rounds
    each line's discount and tax amount apart; the ledger holds their sum)."""
    return rounding * max(charge_lines, 1) if kind in SUMMED_KINDS else rounding


def charge_count(lines: list[Line]) -> int:
    return sum(1 for line in lines if line.kind in CHARGE_KINDS)


def most_rounding(lines: list[Line], rounding: Decimal) -> Decimal:
    """The most a bill of these lines may differ from the rules in all, by rounding."""
    charges = charge_count(lines)
    return sum((line_rounding(line.kind, charges, rounding) for line in lines), ZERO)


def split_rounding(
    diffs: list[LineDiff], rounding: Decimal, charge_lines: int
) -> tuple[list[LineDiff], Decimal]:
    """The differences beyond rounding, and the sum of those within it (a line on both sides that is off
    by no more than line_rounding allows)."""
    if not rounding:
        return diffs, ZERO
    beyond: list[LineDiff] = []
    within = ZERO
    for d in diffs:
        on_both = d.billed_description is not None and d.expected_description is not None
        if on_both and abs(d.difference) <= line_rounding(d.kind, charge_lines, rounding):
            within += d.difference
        else:
            beyond.append(d)
    return beyond, money(within)


def ledger_as_of(ledger: CustomerLedger) -> date:
    """Judge periods up to the latest invoice issued (periods not billed yet are not findings)."""
    return max((inv.issued_at for inv in ledger.invoices), default=date.today())


def expected_invoices(ledger: CustomerLedger, book: PriceBook, as_of: date) -> list[Invoice]:
    """Every invoice the rules produce for this customer's subscriptions up to as_of."""
    out: list[Invoice] = []
    for sub in ledger.subscriptions:
        coupon = book.coupons.get(sub.coupon_id) if sub.coupon_id else None
        out.extend(
            build_invoices(
                ledger.customer,
                sub,
                book.plans,
                coupon,
                book.tax_rates,
                until=as_of,
                profile=profile_for(ledger.customer.source),
            )
        )
    return out


_NO_INSTANT = datetime.min.replace(tzinfo=UTC)


def issue_order(invoice: Invoice) -> tuple[date, datetime, str]:
    """Which of two invoices came later: the later issue date, then the later creation instant (where the
    source gives one), then the later id: a tie-break that holds for any ids, not a meaning in them."""
    return invoice.issued_at, invoice.created_at or _NO_INSTANT, invoice.id


def first_of_period(invoices: Iterable[Invoice]) -> dict[tuple[str, date], str]:
    """(subscription, period start) → the id of the invoice billed first for it: the real one. Any other
    invoice of the period is an extra copy (a duplicate), whatever the ids look like."""
    first: dict[tuple[str, date], Invoice] = {}
    for invoice in invoices:
        slot = (invoice.subscription_id, invoice.period_start)
        held = first.get(slot)
        if held is None or issue_order(invoice) < issue_order(held):
            first[slot] = invoice
    return {slot: invoice.id for slot, invoice in first.items()}


def check_ledger(ledger: CustomerLedger, book: PriceBook, as_of: date) -> list[InvoiceCheck]:
    """Compare every billed invoice (issued on or before as_of) with what the rules say."""
    expected = expected_invoices(ledger, book, as_of)
    expected_by_slot = {(inv.subscription_id, inv.period_start): inv for inv in expected}
    real = first_of_period(ledger.invoices)
    paid: dict[str, list[Decimal]] = defaultdict(list)
    for payment in ledger.payments:
        if payment.status == "succeeded":
            paid[payment.invoice_id].append(payment.amount)
    credited: dict[str, list[Decimal]] = defaultdict(list)
    for note in ledger.credit_notes:
        if note.status == "issued":
            credited[note.invoice_id].append(note.amount)

    rounding = profile_for(ledger.customer.source).rounding(ledger.customer.currency)
    checks: list[InvoiceCheck] = []
    for invoice in ledger.invoices:
        # A one-off invoice (no subscription) bills nothing the rules produce: they have no say on it.
        if invoice.issued_at > as_of or invoice.subscription_id is None:
            continue
        slot = (invoice.subscription_id, invoice.period_start)
        want = expected_by_slot.get(slot)
        # Two invoices for one period: the first billed is real, any later one is the extra copy.
        should_exist = want is not None and real[slot] == invoice.id
        diffs, rounded = split_rounding(
            diff_lines(invoice.lines, want.lines if want and should_exist else []),
            rounding,
            charge_count(invoice.lines),
        )
        checks.append(
            InvoiceCheck(
                invoice_id=invoice.id,
                customer_id=invoice.customer_id,
                period_start=invoice.period_start,
                period_end=invoice.period_end,
                billed_total=invoice.total,
                should_exist=should_exist,
                # The period's real invoice as the ledger names it (the rules' own id is their naming).
                expected_invoice_id=real[slot] if want else None,
                expected_total=want.total if want else None,
                paid_total=total(paid[invoice.id]),
                successful_payments=len(paid[invoice.id]),
                credited_total=total(credited[invoice.id]),
                line_diffs=diffs,
                expected=want if should_exist else None,
                rounding=rounded,
            )
        )
    return checks
