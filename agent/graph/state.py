"""The investigation's state, checkpointed in Postgres after every step (thread_id = case id)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NotRequired, TypedDict

from agent.language import Language
from approvals.models import NoteStatus


class CaseStatus(StrEnum):
    """A case's status (the cases.status CHECK and DESIGN.md's case JSON list the same values)."""

    QUEUED = "queued"  # claimed, waiting for an investigation slot
    INVESTIGATING = "investigating"
    NEEDS_CUSTOMER = "needs_customer"
    EXPLAINED = "explained"
    AWAITING_APPROVAL = "awaiting_approval"
    ISSUED = "issued"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    REVISION_REQUESTED = "revision_requested"
    ESCALATED = "escalated"


# What recovery picks up after a stop.
UNFINISHED = (CaseStatus.QUEUED, CaseStatus.INVESTIGATING)
# Ended by their credit note's outcome: a customer reply is owed in the thread.
SETTLED = (CaseStatus.ISSUED, CaseStatus.REJECTED, CaseStatus.EXPIRED, CaseStatus.CANCELLED)
# Nothing more will happen to these (an escalated case's approved note may still be cancelled).
FINISHED = (CaseStatus.NEEDS_CUSTOMER, CaseStatus.EXPLAINED, *SETTLED, CaseStatus.ESCALATED)


# An approver's "Request changes" (Decision.REQUEST_CHANGES) sends the note back at most this many rounds:
# the third round's note cannot be sent back.
MAX_ROUNDS = 3

SYSTEM = "system"  # who resumes a case when no person did (a sweep, an expiry, the hold limit)
EXPIRE = "expire"  # what a case hears when its draft ran out of time


@dataclass(frozen=True)
class Resume:
    """What a case waiting for approval hears when it is resumed (LangGraph's `Command(resume=…)`): who
    decided what, and why. Checkpoints and the state's `decisions` list hold it as a dict with these three
    keys, so a case paused by an older process resumes the same way (`to_dict`, `from_dict`).

    `decision`: a person's Decision; EXPIRE; or, when the sweep settles a note decided elsewhere, the
    note's status."""

    approver: str
    decision: str
    comment: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"approver": self.approver, "decision": str(self.decision), "comment": self.comment}

    @classmethod
    def from_dict(cls, heard: Mapping[str, Any]) -> Resume:
        return cls(str(heard["approver"]), str(heard["decision"]), str(heard.get("comment") or ""))

    @classmethod
    def by_system(cls, decision: str, comment: str = "") -> Resume:
        return cls(SYSTEM, decision, comment)


EXPIRED_RESUME = Resume.by_system(EXPIRE)  # the draft ran out of time: the reply promises nothing


def refused_at_issue(note_status: str, case_status: str) -> bool:
    """An approved note whose case escalated: issuing it was refused for good (the ledger changed, or it
    is larger than a whole day's limit). It waits for a person to cancel it, and the sweep cancels it after
    BILLSLEUTH_HOLD_MAX_DAYS like one the daily limit holds (approvals.holds decides that one)."""
    return note_status == NoteStatus.APPROVED and case_status == CaseStatus.ESCALATED


class Findings(TypedDict):
    root_cause: str
    invoice_ids: list[str]
    overcharge: str  # money string, "174.90"
    expected_action: Literal["credit_note", "explain_only"]
    reasoning: str
    reasoning_by: NotRequired[str]  # "model" (grounded) or "auditor"; set by verify


class OtherFinding(TypedDict):
    """Another overpaid invoice of the same account, found by the auditor and confirmed by recomputation."""

    invoice_id: str
    root_cause: str
    overcharge: str  # money string, still owed back


class EvidenceItem(TypedDict):
    id: str  # "E1", "E2", … cited by the internal note
    tool: str
    ref: str  # the invoice / payment / event it is about
    claim: str
    value: str


class Reply(TypedDict):
    customer_message: str
    internal_note: str


class Round(TypedDict):
    round: int  # the round whose note was sent back
    credit_note_id: str
    asked_by: str  # the approver's Slack id
    question: str
    answer: NotRequired[str]  # the requester's answer, which started the next round
    answered_by: NotRequired[str]


class CaseState(TypedDict, total=False):
    case_id: str
    customer_id: str | None
    question: str
    requester: str
    language: Language
    language_fallback: str | None  # why the reply is in English though the words may not be, else None
    currency: str | None  # the customer's, for the amounts of the reply
    month: int | None
    year: int | None  # with month, when the customer wrote one ("September 2025")
    months_back: int | None  # "last month" = 1, resolved against the ledger's as-of date by the auditor
    amount: str | None
    invoice_id: str | None  # an invoice id the customer quoted
    investigator: str
    # Why the offline auditor investigated a case meant for the model (the month's model budget), or None.
    investigator_note: str | None
    findings: Findings | None
    verified: bool  # the findings passed verify (only verified findings leave the graph's state)
    auditor: dict[str, Any] | None  # the deterministic auditor's own conclusion (the cross-check)
    variant: str | None  # benign explanation kind when nothing is wrong
    evidence: list[EvidenceItem]
    other_findings: list[OtherFinding]  # verified by verify; never from a model
    target_invoice_id: str | None
    reply: Reply | None
    status: CaseStatus
    escalation_reason: str | None
    credit_note: dict[str, Any] | None
    decisions: list[dict[str, Any]]
    round: int  # 1, then 2 and 3 after an approver requested changes
    rounds: list[Round]  # each request for changes, with its answer once given
