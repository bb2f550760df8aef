"""Credit notes: drafting with idempotency, approval rules, issuing, the daily budget, the activity log.

Imports only `engine` (and SQLAlchemy): it knows nothing of Slack or LangGraph. The graph and the bot
call the functions re-exported here.
"""

from approvals.cancelling import cancel, cancel_held_too_long
from approvals.config import ApprovalSettings, SettingsError
from approvals.decisions import decide
from approvals.drafting import draft_credit_note
from approvals.expiry import expire_overdue
from approvals.issuing import issue
from approvals.models import (
    ApprovalRefused,
    CreditNoteView,
    DecisionOutcome,
    DraftRefused,
    IssueOutcome,
    IssueRefused,
    Refused,
    Rule,
    UnknownCreditNote,
    Vote,
)
from approvals.policy import approvals_needed, args_hash, credit_reason, idempotency_key
from approvals.queries import (
    approvals_of,
    credit_note_for_case,
    credit_notes_for_case,
    get_credit_note,
    list_pending,
)

__all__ = [
    "ApprovalRefused",
    "ApprovalSettings",
    "CreditNoteView",
    "DecisionOutcome",
    "DraftRefused",
    "IssueOutcome",
    "IssueRefused",
    "Refused",
    "Rule",
    "SettingsError",
    "UnknownCreditNote",
    "Vote",
    "approvals_needed",
    "approvals_of",
    "args_hash",
    "cancel",
    "cancel_held_too_long",
    "credit_note_for_case",
    "credit_notes_for_case",
    "credit_reason",
    "decide",
    "draft_credit_note",
    "expire_overdue",
    "get_credit_note",
    "idempotency_key",
    "issue",
    "list_pending",
]
