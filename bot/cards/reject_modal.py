"""The modal that asks for a reject's reason (a reject needs one). Opened with views.open in the ack path:
the click's trigger_id lives 3 seconds. Its private_metadata says which card to update afterwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.cards.blocks import amount, escape, plain, section
from bot.cards.ids import (
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
)
from bot.cards.limits import CardLimitError, view_problems
from bot.cards.models import CreditNoteView, RejectModalMetadata

REASON_MIN_CHARS = 3
REASON_MAX_CHARS = 500


def reject_reason_modal(meta: RejectModalMetadata, note: CreditNoteView, currency: str) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": REJECT_MODAL_CALLBACK_ID,
        "private_metadata": meta.to_json(),
        "title": plain("Reject credit note"),
        "submit": plain("Reject"),
        "close": plain("Cancel"),
        "blocks": [
            section(
                "reject_summary",
                f"Rejecting *{escape(note.id)}*: {amount(note.amount, currency)} on "
                f"`{escape(note.invoice_id)}`.\nThe customer then gets a reply with no amount and no "
                "promise of money back.",
            ),
            {
                "type": "input",
                "block_id": REJECT_REASON_BLOCK_ID,
                "label": plain("Reason"),
                "hint": plain("Recorded with your name on the credit note's approval log."),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REJECT_REASON_ACTION_ID,
                    "multiline": True,
                    "min_length": REASON_MIN_CHARS,
                    "max_length": REASON_MAX_CHARS,
                    "placeholder": plain("What is wrong with this credit note?"),
                },
            },
        ],
    }
    problems = view_problems(view)
    if problems:
        raise CardLimitError("; ".join(problems))
    return view


def read_reject_submission(view: Mapping[str, Any]) -> tuple[RejectModalMetadata, str]:
    """The metadata and the typed reason from a view_submission's `view`; ValueError if either is missing.

    On a blank reason, answer with `ack(response_action="errors", errors=reason_errors(...))`."""
    if view.get("callback_id") != REJECT_MODAL_CALLBACK_ID:
        raise ValueError(f"not the reject-reason modal: callback_id {view.get('callback_id')!r}")
    meta = RejectModalMetadata.from_json(str(view.get("private_metadata", "")))
    values = (view.get("state") or {}).get("values") or {}
    typed = ((values.get(REJECT_REASON_BLOCK_ID) or {}).get(REJECT_REASON_ACTION_ID) or {}).get("value")
    reason = (typed or "").strip()
    if not reason:
        raise ValueError("a reject needs a reason")
    return meta, reason


def reason_errors(message: str) -> dict[str, str]:
    """The `errors` for `ack(response_action="errors", …)`: shown under the reason field."""
    return {REJECT_REASON_BLOCK_ID: message}
