"""When a complaint's words could mean several customers: one button per candidate in the thread, and the
same message once someone picked one."""

from __future__ import annotations

from collections.abc import Sequence

from bot.cards.blocks import actions, button, context, escape, section, user
from bot.cards.ids import PICK_CUSTOMER_ACTION_ID
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks, truncate
from bot.cards.models import CandidateView, Message

MAX_BUTTON_NAME = 50  # a button's text is at most 75 characters; the id and country follow the name


def customer_choice_message(case_id: str, candidates: Sequence[CandidateView]) -> Message:
    """Up to five buttons, one per candidate (value `<case id> <customer id>`)."""
    buttons = [
        button(
            f"{truncate(c.name, MAX_BUTTON_NAME)} ({c.id}, {c.country})",
            PICK_CUSTOMER_ACTION_ID,
            f"{case_id} {c.id}",
        )
        for c in candidates[:5]
    ]
    blocks = [
        section("pick_customer", ":mag: Which customer is this? The message could mean any of these:"),
        actions("pick_customer_do", *buttons),
        context("pick_customer_or", "Or mention me again with their id: `C-0007 <their words>`."),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text="Which customer is this?", blocks=blocks)


def customer_chosen_message(candidate: CandidateView, by: str) -> Message:
    text = f":white_check_mark: {user(by)} picked {escape(candidate.name)} (`{candidate.id}`); investigating."
    blocks = [section("picked_customer", text)]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=f"Customer {candidate.id} picked", blocks=blocks)
