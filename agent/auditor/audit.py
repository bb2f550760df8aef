"""The deterministic auditor: every invoice a customer paid more on than the rules say, and why.

Pure (no I/O): it takes one customer's ledger, the price book and the date to judge up to. The engine's
diff gives billed vs should-have-billed per invoice; the detectors in agent.auditor.causes name the bug
from the ledger alone, as a finance analyst would, and back it with the figures. The offline
investigator and `billsleuth audit` both stand on it; no ground truth is ever read here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from agent.auditor.causes import ROOT_CAUSES, diagnose
from agent.auditor.context import Context, lines_of, plural, quote
from agent.cases.intake import Asked
from engine.billing import months_between, tax_percent
from engine.diff import InvoiceCheck, check_ledger, expected_invoices, first_of_period, most_rounding
from engine.model import CustomerLedger, Invoice, Line, PriceBook
from engine.money import ZERO, fmt, money
from engine.profiles import profile_for

__all__ = [
    "BENIGN_VARIANTS",
    "NO_ERROR",
    "ROOT_CAUSES",
    "UNKNOWN",
    "Finding",
    "Investigation",
    "asked_about",
    "asked_period",
    "audit_customer",
    "audit_ledgers",
    "has_overpaid_invoice",
    "investigate",
]

UNKNOWN = "unknown_discrepancy"
NO_ERROR = "no_error"
BENIGN_VARIANTS = ("upgrade_proration", "tax_line", "coupon_ended", "annual_renewal")
Action = Literal["credit_note", "explain_only"]

SUMMARY = {
    "proration_wrong_days": "the plan-change proration was computed on a 30-day month instead of the "
    "period's real length",
    "proration_missing_credit": "the plan change charged the new plan's remaining days but never credited "
    "the old plan's unused days",
    "duplicate_charge": "the invoice was correct but the card was charged for it twice",
    "duplicate_invoice": "a second invoice was issued and paid for a period that already had its invoice",
    "expired_tax_rate": "tax was charged at a rate that had already expired for the customer's region",
    "wrong_tax_region": "tax was charged at another region's rate",
    "coupon_not_applied": "the coupon was still within its months but no discount was given",
    "coupon_wrong_base": "the percent coupon was applied to the recurring charge only, not the whole "
    "subtotal including prorations",
    "quantity_change_ignored": "the seat reduction was ignored: the invoice still bills the old seat count "
    "and has no proration",
    "cancel_not_respected": "the subscription was cancelled at period end but was billed for a later period",
    "timezone_change_date": "the plan change was dated by its UTC date instead of the customer's local "
    "date, so the proration counts an extra day",
    "wrong_plan_price": "the recurring charge used a unit price that differs from the price book",
    UNKNOWN: "the customer paid more than the rules say, but the bill matches none of the known bugs",
}


@dataclass(frozen=True)
class Finding:
    """One invoice the customer paid more on than the rules say."""

    customer_id: str
    invoice_id: str
    root_cause: str  # one of ROOT_CAUSES, or UNKNOWN
    overcharge: Decimal  # paid − should have paid − already credited; always > 0; never rounded to fit
    currency: str  # the invoice's: the overcharge is in it
    evidence: list[str]
    related_invoice_ids: list[str] = field(default_factory=list)  # e.g. the original of a duplicate
    issued_at: date | None = None
    billed_total: Decimal = ZERO

    def as_json(self) -> dict[str, Any]:
        """The `audit --json` shape: money as a two-decimal string, with its currency."""
        return {
            "customer_id": self.customer_id,
            "invoice_id": self.invoice_id,
            "root_cause": self.root_cause,
            "overcharge": fmt(self.overcharge),
            "currency": self.currency,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class Investigation:
    """The offline investigator's answer to one complaint."""

    root_cause: str  # one of ROOT_CAUSES, NO_ERROR, or UNKNOWN when the bill matches no known bug
    invoice_ids: list[str]  # the invoice to act on first (for duplicate_invoice the extra copy)
    overcharge: Decimal  # ZERO for no_error
    expected_action: Action
    reasoning: str
    evidence: list[str]
    variant: str | None = None  # for no_error: what the bill holds that the customer may not expect
    asked: dict[str, Any] = field(default_factory=dict)  # asked_about's answer: not in the JSON contract

    def as_json(self) -> dict[str, Any]:
        return {
            "root_cause": self.root_cause,
            "invoice_ids": list(self.invoice_ids),
            "overcharge": fmt(self.overcharge),
            "expected_action": self.expected_action,
            "reasoning": self.reasoning,
            "evidence": list(self.evidence),
            "variant": self.variant,
        }


