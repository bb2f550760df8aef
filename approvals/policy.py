"""Pure rules shared by drafting, deciding and issuing: no I/O here, so each is easy to test and reuse."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row

from approvals.config import ApprovalSettings, at_most_cents
from approvals.models import DraftRefused, Rule

# Stripe's credit note reasons. We only ever draft two of them: billing faults are either a duplicate
# (the customer paid twice for one thing) or a correction of what should have been ordered/billed.
DUPLICATE = "duplicate"
ORDER_CHANGE = "order_change"
PRODUCT_UNSATISFACTORY = "product_unsatisfactory"
FRAUDULENT = "fraudulent"
REASONS = (DUPLICATE, ORDER_CHANGE, PRODUCT_UNSATISFACTORY, FRAUDULENT)

# Seed 002's twelve root causes of an overcharge → the credit note reason.
REASON_BY_ROOT_CAUSE: dict[str, str] = {
    "duplicate_charge": DUPLICATE,
    "duplicate_invoice": DUPLICATE,
    "proration_wrong_days": ORDER_CHANGE,
    "proration_missing_credit": ORDER_CHANGE,
    "expired_tax_rate": ORDER_CHANGE,
    "wrong_tax_region": ORDER_CHANGE,
    "coupon_not_applied": ORDER_CHANGE,
    "coupon_wrong_base": ORDER_CHANGE,
    "quantity_change_ignored": ORDER_CHANGE,
    "cancel_not_respected": ORDER_CHANGE,
    "timezone_change_date": ORDER_CHANGE,
    "wrong_plan_price": ORDER_CHANGE,
}

NO_ERROR = "no_error"


def utc_now() -> datetime:
    return datetime.now(UTC)


def credit_reason(root_cause: str) -> str:
    """The Stripe-like reason for a root cause; a bill with no error is explained, never credited."""
    if root_cause == NO_ERROR:
        raise DraftRefused(
            Rule.ROOT_CAUSE, "root cause no_error means the bill was right: explain, do not credit"
        )
    try:
        return REASON_BY_ROOT_CAUSE[root_cause]
    except KeyError:
        raise DraftRefused(Rule.ROOT_CAUSE, f"unknown root cause {root_cause!r}") from None


def require_decimal(amount: object) -> Decimal:
    if isinstance(amount, float):
        raise TypeError(f"a credit amount cannot be a float: {amount!r}; pass a Decimal")
    if not isinstance(amount, Decimal):
        raise TypeError(f"a credit amount must be a Decimal, not {type(amount).__name__}")
    return amount


def checked_amount(amount: object) -> Decimal:
    """A credit amount exactly as given: a Decimal above zero with at most two decimals.

    Never rounded: the amount must equal the verified overcharge to the cent, so a third decimal is a
    caller's mistake to surface, not to paper over. Floats (and anything but Decimal) are a TypeError.
    """
    amount = require_decimal(amount)
    if not amount.is_finite() or amount <= 0:
        raise DraftRefused(Rule.AMOUNT_POSITIVE, f"a credit amount must be more than zero, got {amount}")
    if not at_most_cents(amount):
        raise DraftRefused(Rule.AMOUNT_CENTS, f"a credit amount has at most two decimals, got {amount}")
    return amount.quantize(Decimal("0.01"))


def idempotency_key(case_id: str, invoice_id: str, amount: Decimal, round_: int = 1) -> str:
    """case:invoice:amount — the same request replayed (graph resume, retry, re-run) maps to one note.
    A later round of the case (an approver requested changes) drafts anew: `:r2`, `:r3` are appended."""
    key = f"{case_id}:{invoice_id}:{amount:.2f}"
    return key if round_ <= 1 else f"{key}:r{round_}"


def approvals_needed(amount: Decimal, currency: str, settings: ApprovalSettings) -> int:
    """Two people at or above the threshold of the note's own currency (300 yen is not 300 dollars)."""
    return 2 if amount >= settings.two_person_threshold_for(currency) else 1


def args_hash(*, invoice_id: str, amount: Decimal, reason: str, root_cause: str, case_id: str | None) -> str:
    """sha256 of the canonical JSON of what an approver approves; issuing refuses if it drifts."""
    canonical = json.dumps(
        {
            "amount": f"{amount:.2f}",
            "case_id": case_id or "",
            "invoice_id": invoice_id,
            "reason": reason,
            "root_cause": root_cause,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def note_args_hash(note: Row[Any]) -> str:
    """The args hash recomputed from a credit_notes row as it stands now."""
    return args_hash(
        invoice_id=note.invoice_id,
        amount=note.amount,
        reason=note.reason,
        root_cause=note.root_cause,
        case_id=note.case_id,
    )
