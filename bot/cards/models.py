"""Plain view models the cards are drawn from. The bot layer maps investigation and approval results into
these; the cards never reach into the database, the graph or the approval rules themselves.

Money is Decimal (engine.money rules); `currency` is the customer's (ISO code, shown after amounts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from approvals.models import NoteStatus
from engine.diff import InvoiceCheck
from engine.model import Payment
from engine.money import money

DecisionKind = Literal["approve", "reject"]
StepKind = Literal["tool", "finding", "note", "error"]
ProgressState = Literal["running", "done", "failed"]


@dataclass(frozen=True)
class Message:
    """A message to post: `text` is the notification and fallback text, `blocks` the card."""

    text: str
    blocks: list[dict[str, Any]]

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for chat.postMessage, chat.update and chat.postEphemeral."""
        return {"text": self.text, "blocks": self.blocks}


@dataclass(frozen=True)
class CustomerView:
    id: str  # "C-0007"
    name: str
    currency: str  # "USD"


@dataclass(frozen=True)
class CandidateView:
    """A customer the complaint's words could mean."""

    id: str
    name: str
    country: str


# ---- the live progress message ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgressStep:
    kind: StepKind
    text: str  # "list_invoices C-0007 → 6 invoices", "INV-0007-05 was charged twice"


@dataclass(frozen=True)
class ProgressView:
    case_id: str
    customer_id: str
    requested_by: str  # Slack user id of whoever asked
    steps: Sequence[ProgressStep] = ()
    state: ProgressState = "running"
    revision: int = 0


# ---- the rest of the account ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OtherFindingView:
    """Another overpaid invoice of the case's account (verified by recomputation), and the linked case
    opened for it, once someone clicked `Open a case` — or the open note another case already has on it."""

    invoice_id: str
    root_cause: str
    overcharge: Decimal
    linked_case_id: str | None = None
    credited_by: str | None = None  # an open credit note (draft or approved) already on the invoice


# ---- explain-only result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExplanationView:
    case_id: str
    customer: CustomerView
    complaint: str  # the customer's words, as the support agent quoted them
    root_cause: str | None  # None: the bill was right
    explanation: str  # for the support agent: what happened
    customer_reply: str  # ready to paste to the customer
    invoice_ids: Sequence[str] = ()
    revision: int = 0
    other_findings: Sequence[OtherFindingView] = ()
    model_line: str = ""  # who investigated in the model's stead, and what the model cost ("": nothing)


# ---- the evidence card and its credit note ----------------------------------------------------------------


@dataclass(frozen=True)
class ConclusionView:
    """The agent's conclusion, shown as such; the approver judges it against the recomputation."""

    root_cause: str  # "duplicate_charge"
    overcharge: Decimal
    summary: str  # the agent's reasoning, short
    summary_by: str = "auditor"  # "model": a model's words that passed grounding; else the auditor's


@dataclass(frozen=True)
class LineDiffView:
    kind: str  # "subscription", "proration", "discount", "tax", …
    billed_description: str | None  # None: the rules want a line the bill does not have
    expected_description: str | None  # None: a line the rules do not produce
    billed: Decimal
    expected: Decimal

    @property
    def difference(self) -> Decimal:
        return money(self.billed - self.expected)


@dataclass(frozen=True)
class PaymentView:
    id: str
    amount: Decimal
    status: str  # succeeded / failed / refunded
    attempted_at: datetime | date


