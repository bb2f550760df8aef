"""Credit notes: drafting with idempotency, approval rules, issuing, the daily budget, the activity log.

Imports only `engine` (and SQLAlchemy): it knows nothing of Slack or LangGraph. The graph and the bot
call the functions re-exported here. They are loaded on first use (PEP 562), so importing one light
submodule (approvals.models) does not load SQLAlchemy and every other one with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {  # each name re-exported here → the module that defines it
    "ApprovalRefused": "approvals.models",
    "approvals_needed": "approvals.policy",
    "approvals_of": "approvals.queries",
    "ApprovalSettings": "approvals.config",
    "args_hash": "approvals.policy",
    "cancel": "approvals.cancelling",
    "cancel_held_too_long": "approvals.cancelling",
    "credit_note_for_case": "approvals.queries",
    "credit_notes_for_case": "approvals.queries",
    "credit_reason": "approvals.policy",
    "CreditNoteView": "approvals.models",
    "decide": "approvals.decisions",
    "DecisionOutcome": "approvals.models",
    "draft_credit_note": "approvals.drafting",
    "DraftRefused": "approvals.models",
    "expire_overdue": "approvals.expiry",
    "get_credit_note": "approvals.queries",
    "idempotency_key": "approvals.policy",
    "issue": "approvals.issuing",
    "IssueOutcome": "approvals.models",
    "IssueRefused": "approvals.models",
    "list_pending": "approvals.queries",
    "Refused": "approvals.models",
    "Rule": "approvals.models",
    "SettingsError": "approvals.config",
    "UnknownCreditNote": "approvals.models",
    "Vote": "approvals.models",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups do not come here
    return value
