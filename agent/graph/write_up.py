"""The write-up: a reply for the customer in their language and an internal note citing evidence [E1]….

Composed by code from verified findings; every figure is read from an evidence item, never retyped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.graph import prompts
from agent.graph.grounding import EvidenceBook, ungrounded
from agent.graph.prompts import Language
from agent.graph.state import EvidenceItem, Findings, OtherFinding, Reply

RECOMPUTE = "recompute_invoice"
LISTED = "list_invoices"
# Evidence read from the customer's words by code (the auditor's asked_about), not from the ledger: the
# amount they named, when it is nowhere on the account, so the reply may quote it back.
COMPLAINT = "complaint"
NAMED_AMOUNT = "amount the customer named: no invoice, line, payment or credit note on the account has it"
MATCHES_RULES = "billed amount matches the billing rules"  # recompute_invoice's verdict for a correct bill


def _cite(item: EvidenceItem | None) -> str:
    return f" [{item['id']}]" if item else ""


def _value(evidence: EvidenceBook, invoice_id: str, claim: str) -> tuple[str, EvidenceItem]:
    item = evidence.find(RECOMPUTE, invoice_id, claim)
    if item is None:
        raise LookupError(f"no recomputation of {invoice_id} in the evidence ({claim})")
    return item["value"], item


def _month(language: Language, evidence: EvidenceBook, invoice_id: str) -> str | None:
    issued = evidence.find(LISTED, invoice_id, "issued on")
    return prompts.month_of(language, issued["value"]) if issued else None


def answer_to_what_was_asked(
    language: Language,
    asked: dict[str, Any],
    findings: Findings,
    target: str,
    evidence: EvidenceBook,
    currency: str = "USD",
) -> str:
    """What the reply says first when the customer named something other than where the answer is: an
    amount nowhere on the account (and the invoices it could not be matched to), or a correct invoice on
    an account overcharged elsewhere. Empty when they named the invoice the answer is about, or nothing.
    Every figure comes from an evidence item; a sentence whose figures are missing is left out."""
    named = evidence.find(COMPLAINT, "complaint", NAMED_AMOUNT) if asked.get("amount") else None
    if named is not None and not asked.get("amount_on_account"):
        listed = [(i, evidence.find(LISTED, i, "total")) for i in asked.get("listed", [])]
        if not listed or any(total is None for _, total in listed):
            return ""
        in_period = asked.get("period") and all(
            (evidence.find(LISTED, i, "issued on") or {}).get("value", "")[:7] == asked["period"]
            for i, _ in listed
        )
        month = _month(language, evidence, listed[0][0]) if in_period else None
        return prompts.amount_not_found(
            language, named["value"], month, [(i, total["value"]) for i, total in listed if total], currency
        )
    pointed_at = asked.get("invoice_id")
    credit = findings["expected_action"] == "credit_note"
    if not credit or not pointed_at or asked.get("overpaid") or pointed_at in findings["invoice_ids"]:
        return ""
    total = evidence.find(RECOMPUTE, pointed_at, "billed total")
    verdict = evidence.find(RECOMPUTE, pointed_at, "verdict")
    asked_month, target_month = _month(language, evidence, pointed_at), _month(language, evidence, target)
    if total is None or asked_month is None or target_month is None:
        return ""
    correct = verdict is not None and verdict["value"] == MATCHES_RULES
    return prompts.asked_elsewhere(
        language, (pointed_at, asked_month, total["value"]), correct, (target, target_month), currency
    )


def compose_reply(
    language: Language,
    findings: Findings,
    target: str,
    variant: str | None,
    evidence: EvidenceBook,
    investigator: str,
    asked: dict[str, Any] | None = None,
    others: Sequence[OtherFinding] = (),
    currency: str = "USD",
    language_fallback: str | None = None,
) -> Reply:
    """`asked`: the auditor's reading of what the customer named
    (agent.auditor.audit.asked_about); `currency`:
    the customer's, for the amounts of a reply in a language that names it; `language_fallback`: why the
    reply is in English though the words may not be (the note says so)."""
    answer = answer_to_what_was_asked(language, asked or {}, findings, target, evidence, currency)
    billed, billed_item = _value(evidence, target, "billed total")
    should, should_item = _value(evidence, target, "should have billed (reference rules)")
    paid, paid_item = _value(evidence, target, "paid (successful payments)")
    count = evidence.find(RECOMPUTE, target, "successful payments")
    verdict = evidence.find(RECOMPUTE, target, "verdict")
    if findings["expected_action"] == "credit_note":
        overcharge, over_item = _value(evidence, target, "overcharge (paid − should have paid)")
        cause = prompts.describe_root_cause(findings["root_cause"], language)
        customer = prompts.credit_reply(language, target, paid, should, overcharge, cause, answer, currency)
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
        customer = prompts.explain_reply(language, target, billed, reason, answer, currency)
        internal = (
            f"No error ({variant or 'matches_rules'}): {prompts.describe_benign(variant, 'en')}. "
            f"{target} billed {billed}{_cite(billed_item)}, the rules say {should}{_cite(should_item)}, "
            f"paid {paid}{_cite(paid_item)}. Nothing to credit. Investigator: {investigator}; "
            "the deterministic auditor agrees."
        )
    mentioned = [o for o in others if not ungrounded(o["overcharge"], evidence.items)]
    if mentioned:  # verified by recomputation, and each amount is one the evidence holds
        found = [(o["invoice_id"], o["overcharge"]) for o in mentioned]
        customer += " " + prompts.other_overcharges(language, found, currency)
        internal += (
            " Also overpaid on this account (verified, not credited by this case): "
            + ", ".join(f"{o['invoice_id']} {o['overcharge']} ({o['root_cause']})" for o in mentioned)
            + "."
        )
    if language_fallback:
        internal += f" The reply is in English: {language_fallback}."
    return {"customer_message": customer, "internal_note": internal}


def ungrounded_in_reply(reply: Reply, evidence: EvidenceBook, language: Language = "en") -> list[str]:
    """The reply's numbers are read as its language writes them; the internal note is always English."""
    return ungrounded(reply["customer_message"], evidence.items, language) + ungrounded(
        reply["internal_note"], evidence.items
    )