# ---------- the audit ----------


def overpaid(check: InvoiceCheck) -> bool:
    """Whether the customer actually paid (net of credit notes) more than is due on this invoice.

    A rules total below zero (a big downgrade's credit) is due as nothing; such a correct invoice that
    nobody paid is not a finding, though paid − due would be positive.
    """
    return money(check.paid_total - check.credited_total) > max(check.should_pay, ZERO)


def _money_evidence(check: InvoiceCheck) -> tuple[list[str], str]:
    """The figures every finding rests on: billed vs the rules, what was paid, and the overcharge."""
    billed = f"{check.invoice_id} billed {fmt(check.billed_total)}"
    if check.should_exist:
        billed += f"; the rules give {fmt(check.should_pay)}"
    elif check.expected_invoice_id is not None:
        billed += (
            f"; the rules' invoice for its period is {check.expected_invoice_id}, so nothing is due on it"
        )
    else:
        billed += "; the rules give no invoice for its period"
    facts = [
        billed,
        f"paid {fmt(check.paid_total)} in {plural(check.successful_payments, 'successful payment')}",
    ]
    if check.should_pay < ZERO:
        facts.append(
            f"the rules' total is negative: {fmt(-check.should_pay)} is owed back on top of all that was paid"
        )
    sums = f"paid {fmt(check.paid_total)} − due {fmt(check.should_pay)}"
    if check.credited_total > ZERO:
        facts.append(f"{fmt(check.credited_total)} already credited on {check.invoice_id}")
        sums += f" − credited {fmt(check.credited_total)}"
    return facts, f"overcharge {fmt(check.outstanding)} ({sums})"


def _unknown_evidence(check: InvoiceCheck) -> list[str]:
    return [
        f"line '{d.billed_description or d.expected_description}' ({d.kind}) billed {fmt(d.billed)}, "
        f"the rules say {fmt(d.expected)}"
        for d in check.line_diffs
    ]


def _finding(ledger: CustomerLedger, book: PriceBook, check: InvoiceCheck, billed: Invoice) -> Finding:
    diagnosis = diagnose(Context(ledger, book, check, billed))
    if diagnosis is None:
        cause, specific, related = UNKNOWN, _unknown_evidence(check), []
    else:
        cause, specific = diagnosis.root_cause, diagnosis.evidence
        related = list(diagnosis.related_invoice_ids)
        if not diagnosis.reproduced:
            specific = [
                *specific,
                "re-billing the period with this bug does not give the billed total exactly",
            ]
    facts, overcharge = _money_evidence(check)
    return Finding(
        customer_id=ledger.customer.id,
        invoice_id=check.invoice_id,
        root_cause=cause,
        overcharge=check.outstanding,
        currency=billed.currency,
        evidence=[*facts, *specific, overcharge],
        related_invoice_ids=related,
        issued_at=billed.issued_at,
        billed_total=check.billed_total,
    )


def audit_customer(ledger: CustomerLedger, book: PriceBook, as_of: date) -> list[Finding]:
    """Every invoice issued by as_of on which the customer paid more than the rules say, with its cause."""
    checks = check_ledger(ledger, book, as_of)
    overpaid_checks = [c for c in checks if overpaid(c)]
    if not overpaid_checks:
        return []
    invoices = {inv.id: inv for inv in ledger.invoices}
    return [_finding(ledger, book, check, invoices[check.invoice_id]) for check in overpaid_checks]


