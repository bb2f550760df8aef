"""What the approvals package hands back to its callers (the graph, the CLI, the Slack bot).

Plain frozen dataclasses and exceptions, so callers never see a database row. Every refusal carries a
stable `rule` name (the bot shows it; tests assert on it) and a one-line human `message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

CLI_SOURCE = "cli:"  # a decision's source from the CLI: cli:<os account> (approvals.identity)
SLACK_SOURCE = "slack:"  # from a Slack-signed payload: slack:<team id>


class NoteStatus(StrEnum):
    """A credit note's status (the credit_notes.status CHECK lists the same values)."""

    DRAFT = "draft"  # waiting for votes
    APPROVED = "approved"  # voted through, not issued yet (about to be, held by the daily limit, or refused)
    ISSUED = "issued"  # money left
    REJECTED = "rejected"
    EXPIRED = "expired"  # nobody decided in time
    CANCELLED = "cancelled"  # approved, then ended without being issued


# Notes that may still be issued: they count against what is owed on their invoice.
OPEN_NOTES = (NoteStatus.DRAFT, NoteStatus.APPROVED)


@dataclass(frozen=True)
class OpenNote:
    """The open credit note on an invoice: whoever finds that invoice overpaid is told who is settling it."""

    id: str
    case_id: str | None
    status: str


# What counts against the paid total when drafting: approved or already issued.
CREDITED_NOTES = (NoteStatus.APPROVED, NoteStatus.ISSUED)
# Notes that ended without money leaving: the customer reply promises nothing.
NO_MONEY = (NoteStatus.REJECTED, NoteStatus.EXPIRED, NoteStatus.CANCELLED)
# How far each status is along its way: with the number of votes it makes the note's revision.
_STATUS_RANK = {
    NoteStatus.DRAFT: 0,
    NoteStatus.APPROVED: 1,
    NoteStatus.ISSUED: 2,
    NoteStatus.REJECTED: 1,
    NoteStatus.EXPIRED: 1,
    NoteStatus.CANCELLED: 2,
}


def note_revision(status: str, approvals: int, *, rejected: bool) -> int:
    """A note's revision from its status, its approve votes and whether a reject vote was cast."""
    return approvals + (1 if rejected else 0) + _STATUS_RANK.get(status, 0)  # type: ignore[call-overload]


class Decision(StrEnum):
    """What a person decides on a credit note, at every door (Slack, the slash command, the CLI)."""

    APPROVE = "approve"  # a vote for a draft
    REJECT = "reject"  # a vote against a draft; needs a reason
    # A reject that sends the draft back with a question: the case waits for the requester's answer, then
    # investigates again (a new round). Recorded as a reject vote; the graph hears this.
    REQUEST_CHANGES = "request_changes"
    CANCEL = "cancel"  # the end of an approved note that was never issued; needs a reason


