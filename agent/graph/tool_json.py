"""Ledger objects as the plain JSON the read-only tools return (money as strings, dates as ISO days); the
approver's card shows a recomputation in the same shape."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from engine.diff import InvoiceCheck
from engine.model import Invoice
from engine.money import fmt


def iso_day(value: date | None) -> str | None:
    return value.isoformat() if value else None


def money_text(value: Decimal) -> str:
    return fmt(value)


def invoice_header(invoice: Invoice) -> dict[str, Any]:
    return {
        "id": invoice.id,
        "subscription_id": invoice.subscription_id,
        "period_start": iso_day(invoice.period_start),
        "period_end": iso_day(invoice.period_end),
        "issued_at": iso_day(invoice.issued_at),
        "status": invoice.status,
        "subtotal": money_text(invoice.subtotal),
        "discount": money_text(invoice.discount),
        "tax": money_text(invoice.tax),
        "total": money_text(invoice.total),
        "currency": invoice.currency,
    }


def invoice_with_lines(invoice: Invoice) -> dict[str, Any]:
    return {
        **invoice_header(invoice),
        "lines": [
            {
                "kind": line.kind,
                "description": line.description,
                "quantity": line.quantity,
                "unit_amount": money_text(line.unit_amount),
                "amount": money_text(line.amount),
                "period_start": iso_day(line.period_start),
                "period_end": iso_day(line.period_end),
                "tax_code": line.tax_code,
            }
            for line in invoice.lines
        ],
    }


def check_json(check: InvoiceCheck) -> dict[str, Any]:
    if not check.should_exist:
        verdict = "should not exist: the billing rules produce no such invoice"
        if check.expected_invoice_id:
            verdict += f" (the rules' invoice for this period is {check.expected_invoice_id})"
    elif check.billing_difference == 0:
        verdict = "billed amount matches the billing rules"
    else:
        verdict = "billed amount differs from the billing rules"
    return {
        "invoice_id": check.invoice_id,
        "period_start": iso_day(check.period_start),
        "period_end": iso_day(check.period_end),
        "billed_total": money_text(check.billed_total),
        "should_exist": check.should_exist,
        "expected_invoice_id": check.expected_invoice_id,
        "should_bill": money_text(check.should_pay),
        "difference": money_text(check.billing_difference),
        "paid_total": money_text(check.paid_total),
        "successful_payments": check.successful_payments,
        "overcharge": money_text(check.overcharge),
        "credited_total": money_text(check.credited_total),
        "line_diffs": [
            {
                "kind": d.kind,
                "billed_description": d.billed_description,
                "expected_description": d.expected_description,
                "billed": money_text(d.billed),
                "expected": money_text(d.expected),
                "difference": money_text(d.difference),
            }
            for d in check.line_diffs
        ],
        "expected_lines": invoice_with_lines(check.expected)["lines"] if check.expected else [],
        "verdict": verdict,
    }