def has_overpaid_invoice(ledger: CustomerLedger, book: PriceBook, as_of: date) -> bool:
    """Whether audit_customer would find anything, judged on what is due, paid and credited alone.

    Invoices may come without their lines, so a sweep can screen every customer cheaply and load whole
    ledgers only for the few it flags. It applies check_ledger's rule for which invoice should exist
    (tests hold the two to the same answer) but skips the line-by-line comparison, most of the cost.
    """
    rules = {(inv.subscription_id, inv.period_start): inv for inv in expected_invoices(ledger, book, as_of)}
    real = first_of_period(ledger.invoices)
    # Lines within the profile's rounding are due as billed, so a bill may be due a little more or less
    # than the rules' total: screen generously (the whole audit drops what is rounding).
    rounding = profile_for(ledger.customer.source).rounding(ledger.customer.currency)
    paid: dict[str, Decimal] = defaultdict(Decimal)
    for payment in ledger.payments:
        if payment.status == "succeeded":
            paid[payment.invoice_id] += payment.amount
    for note in ledger.credit_notes:
        if note.status == "issued":
            paid[note.invoice_id] -= note.amount
    for invoice in ledger.invoices:
        slot = (invoice.subscription_id, invoice.period_start)
        want = rules.get(slot)
        if invoice.issued_at > as_of or paid[invoice.id] <= ZERO or invoice.subscription_id is None:
            continue  # (a one-off invoice is not the rules' to judge: engine.diff.check_ledger)
        should_exist = want is not None and real[slot] == invoice.id
        due = max(want.total, ZERO) if should_exist and want is not None else ZERO
        leeway = most_rounding(want.lines, rounding) if should_exist and want is not None else ZERO
        if money(paid[invoice.id]) > due - leeway:
            return True
    return False


def audit_ledgers(ledgers: Iterable[CustomerLedger], book: PriceBook, as_of: date) -> list[Finding]:
    return [finding for ledger in ledgers for finding in audit_customer(ledger, book, as_of)]


# ---------- one complaint ----------


Period = tuple[int, int]  # (year, month)


def asked_period(ledger: CustomerLedger, as_of: date, asked: Asked) -> Period | None:
    """The (year, month) the customer named, if any. "Last month" counts back from as_of (the ledger's
    latest invoice: a real ledger's is about today, a demo's is in the past); a month without a year is
    its latest on the ledger up to as_of."""
    if asked.months_back is not None:
        year, month0 = divmod(as_of.year * 12 + as_of.month - 1 - asked.months_back, 12)
        return year, month0 + 1
    if asked.month is None:
        return None
    if asked.year is not None:
        return asked.year, asked.month
    years = [
        inv.issued_at.year
        for inv in ledger.invoices
        if inv.issued_at <= as_of and inv.issued_at.month == asked.month
    ]
    latest = as_of.year if asked.month <= as_of.month else as_of.year - 1
    return (max(years) if years else latest), asked.month


def _fit(invoice: Invoice, amounts: Iterable[Decimal], asked: Asked, period: Period | None) -> int:
    """How well an invoice fits what the customer pointed at: its id above all, then the amount, then
    the month (of its year)."""
    score = 0
    if asked.invoice_id is not None and invoice.id == asked.invoice_id:
        score += 4
    if asked.amount is not None and money(asked.amount) in {invoice.total, *amounts}:
        score += 2
    if period is not None and (invoice.issued_at.year, invoice.issued_at.month) == period:
        score += 1
    return score


def _pick_finding(
    findings: list[Finding], ledger: CustomerLedger, asked: Asked, period: Period | None
) -> Finding:
    """The finding the complaint is about; else the largest (then the latest)."""
    invoices = {inv.id: inv for inv in ledger.invoices}

    def rank(f: Finding) -> tuple[int, Decimal, date]:
        amounts = [*_paid_amounts(ledger, f.invoice_id), f.overcharge]
        return _fit(invoices[f.invoice_id], amounts, asked, period), f.overcharge, f.issued_at or date.min

    return max(findings, key=rank)


def _ranked_invoices(
    ledger: CustomerLedger, as_of: date, asked: Asked, period: Period | None
) -> list[tuple[int, Invoice]]:
    """Every invoice issued by as_of with its fit, best first (then the latest)."""
    billed = [inv for inv in ledger.invoices if inv.issued_at <= as_of]
    fits = [(_fit(inv, _paid_amounts(ledger, inv.id), asked, period), inv) for inv in billed]
    return sorted(fits, key=lambda fit: (fit[0], fit[1].issued_at, fit[1].id), reverse=True)