class Rule(StrEnum):
    """The rule a refusal names. Values are stable: the activity log and the bot rely on them."""

    # drafting
    CASE_ID_REQUIRED = "case_id_required"
    AMOUNT_POSITIVE = "amount_positive"
    AMOUNT_CENTS = "amount_cents"
    CURRENCY_MINOR_UNIT = "currency_minor_unit"
    ROOT_CAUSE = "root_cause"
    INVOICE_EXISTS = "invoice_exists"
    PAID_TOTAL = "paid_total"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    OPEN_NOTE_ON_INVOICE = "open_note_on_invoice"
    # drafting and issuing: what is owed back is re-derived from the ledger where money is committed
    OVERCHARGE_CHANGED = "overcharge_changed"
    OVERCHARGE_UNVERIFIED = "overcharge_unverified"
    # deciding
    AGENT_CANNOT_APPROVE = "agent_cannot_approve"
    APPROVER_IS_BOT = "approver_is_bot"  # was "bot_cannot_approve" (issue 12 names it approver_is_bot)
    APPROVER_ID = "approver_id"
    NOT_AN_APPROVER = "not_an_approver"
    REQUESTER_CANNOT_APPROVE = "requester_cannot_approve"
    CLI_DECISIONS_OFF = "cli_decisions_off"  # the CLI's break-glass door is shut by the stored policy
    REASON_REQUIRED = "reason_required"
    EXPIRED = "expired"
    ONE_VOTE_EACH = "one_vote_each"
    # a CLI vote counts once per OS account on a note, whatever Slack id `--as` names
    ONE_VOTE_PER_OS_ACCOUNT = "one_vote_per_os_account"
    CONFLICT = "conflict"
    ARGS_MISMATCH = "args_mismatch"
    # who may read notes and open cases (BILLSLEUTH_SUPPORT and the approvers)
    NOT_ALLOWED_TO_READ = "not_allowed_to_read"
    NOT_ALLOWED_TO_OPEN = "not_allowed_to_open"
    # what a Slack click or command names does not exist, or no longer allows it (the bot's refusals)
    UNKNOWN_CREDIT_NOTE = "unknown_credit_note"
    UNKNOWN_CASE = "unknown_case"
    CASE_REQUIRED = "case_required"  # the note was not drafted by a case
    CUSTOMER_CHOSEN_ALREADY = "customer_chosen_already"
    NOT_AN_OTHER_FINDING = "not_an_other_finding"
    LINKED_CASE_OPENED_ALREADY = "linked_case_opened_already"
    # answering an approver's question (a round)
    NOT_WAITING_FOR_AN_ANSWER = "not_waiting_for_an_answer"
    ONLY_THE_REQUESTER_ANSWERS = "only_the_requester_answers"
    # issuing
    NOT_APPROVED = "not_approved"
    NOT_ENOUGH_APPROVALS = "not_enough_approvals"
    DAILY_CREDIT_LIMIT = "daily_credit_limit"
    # issuing in Stripe (BILLSLEUTH_BILLING_SYSTEM=stripe, approvals/stripe_issuing.py)
    NOT_A_STRIPE_INVOICE = "not_a_stripe_invoice"  # the note's invoice did not come from Stripe
    STRIPE_PREVIEW_DIFFERS = "stripe_preview_differs"  # Stripe would credit another amount, or refuses to
    STRIPE_NOTE_VOIDED = "stripe_note_voided"  # Stripe holds a voided credit note for this note already
    # Stripe could not be reached or failed: the note stays approved and the sweep tries again, same key
    STRIPE_UNAVAILABLE = "stripe_unavailable"
    # deciding a pending policy change (approvals/policy_store.py)
    UNKNOWN_POLICY_CHANGE = "unknown_policy_change"
    PROPOSER_CANNOT_DECIDE = "proposer_cannot_decide"  # consent means a second person
    POLICY_MOVED_ON = "policy_moved_on"  # the stored values it would change are not the ones it was made on
    POLICY_CHANGE_DECIDED = "policy_change_decided"  # approved, rejected or superseded already


