"""The write-up: a reply for the customer in their language and an internal note citing evidence [E1]….

Composed by code from verified findings; every figure is read from an evidence item, never retyped.
"""

from __future__ import annotations

from agent import prompts
from agent.grounding import EvidenceBook, ungrounded
from agent.prompts import Language
from agent.state import EvidenceItem, Findings, Reply

RECOMPUTE = "recompute_invoice"


def _cite(item: EvidenceItem | None) -> str:
    return f" [{item['id']}]" if item else ""


def _value(evidence: EvidenceBook, invoice_id: str, claim: str) -> tuple[str, EvidenceItem]:
    item = evidence.find(RECOMPUTE, invoice_id, claim)
    if item is None:
        raise LookupError(f"no recomputation of {invoice_id} in the evidence ({claim})")
    return item["value"], item


def compose_reply(
    language: Language,
    findings: Findings,
    target: str,
    variant: str | None,
    evidence: EvidenceBook,
    investigator: str,
) -> Reply:
    billed, billed_item = _value(evidence, target, "billed total")
    should, should_item = _value(evidence, target, "should have billed (reference rules)")
    paid, paid_item = _value(evidence, target, "paid (successful payments)")
    count = evidence.find(RECOMPUTE, target, "successful payments")
    verdict = evidence.find(RECOMPUTE, target, "verdict")
    if findings["expected_action"] == "credit_note":
        overcharge, over_item = _value(evidence, target, "overcharge (paid − should have paid)")
        cause = prompts.describe_root_cause(findings["root_cause"], language)
        customer = prompts.credit_reply(language, target, paid, should, overcharge, cause)
        cause_en = prompts.describe_root_cause(findings["root_cause"], "en")
        internal = (
            f"Root cause: {findings['root_cause']} — {cause_en}. "
            f"{target} billed {billed}{_cite(billed_item)}; paid {paid}{_cite(paid_item)}"
            f" in {count['value'] if count else '?'} successful payment(s){_cite(count)}; the rules say "
            f"{should}{_cite(should_item)} ({verdict['value'] if verdict else ''}{_cite(verdict)}). "
            f"Overcharge {overcharge}{_cite(over_item)}: a credit note for exactly this amount on {target} "
            f"awaits finance approval. Investigator: {investigator}; the deterministic auditor agrees."
        )
    else:
        reason = prompts.describe_benign(variant, language)
        customer = prompts.explain_reply(language, target, billed, reason)
        internal = (
            f"No error ({variant or 'matches_rules'}): {prompts.describe_benign(variant, 'en')}. "
            f"{target} billed {billed}{_cite(billed_item)}, the rules say {should}{_cite(should_item)}, "
            f"paid {paid}{_cite(paid_item)}. Nothing to credit. Investigator: {investigator}; "
            "the deterministic auditor agrees."
        )
    return {"customer_message": customer, "internal_note": internal}


def ungrounded_in_reply(reply: Reply, evidence: EvidenceBook) -> list[str]:
    return ungrounded(reply["customer_message"], evidence.items) + ungrounded(
        reply["internal_note"], evidence.items
    )