def _pick_invoice(ledger: CustomerLedger, as_of: date, asked: Asked) -> Invoice | None:
    """The invoice the complaint is about; else the latest."""
    ranked = _ranked_invoices(ledger, as_of, asked, asked_period(ledger, as_of, asked))
    return ranked[0][1] if ranked else None


def _on_the_account(ledger: CustomerLedger, findings: list[Finding], amount: Decimal) -> bool:
    """Whether an amount is anywhere on the account: an invoice's figures or lines, a payment, a credit
    note, an overcharge the audit found."""
    figures = {f.overcharge for f in findings}
    for inv in ledger.invoices:
        figures |= {inv.subtotal, inv.discount, inv.tax, inv.total}
        figures |= {line.amount for line in inv.lines}
    figures |= {p.amount for p in ledger.payments} | {n.amount for n in ledger.credit_notes}
    return money(amount) in {abs(figure) for figure in figures}


LISTED_WHEN_UNMATCHED = 3  # the latest invoices a reply lists when the amount named is nowhere on the account


def asked_about(ledger: CustomerLedger, findings: list[Finding], as_of: date, asked: Asked) -> dict[str, Any]:
    """What the customer pointed at, as the ledger has it (plain JSON, for the write-up):
    `invoice_id` the invoice that fits it best (None when nothing fits) and whether it was `overpaid`;
    `period` the month they named ("2025-09"); `amount` theirs and whether it is `amount_on_account`;
    `listed` the invoices a reply names when the amount is nowhere: that month's, else the latest few."""
    period = asked_period(ledger, as_of, asked)
    ranked = _ranked_invoices(ledger, as_of, asked, period)
    best = ranked[0][1] if ranked and ranked[0][0] > 0 else None
    overpaid_ids = {f.invoice_id for f in findings}
    in_period = [inv for _, inv in ranked if (inv.issued_at.year, inv.issued_at.month) == period]
    latest = sorted((inv for _, inv in ranked), key=lambda inv: (inv.issued_at, inv.id), reverse=True)
    listed = sorted(in_period or latest[:LISTED_WHEN_UNMATCHED], key=lambda inv: (inv.issued_at, inv.id))
    return {
        "invoice_id": best.id if best else None,
        "overpaid": best is not None and best.id in overpaid_ids,
        "period": f"{period[0]}-{period[1]:02d}" if period else None,
        "amount": fmt(asked.amount) if asked.amount is not None else None,
        "amount_on_account": asked.amount is None or _on_the_account(ledger, findings, asked.amount),
        "listed": [inv.id for inv in listed],
    }


def _paid_amounts(ledger: CustomerLedger, invoice_id: str) -> list[Decimal]:
    return [p.amount for p in ledger.payments if p.invoice_id == invoice_id and p.status == "succeeded"]


def _credit(finding: Finding, others: int) -> Investigation:
    reasoning = (
        f"{finding.invoice_id} overcharged the customer {fmt(finding.overcharge)}: "
        f"{SUMMARY[finding.root_cause]}."
    )
    if others:
        reasoning += f" The audit found {plural(others, 'other overpaid invoice')} on this account as well."
    return Investigation(
        root_cause=finding.root_cause,
        invoice_ids=[finding.invoice_id, *finding.related_invoice_ids],
        overcharge=finding.overcharge,
        expected_action="credit_note",
        reasoning=reasoning,
        evidence=list(finding.evidence),
    )


@dataclass(frozen=True)
class _Benign:
    variant: str
    why: str
    facts: list[str]


def _coupon_just_ended(ledger: CustomerLedger, book: PriceBook, invoice: Invoice) -> str | None:
    """The coupon fact, when this is the first invoice after the coupon's months ran out."""
    sub = next((s for s in ledger.subscriptions if s.id == invoice.subscription_id), None)
    coupon = book.coupons.get(sub.coupon_id) if sub and sub.coupon_id else None
    if sub is None or coupon is None or lines_of(invoice, "discount"):
        return None
    months_in = months_between(sub.start_date, invoice.period_start)
    previous = [
        inv
        for inv in ledger.invoices
        if inv.subscription_id == invoice.subscription_id and inv.period_end == invoice.period_start
    ]
    if months_in < coupon.duration_months or not any(lines_of(inv, "discount") for inv in previous):
        return None
    return (
        f"coupon {coupon.id} covers the first {plural(coupon.duration_months, 'month')}; "
        f"{invoice.id} is in month {months_in + 1}, so it has no discount"
    )