@dataclass(frozen=True)
class RecomputationView:
    """The system's fresh recomputation of one invoice from the ledger and the billing rules."""

    invoice_id: str
    period_start: date
    period_end: date  # exclusive
    should_exist: bool  # False: the rules produce no invoice here (a duplicate, after a cancellation…)
    billed_total: Decimal
    expected_total: Decimal  # what should have been billed; zero when the invoice should not exist
    paid_total: Decimal  # successful payments
    credited_total: Decimal  # credit notes already issued on it
    line_diffs: Sequence[LineDiffView] = ()
    payments: Sequence[PaymentView] = ()

    @property
    def overpaid(self) -> Decimal:
        return money(self.paid_total - self.expected_total)

    @property
    def outstanding(self) -> Decimal:
        """Overpaid and not yet credited back."""
        return money(self.overpaid - self.credited_total)

    @classmethod
    def from_check(cls, check: InvoiceCheck, payments: Iterable[Payment] = ()) -> RecomputationView:
        """From the engine's line-level diff; `payments` are the ledger's payments (any invoice)."""
        return cls(
            invoice_id=check.invoice_id,
            period_start=check.period_start,
            period_end=check.period_end,
            should_exist=check.should_exist,
            billed_total=check.billed_total,
            expected_total=check.should_pay,
            paid_total=check.paid_total,
            credited_total=check.credited_total,
            line_diffs=[
                LineDiffView(d.kind, d.billed_description, d.expected_description, d.billed, d.expected)
                for d in check.line_diffs
            ],
            payments=[
                PaymentView(p.id, p.amount, p.status, p.attempted_at)
                for p in payments
                if p.invoice_id == check.invoice_id
            ],
        )


@dataclass(frozen=True)
class ToolCallView:
    tool: str  # "list_payments"
    summary: str = ""  # the arguments in short: "INV-0007-05"
    ok: bool = True


@dataclass(frozen=True)
class CardNote:
    """A credit note as the cards show it: approvals' CreditNoteView (the one view of a note) cut to what a
    card draws, plus what the screens add (held by the daily limit, refused at issue, its ledger changed)."""

    id: str  # "CN-0001"
    invoice_id: str
    amount: Decimal
    reason: str
    status: NoteStatus
    approvals: int  # approve votes so far
    needed: int  # approve votes required (1, or 2 at or above the threshold)
    expires_at: datetime  # timezone-aware
    held_by_budget: bool = False  # approved, but issuing it today would pass the daily credit limit
    issue_refused: str | None = None  # approved, but issuing it was refused (why): its case escalated
    ledger_changed: str | None = None  # still open, and an import changed its invoice since it was drafted
    cancelled_by: str | None = None  # who cancelled it (a Slack user id); None: BillSleuth's own sweep
    cancel_reason: str = ""
    stripe_credit_note_id: str | None = None  # issued in Stripe as this credit note
    stripe_url: str | None = None  # its page in the Stripe dashboard
    stripe_error: str | None = None  # approved, but Stripe failed the last try (the sweep tries again)

    @property
    def cancellable(self) -> bool:
        """Approved and never issued, and nothing will issue it now: the card offers Cancel."""
        return self.status == "approved" and (self.held_by_budget or self.issue_refused is not None)


@dataclass(frozen=True)
class DecisionView:
    user_id: str  # Slack user id
    decision: DecisionKind
    comment: str = ""  # a reject's reason, an approver's note
    at: datetime | None = None
    via: str | None = None  # "via CLI by <os account>" for a vote cast from the CLI's break-glass door


@dataclass(frozen=True)
class RoundView:
    """An approver sent a round's note back with a question; the requester's answer started the next."""

    round: int
    credit_note_id: str
    asked_by: str  # Slack id
    question: str
    answer: str | None = None
    answered_by: str | None = None


