"""Verification: code checks the investigator's findings against the ledger before anything is written.

Nothing a model says is taken on trust: the invoices must be this customer's, the overcharge must equal the
recomputation's paid − should-have-paid for the target invoice to the cent, the action must follow from it,
and the deterministic auditor must reach the same conclusion. Anything else escalates to a human.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from agent.graph.grounding import EvidenceBook
from agent.graph.state import Findings, OtherFinding
from agent.graph.tool_context import ToolContext
from agent.graph.tools import call_tool

ROOT_CAUSE_NAMES = frozenset(
    {
        "proration_wrong_days",
        "proration_missing_credit",
        "duplicate_charge",
        "duplicate_invoice",
        "expired_tax_rate",
        "wrong_tax_region",
        "coupon_not_applied",
        "coupon_wrong_base",
        "quantity_change_ignored",
        "cancel_not_respected",
        "timezone_change_date",
        "wrong_plan_price",
        "no_error",
    }
)
MONEY_TEXT = r"^\d+\.\d{2}$"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    target_invoice_id: str | None = None
    reason: str | None = None


def _refuse(reason: str) -> Verdict:
    return Verdict(False, None, reason)


def _amount(text: object) -> Decimal | None:
    if not isinstance(text, str):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() and value == value.quantize(Decimal("0.01")) and value >= 0 else None


def check_shape(findings: Findings) -> str | None:
    if findings.get("root_cause") not in ROOT_CAUSE_NAMES:
        return f"unknown root cause {findings.get('root_cause')!r}"
    if findings.get("expected_action") not in ("credit_note", "explain_only"):
        return f"unknown action {findings.get('expected_action')!r}"
    ids = findings.get("invoice_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return "no invoice named"
    if _amount(findings.get("overcharge")) is None:
        return f"overcharge {findings.get('overcharge')!r} is not an amount with two decimals"
    return None


async def verify_findings(
    ctx: ToolContext, findings: Findings, auditor: dict[str, Any], evidence: EvidenceBook
) -> Verdict:
    problem = check_shape(findings)
    if problem:
        return _refuse(f"the findings are malformed: {problem}")
    claimed = _amount(findings["overcharge"])
    assert claimed is not None
    recomputed: dict[str, Decimal] = {}
    for invoice_id in findings["invoice_ids"]:
        result = await call_tool(ctx, "recompute_invoice", {"invoice_id": invoice_id})
        if not result.ok:
            return _refuse(f"invoice {invoice_id} could not be verified: {result.error}")
        evidence.harvest("recompute_invoice", result.data)
        # What is still owed: paid − should have paid − credit notes already issued on the invoice.
        recomputed[invoice_id] = Decimal(result.data["overcharge"]) - Decimal(result.data["credited_total"])

    action = findings["expected_action"]
    if action == "credit_note":
        if claimed <= 0:
            return _refuse("a credit note was proposed for a zero overcharge")
        if findings["root_cause"] == "no_error":
            return _refuse("a credit note was proposed although the root cause is no_error")
        target = next((i for i in findings["invoice_ids"] if recomputed[i] == claimed), None)
        if target is None:
            shown = ", ".join(f"{i}: {v}" for i, v in recomputed.items())
            return _refuse(
                f"the claimed overcharge {claimed} is not supported by the ledger (recomputed: {shown})"
            )
    else:
        if claimed != 0:
            return _refuse(f"explain-only findings carry a non-zero overcharge {claimed}")
        target = findings["invoice_ids"][0]
        if recomputed[target] > 0:
            return _refuse(f"{target} was overpaid by {recomputed[target]} but no credit was proposed")

    disagreement = compare_with_auditor(findings, target, auditor)
    if disagreement:
        return _refuse(disagreement)
    return Verdict(True, target)


def compare_with_auditor(findings: Findings, target: str, auditor: dict[str, Any]) -> str | None:
    """The model and the auditor must agree on cause, invoice, amount and action; show both otherwise."""
    auditor_target = (auditor.get("invoice_ids") or [None])[0]
    mismatches = []
    if findings["root_cause"] != auditor["root_cause"]:
        mismatches.append(f"root cause {findings['root_cause']} vs auditor {auditor['root_cause']}")
    if target != auditor_target:
        mismatches.append(f"invoice {target} vs auditor {auditor_target}")
    if Decimal(findings["overcharge"]) != Decimal(auditor["overcharge"]):
        mismatches.append(f"overcharge {findings['overcharge']} vs auditor {auditor['overcharge']}")
    if findings["expected_action"] != auditor["expected_action"]:
        mismatches.append(f"action {findings['expected_action']} vs auditor {auditor['expected_action']}")
    if not mismatches:
        return None
    return "the investigator and the auditor disagree: " + "; ".join(mismatches)


async def verify_other_findings(
    ctx: ToolContext, others: list[dict[str, Any]], evidence: EvidenceBook
) -> list[OtherFinding]:
    """The auditor's other overpaid invoices that a recomputation on the record confirms, to the cent:
    each one is recomputed through the audited tool (its figures join the evidence), and one the ledger
    no longer supports (credited since, or a different amount) is dropped rather than listed."""
    confirmed: list[OtherFinding] = []
    for other in others:
        claimed = _amount(other.get("overcharge"))
        invoice_id = other.get("invoice_id")
        if claimed is None or claimed <= 0 or not isinstance(invoice_id, str):
            continue
        result = await call_tool(ctx, "recompute_invoice", {"invoice_id": invoice_id})
        if not result.ok:
            continue
        evidence.harvest("recompute_invoice", result.data)
        owed = Decimal(result.data["overcharge"]) - Decimal(result.data["credited_total"])
        if owed == claimed:
            confirmed.append(
                {"invoice_id": invoice_id, "root_cause": str(other["root_cause"]), "overcharge": f"{claimed}"}
            )
    return confirmed
