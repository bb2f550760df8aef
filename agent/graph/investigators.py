"""Investigators: who reads the ledger and proposes findings. Offline = the deterministic auditor.

Both go through the same audited read-only tools, so the approver sees the same kind of trail whichever ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.auditor.audit import audit_customer
from agent.auditor.audit import investigate as audit_investigate
from agent.cases.intake import Asked
from agent.graph.grounding import EvidenceBook
from agent.graph.state import Findings
from agent.graph.tool_context import ToolContext
from agent.graph.tools import call_tool, ledger_and_book
from agent.graph.write_up import COMPLAINT, NAMED_AMOUNT
from engine.diff import ledger_as_of
from engine.money import fmt

OVERVIEW_TOOLS = ("get_customer", "list_invoices", "list_payments", "list_subscription_events")


@dataclass
class InvestigationOutcome:
    findings: Findings | None
    escalation_reason: str | None = None
    notes: list[str] = field(default_factory=list)
    # The model run stopped because the month's model budget ran out (why, in a line): the offline
    # auditor takes the case over.
    budget_stop: str | None = None


async def auditor_view(ctx: ToolContext, asked: Asked) -> dict[str, Any]:
    """The deterministic auditor's conclusion for this case (code reading the ledger, not a model)."""
    ledger, book = await ledger_and_book(ctx)
    as_of = ledger_as_of(ledger)
    result = audit_investigate(ledger, book, as_of, asked)
    # The rest of the account: every other overpaid invoice, for verify to recompute and the case to list.
    others = [
        {"invoice_id": f.invoice_id, "root_cause": f.root_cause, "overcharge": fmt(f.overcharge)}
        for f in audit_customer(ledger, book, as_of)
        if f.invoice_id not in result.invoice_ids
    ]
    return {
        "root_cause": result.root_cause,
        "invoice_ids": list(result.invoice_ids),
        "overcharge": fmt(result.overcharge),
        "expected_action": result.expected_action,
        "reasoning": result.reasoning,
        "variant": getattr(result, "variant", None),
        "evidence": list(result.evidence),
        "asked": result.asked,
        "other_findings": others,
    }


async def read_what_was_asked(ctx: ToolContext, evidence: EvidenceBook, view: dict[str, Any]) -> None:
    """Put on the record what the reply says about the customer's own words, whoever investigated: the
    invoice they pointed at (recomputed, when it is not one the findings name), the invoices listed, and
    — when it is nowhere on the account — the amount they named, so every figure the reply quotes is
    evidence."""
    asked = view.get("asked") or {}
    pointed_at = asked.get("invoice_id")
    if pointed_at and pointed_at not in view["invoice_ids"] and not asked.get("overpaid"):
        result = await call_tool(ctx, "recompute_invoice", {"invoice_id": pointed_at})
        if result.ok:
            evidence.harvest("recompute_invoice", result.data)
    if not any(item["tool"] == "list_invoices" for item in evidence.items):  # a model may not have listed
        result = await call_tool(ctx, "list_invoices", {})
        if result.ok:
            evidence.harvest("list_invoices", result.data)
    if asked.get("amount") and not asked.get("amount_on_account"):
        evidence.add(COMPLAINT, "complaint", NAMED_AMOUNT, asked["amount"])


async def gather_overview(ctx: ToolContext, evidence: EvidenceBook) -> None:
    """Read the customer's profile, invoices, payments and subscription events (all audited)."""
    for tool in OVERVIEW_TOOLS:
        result = await call_tool(ctx, tool, {})
        if result.ok:
            evidence.harvest(tool, result.data)


async def investigate_offline(
    ctx: ToolContext, evidence: EvidenceBook, asked: Asked
) -> tuple[InvestigationOutcome, dict[str, Any]]:
    """Overview, then the auditor names the invoice, then that invoice is recomputed on the record.

    The auditor re-bills the whole history in one pass, so only the invoices it names need a
    recompute_invoice call of their own (the one the approver will want to see in the trail).
    """
    await gather_overview(ctx, evidence)
    view = await auditor_view(ctx, asked)
    for invoice_id in view["invoice_ids"]:
        result = await call_tool(ctx, "recompute_invoice", {"invoice_id": invoice_id})
        if result.ok:
            evidence.harvest("recompute_invoice", result.data)
    await read_what_was_asked(ctx, evidence, view)
    findings: Findings = {
        "root_cause": view["root_cause"],
        "invoice_ids": view["invoice_ids"],
        "overcharge": view["overcharge"],
        "expected_action": view["expected_action"],
        "reasoning": view["reasoning"],
    }
    return InvestigationOutcome(findings), view
