"""The small modal the "Investigate billing" message shortcut opens: confirm the customer (pre-filled when
the message names one) and the customer's words (pre-filled with the message). Its private_metadata says
which thread the case goes into."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.cards.blocks import plain, section
from bot.cards.limits import CardLimitError, truncate, view_problems

INVESTIGATE_MODAL_CALLBACK_ID = "investigate_billing_confirm"
CUSTOMER_BLOCK_ID = "investigate_customer"
CUSTOMER_ACTION_ID = "customer_id"
WORDS_BLOCK_ID = "investigate_words"
WORDS_ACTION_ID = "words"
MAX_WORDS = 3000  # a plain_text_input holds at most 3000 characters


@dataclass(frozen=True)
class InvestigateMetadata:
    channel: str
    message_ts: str  # the message the shortcut was run on
    thread_ts: str  # where the case goes: that message's thread

    def to_json(self) -> str:
        return json.dumps(
            {"channel": self.channel, "message_ts": self.message_ts, "thread_ts": self.thread_ts},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> InvestigateMetadata:
        try:
            data = json.loads(text)
            return cls(str(data["channel"]), str(data["message_ts"]), str(data["thread_ts"]))
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"the modal's private_metadata is not ours: {error}") from None


def investigate_modal(meta: InvestigateMetadata, *, customer_id: str | None, words: str) -> dict[str, Any]:
    customer_input: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": CUSTOMER_ACTION_ID,
        "max_length": 20,
        "placeholder": plain("C-0007"),
    }
    if customer_id:
        customer_input["initial_value"] = customer_id
    words_input: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": WORDS_ACTION_ID,
        "multiline": True,
        "max_length": MAX_WORDS,
    }
    if words.strip():
        words_input["initial_value"] = truncate(words.strip(), MAX_WORDS)
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": INVESTIGATE_MODAL_CALLBACK_ID,
        "private_metadata": meta.to_json(),
        "title": plain("Investigate billing"),
        "submit": plain("Investigate"),
        "close": plain("Cancel"),
        "blocks": [
            section(
                "investigate_intro",
                "BillSleuth will audit this customer's ledger and answer in the message's thread.",
            ),
            {
                "type": "input",
                "block_id": CUSTOMER_BLOCK_ID,
                "label": plain("Customer id"),
                "element": customer_input,
            },
            {
                "type": "input",
                "block_id": WORDS_BLOCK_ID,
                "label": plain("The customer's words"),
                "element": words_input,
            },
        ],
    }
    problems = view_problems(view)
    if problems:
        raise CardLimitError("; ".join(problems))
    return view


def read_investigate_submission(view: Mapping[str, Any]) -> tuple[InvestigateMetadata, str, str]:
    """(metadata, the typed customer id, the typed words) — both stripped, possibly empty."""
    if view.get("callback_id") != INVESTIGATE_MODAL_CALLBACK_ID:
        raise ValueError(f"not the investigate modal: callback_id {view.get('callback_id')!r}")
    meta = InvestigateMetadata.from_json(str(view.get("private_metadata", "")))
    values = (view.get("state") or {}).get("values") or {}

    def typed(block: str, action: str) -> str:
        return str(((values.get(block) or {}).get(action) or {}).get("value") or "").strip()

    return meta, typed(CUSTOMER_BLOCK_ID, CUSTOMER_ACTION_ID), typed(WORDS_BLOCK_ID, WORDS_ACTION_ID)
