"""The modal that asks for the reason of a decision that needs one: a reject (of a draft), a request for
changes (the question sent back with a draft) or a cancel (of an approved note that was never issued).
Opened with views.open in the ack path: the click's trigger_id lives 3 seconds. Its callback_id says which
decision it is; its private_metadata which card to update."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.cards.blocks import amount, escape, plain, section
from bot.cards.ids import (
    CANCEL_MODAL_CALLBACK_ID,
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
    REQUEST_CHANGES_MODAL_CALLBACK_ID,
)
from bot.cards.limits import CardLimitError, view_problems
from bot.cards.models import CardNote, RejectModalMetadata

REASON_MIN_CHARS = 3
REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class ReasonModalWords:
    callback_id: str
    title: str
    submit: str
    close: str
    lead: str  # "Rejecting" / "Cancelling"
    consequence: str
    placeholder: str
    label: str = "Reason"


REASON_MODALS = {
    "reject": ReasonModalWords(
        REJECT_MODAL_CALLBACK_ID,
        "Reject credit note",
        "Reject",
        "Cancel",
        "Rejecting",
        "The customer then gets a reply with no amount and no promise of money back.",
        "What is wrong with this credit note?",
    ),
    "cancel": ReasonModalWords(
        CANCEL_MODAL_CALLBACK_ID,
        "Cancel credit note",
        "Cancel the note",
        "Keep it",  # not "Cancel": that would read as the very decision
        "Cancelling",
        "It was approved but never issued; cancelled, it never will be. The customer then gets a reply "
        "with no amount and no promise of money back, and the invoice is free for a new case.",
        "Why should this credit note never be issued?",
    ),
    "request_changes": ReasonModalWords(
        REQUEST_CHANGES_MODAL_CALLBACK_ID,
        "Request changes",
        "Send it back",
        "Back",
        "Sending back",
        "The note is rejected with your question, and the requester is asked in the thread to answer it; "
        "their answer starts a new investigation and, if it still finds an overcharge, a new note.",
        "What should the requester check or tell us?",
        "Your question",
    ),
}
DECISION_OF_CALLBACK = {words.callback_id: decision for decision, words in REASON_MODALS.items()}


def reason_modal(decision: str, meta: RejectModalMetadata, note: CardNote, currency: str) -> dict[str, Any]:
    words = REASON_MODALS[decision]
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": words.callback_id,
        "private_metadata": meta.to_json(),
        "title": plain(words.title),
        "submit": plain(words.submit),
        "close": plain(words.close),
        "blocks": [
            section(
                f"{decision}_summary",
                f"{words.lead} *{escape(note.id)}*: {amount(note.amount, currency)} on "
                f"`{escape(note.invoice_id)}`.\n{words.consequence}",
            ),
            {
                "type": "input",
                "block_id": REJECT_REASON_BLOCK_ID,
                "label": plain(words.label),
                "hint": plain("Recorded with your name on the credit note's approval log."),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REJECT_REASON_ACTION_ID,
                    "multiline": True,
                    "min_length": REASON_MIN_CHARS,
                    "max_length": REASON_MAX_CHARS,
                    "placeholder": plain(words.placeholder),
                },
            },
        ],
    }
    problems = view_problems(view)
    if problems:
        raise CardLimitError("; ".join(problems))
    return view


def reject_reason_modal(meta: RejectModalMetadata, note: CardNote, currency: str) -> dict[str, Any]:
    return reason_modal("reject", meta, note, currency)


def read_reason_submission(view: Mapping[str, Any]) -> tuple[str, RejectModalMetadata, str]:
    """The decision, the metadata and the typed reason from a view_submission's `view`; ValueError if any
    is missing. On a blank reason, answer with `ack(response_action="errors", errors=reason_errors(...))`."""
    decision = DECISION_OF_CALLBACK.get(str(view.get("callback_id")))
    if decision is None:
        raise ValueError(f"not a reason modal: callback_id {view.get('callback_id')!r}")
    meta = RejectModalMetadata.from_json(str(view.get("private_metadata", "")))
    values = (view.get("state") or {}).get("values") or {}
    typed = ((values.get(REJECT_REASON_BLOCK_ID) or {}).get(REJECT_REASON_ACTION_ID) or {}).get("value")
    reason = (typed or "").strip()
    if not reason:
        raise ValueError(f"a {decision} needs a reason")
    return decision, meta, reason


def read_reject_submission(view: Mapping[str, Any]) -> tuple[RejectModalMetadata, str]:
    """The reject-reason modal's metadata and reason (read_reason_submission, for a reject only)."""
    if view.get("callback_id") != REJECT_MODAL_CALLBACK_ID:
        raise ValueError(f"not the reject-reason modal: callback_id {view.get('callback_id')!r}")
    _, meta, reason = read_reason_submission(view)
    return meta, reason


def reason_errors(message: str) -> dict[str, str]:
    """The `errors` for `ack(response_action="errors", …)`: shown under the reason field."""
    return {REJECT_REASON_BLOCK_ID: message}