@dataclass(frozen=True)
class CreditNoteCardView:
    """Everything on the card an approver decides from. While the note is a draft the card has the
    Approve and Reject buttons; an approved note that is held or was refused at issue has Cancel; in any
    other status it shows the outcome and no buttons."""

    case_id: str
    customer: CustomerView
    complaint: str
    requested_by: str  # Slack user id of whoever opened the case
    conclusion: ConclusionView
    recompute: RecomputationView
    tool_trail: Sequence[ToolCallView]
    credit_note: CardNote
    decisions: Sequence[DecisionView] = ()
    revision: int = 0  # bump on every re-render: block_ids change, stale clicks are recognisable
    rounds: Sequence[RoundView] = ()  # the case's notes sent back so far, oldest first
    max_rounds: int = 3  # how many rounds a case may have before a person takes over
    found_by: str | None = (
        None  # how the customer was found in the complaint: email, name, fuzzy name, chosen
    )
    other_findings: Sequence[OtherFindingView] = ()  # the account's other overpaid invoices
    model_line: str = ""  # who investigated in the model's stead, and what the model cost ("": nothing)

    @property
    def sent_back(self) -> RoundView | None:
        """The request for changes that ended this card's note, if one did."""
        return next((r for r in self.rounds if r.credit_note_id == self.credit_note.id), None)


# ---- the reject-reason modal ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RejectModalMetadata:
    """Carried in the modal's private_metadata: which card to update once the reason is submitted."""

    channel: str
    message_ts: str
    credit_note_id: str
    revision: int = 0  # the card revision the Reject click came from

    def to_json(self) -> str:
        return json.dumps(
            {
                "channel": self.channel,
                "message_ts": self.message_ts,
                "credit_note_id": self.credit_note_id,
                "revision": self.revision,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> RejectModalMetadata:
        try:
            data = json.loads(text)
            return cls(
                channel=str(data["channel"]),
                message_ts=str(data["message_ts"]),
                credit_note_id=str(data["credit_note_id"]),
                revision=int(data.get("revision", 0)),
            )
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"the modal's private_metadata is not ours: {error}") from None


# ---- App Home and ephemeral notices ----------------------------------------------------------------------


@dataclass(frozen=True)
class PendingNoteView:
    credit_note: CardNote
    case_id: str
    customer: CustomerView
    revision: int = 0


@dataclass(frozen=True)
class CaseSummaryView:
    case_id: str
    customer_id: str
    status: str  # the case status: explained, awaiting_approval, issued, rejected, expired, escalated
    opened_at: datetime
    complaint: str
    credit_note_id: str | None = None


@dataclass(frozen=True)
class CreditLeftView:
    """One currency's daily credit limit and what today (UTC) has used of it."""

    currency: str
    limit: Decimal
    issued_today: Decimal

    @property
    def left(self) -> Decimal:
        return max(self.limit - self.issued_today, Decimal(0))


@dataclass(frozen=True)
class HomeView:
    user_id: str
    is_approver: bool
    pending: Sequence[PendingNoteView] = ()  # shown to approvers, with buttons
    open_cases: Sequence[CaseSummaryView] = field(default_factory=tuple)  # the user's own cases
    held: Sequence[PendingNoteView] = ()  # approved, never issued (held or refused): approvers may cancel
    credit_left: Sequence[CreditLeftView] = ()  # today's room under the daily limit, per currency


@dataclass(frozen=True)
class Refusal:
    """Why a click or command did nothing; shown only to the person who tried."""

    rule: str  # the rule's name: "two-person rule", "one vote each", "requester cannot approve", …
    reason: str  # what happened, in a sentence: "you already approved CN-0001"


# ---- telling approvers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApproverNoticeView:
    """A note waiting for approvers, as their notice, reminder or "decided" update shows it."""

    credit_note_id: str
    amount: Decimal
    customer: CustomerView  # currency: the invoice's, the note's
    invoice_id: str
    case_id: str
    approvals: int
    needed: int
    expires_at: datetime
    card_link: str | None  # chat.getPermalink of the evidence card; None when the case has no card
    waiting_for: tuple[str, ...]  # Slack ids of the approvers who can still vote
    status: NoteStatus = NoteStatus.DRAFT
    approved_by: tuple[str, ...] = ()  # Slack ids, in vote order
    ended_by: str | None = None  # who rejected or cancelled it: a Slack id, or None (BillSleuth itself)
    reason: str = ""  # the reject's or cancel's reason