class Refused(Exception):
    """A rule said no. Nothing but the refusal itself was recorded (in activity_log)."""

    def __init__(self, rule: Rule, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.details: dict[str, Any] = dict(details or {})  # extra facts for the activity row


class DraftRefused(Refused):
    """draft_credit_note refused to draft."""


class ApprovalRefused(Refused):
    """decide refused a vote."""


class IssueRefused(Refused):
    """issue refused to issue (a hard stop on the daily budget is one of these)."""

    note: CreditNoteView | None = None  # the note as issuing found it under its locks, once it had read it


class NoteMovedOn(Exception):
    """A vote cast from a card (at `seen_revision`) on a note that has moved on since: it is no longer a
    draft, or the card is behind its votes. Found under the note's lock; nothing was recorded."""

    def __init__(self, note: CreditNoteView) -> None:
        super().__init__(f"{note.id} is {note.status} at revision {note.revision}")
        self.note = note


class NoCase(LookupError):
    """A decision that needs the note's case (every decision from Slack) on a note without one."""


class UnknownCreditNote(LookupError):
    def __init__(self, credit_note_id: str) -> None:
        super().__init__(f"no credit note {credit_note_id!r}")
        self.credit_note_id = credit_note_id


@dataclass(frozen=True)
class Vote:
    approver: str
    decision: str  # approve | reject
    comment: str
    args_hash: str  # the note's args_hash when the vote was cast
    decided_at: datetime
    source: str | None = None  # slack:<team id> or cli:<os account>; None for votes cast before it was kept

    @property
    def via(self) -> str | None:
        """ "via CLI by alice" for a vote cast from the CLI (the card and `show` say so); else None."""
        if self.source and self.source.startswith(CLI_SOURCE):
            return f"via CLI by {self.source[len(CLI_SOURCE) :]}"
        return None


@dataclass(frozen=True)
class CreditNoteView:
    id: str
    invoice_id: str
    amount: Decimal
    currency: str  # the invoice's (ISO 4217), part of the amount: "123.60 USD", "12000 JPY"
    reason: str  # duplicate | order_change | product_unsatisfactory | fraudulent
    status: NoteStatus
    approvals: int  # approve votes so far
    needed: int  # approve votes required (1, or 2 at or above the threshold)
    approvers: tuple[str, ...]  # who voted approve, in vote order
    case_id: str | None
    expires_at: datetime | None
    memo: str
    root_cause: str
    args_hash: str
    created_at: datetime
    decided_at: datetime | None
    issued_at: datetime | None
    rejected_by: str | None = None  # who rejected, when rejected
    reject_reason: str | None = None
    cancelled_by: str | None = None  # who cancelled an approved note that was never issued
    cancel_reason: str | None = None
    stripe_credit_note_id: str | None = None  # the Stripe credit note issuing created (billing system stripe)
    stripe_livemode: bool = False  # a live-mode credit note (its dashboard page is not under /test)
    stripe_error: str | None = None  # why the last try to issue it in Stripe failed; cleared once issued

    @property
    def revision(self) -> int:
        """The card's revision, a pure function of the note's state: every vote and every status change
        raises it (but a reopen: approved back to draft), so two bot processes agree on it without
        storing it, and a click carrying a lower one (the block_id's `rN`) came from a card that is out
        of date."""
        return note_revision(self.status, self.approvals, rejected=self.rejected_by is not None)

    def summary(self) -> dict[str, Any]:
        """The credit note as a case's JSON shows it (DESIGN.md §3); money as a two-decimal string, with
        its currency beside it."""
        return {
            "id": self.id,
            "invoice_id": self.invoice_id,
            "amount": f"{self.amount:.2f}",
            "currency": self.currency,
            "status": self.status,
            "approvals": self.approvals,
            "needed": self.needed,
            # Only when issued in Stripe: a ledger-only note's JSON keeps its shape.
            **(
                {"stripe_credit_note_id": self.stripe_credit_note_id, "stripe_url": self.stripe_url}
                if self.stripe_credit_note_id
                else {}
            ),
        }

    @property
    def stripe_url(self) -> str | None:
        """The Stripe credit note's page in the Stripe dashboard, when issued in Stripe."""
        if not self.stripe_credit_note_id:
            return None
        # Here, not at the top: engine.stripe_api brings pydantic, which the audit's read path never loads.
        from engine.stripe_api import dashboard_url

        return dashboard_url(f"credit_notes/{self.stripe_credit_note_id}", livemode=self.stripe_livemode)


@dataclass(frozen=True)
class DecisionOutcome:
    credit_note_id: str
    status: str  # the note's status after the decision
    approvals: int
    needed: int
    changed: bool  # False: the note already had this outcome, nothing was written
    message: str  # one line, fit for the person who clicked
    case_id: str | None = None  # the note's case, as the decision found it under the note's lock
    # The note as the case the decision resumed read it last, under issuing's locks, and committed it
    # (issued, still waiting for a second vote, rejected…); None when no run read it. The card is drawn
    # from it instead of reading the note again.
    note: CreditNoteView | None = None


@dataclass(frozen=True)
class IssueOutcome:
    credit_note_id: str
    status: NoteStatus  # issued, or draft when its approvers left the list and it waits for a current one
    amount: Decimal
    changed: bool  # False: it was already issued
    message: str