def _spans_a_year(line: Line) -> bool:
    start, end = line.period_start, line.period_end
    return start is not None and end is not None and (end - start).days >= 365


def _benign(ledger: CustomerLedger, book: PriceBook, check: InvoiceCheck, invoice: Invoice) -> _Benign:
    """What correct-but-surprising part of the bill the customer is most likely asking about."""
    facts = [
        f"{invoice.id} billed {fmt(invoice.total)}; the rules give {fmt(check.should_pay)}",
        f"paid {fmt(check.paid_total)} in {plural(check.successful_payments, 'successful payment')}",
    ]
    prorations, recurring = lines_of(invoice, "proration"), lines_of(invoice, "recurring")
    coupon_ended = _coupon_just_ended(ledger, book, invoice)
    yearly = [ln for ln in recurring if _spans_a_year(ln)]
    if prorations:
        facts.append("the plan change is settled by the day: " + " and ".join(quote(ln) for ln in prorations))
    if coupon_ended:
        facts.append(coupon_ended)
    for line in yearly:
        facts.append(f"annual renewal for {line.period_start} to {line.period_end}: {quote(line)}")
    for tax in lines_of(invoice, "tax"):
        rate = next((r for r in book.tax_rates if r.code == tax.tax_code), None)
        at = f" at {tax_percent(rate.rate)}%" if rate else ""
        facts.append(
            f"tax {tax.tax_code}{at}, the rate for region {ledger.customer.tax_region} on "
            f"{invoice.issued_at}: {fmt(tax.amount)}"
        )
    if prorations:
        return _Benign("upgrade_proration", "it settles a mid-period plan change by the day", facts)
    if coupon_ended:
        return _Benign(
            "coupon_ended", "the coupon's months have ended, so the discount no longer applies", facts
        )
    if yearly:
        return _Benign(
            "annual_renewal", "it is the yearly plan's annual renewal, billed once for the year", facts
        )
    return _Benign("tax_line", "the total includes tax at the rate of the customer's region", facts)


def investigate(
    ledger: CustomerLedger, book: PriceBook, as_of: date, asked: Asked | None = None
) -> Investigation:
    """Answer one complaint from the ledger alone.

    `asked` is what the customer pointed at (an invoice id, a month, an amount), if anything: it picks
    which overpaid invoice the answer is about when there are several, and which correct invoice to
    explain when there are none.
    """
    asked = asked or Asked()
    findings = audit_customer(ledger, book, as_of)
    about = asked_about(ledger, findings, as_of, asked)
    if findings:
        period = asked_period(ledger, as_of, asked)
        found = _credit(_pick_finding(findings, ledger, asked, period), len(findings) - 1)
        return replace(found, asked=about)
    invoice = _pick_invoice(ledger, as_of, asked)
    if invoice is None:
        reasoning = f"{ledger.customer.id} has no invoices up to {as_of}; nothing was overcharged."
        return Investigation(NO_ERROR, [], ZERO, "explain_only", reasoning, [], asked=about)
    check = next(c for c in check_ledger(ledger, book, as_of) if c.invoice_id == invoice.id)
    benign = _benign(ledger, book, check, invoice)
    if check.billing_difference == ZERO:
        billed = f"{invoice.id} ({fmt(invoice.total)}) is billed as the rules say"
    else:  # billed differently, but nobody paid more than is due
        billed = f"{invoice.id} bills {fmt(invoice.total)} where the rules give {fmt(check.should_pay)}"
    reasoning = f"{billed} and nothing on the account was paid beyond the rules: {benign.why}."
    return Investigation(
        NO_ERROR, [invoice.id], ZERO, "explain_only", reasoning, benign.facts, benign.variant, about
    )
