"""The investigation's state, checkpointed in Postgres after every step (thread_id = case id)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

CaseStatus = Literal[
    "queued",
    "investigating",
    "needs_customer",
    "explained",
    "awaiting_approval",
    "issued",
    "rejected",
    "expired",
    "cancelled",
    "revision_requested",
    "escalated",
]


class Findings(TypedDict):
    root_cause: str
    invoice_ids: list[str]
    overcharge: str  # money string, "174.90"
    expected_action: Literal["credit_note", "explain_only"]
    reasoning: str
    reasoning_by: NotRequired[str]  # "model" (grounded) or "auditor"; set by verify


class EvidenceItem(TypedDict):
    id: str  # "E1", "E2", … cited by the internal note
    tool: str
    ref: str  # the invoice / payment / event it is about
    claim: str
    value: str


class Reply(TypedDict):
    customer_message: str
    internal_note: str


class CaseState(TypedDict, total=False):
    case_id: str
    customer_id: str | None
    question: str
    requester: str
    language: Literal["en", "zh"]
    month: int | None
    amount: str | None
    investigator: str
    findings: Findings | None
    verified: bool  # the findings passed verify (only verified findings leave the graph's state)
    auditor: dict[str, Any] | None  # the deterministic auditor's own conclusion (the cross-check)
    variant: str | None  # benign explanation kind when nothing is wrong
    evidence: list[EvidenceItem]
    target_invoice_id: str | None
    reply: Reply | None
    status: CaseStatus
    escalation_reason: str | None
    credit_note: dict[str, Any] | None
    decisions: list[dict[str, Any]]
