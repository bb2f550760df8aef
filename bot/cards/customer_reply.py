"""The reply to send the customer, posted in the case thread once its credit note is settled (issued,
rejected, expired or cancelled)."""

from __future__ import annotations

from typing import Literal

from bot.cards.blocks import context, escape, quoted_code, section
from bot.cards.explanation import MAX_REPLY
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import Message


def customer_reply_message(
    case_id: str,
    credit_note_id: str,
    outcome: Literal["issued", "rejected", "expired", "cancelled"],
    customer_reply: str,
) -> Message:
    """In the case thread after the decision: the reply to send the customer (the text `case show` gives)."""
    after = {
        "issued": "the credit note was issued",
        "rejected": "the credit note was rejected",
        "expired": "the credit note expired undecided",
        "cancelled": "the approved credit note was cancelled before it was issued",
    }[outcome]
    blocks = [
        section(
            "customer_reply",
            f"*Reply to the customer* for case `{escape(case_id)}` ({after}):\n"
            + quoted_code(customer_reply, MAX_REPLY),
        ),
        context("customer_reply_ref", f"Credit note `{escape(credit_note_id)}` · copy the reply as it is"),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=f"Case {case_id}: reply to the customer ({after})", blocks=blocks)
