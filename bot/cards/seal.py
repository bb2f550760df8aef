"""The activity log's seal, as posted to finance: the chain's head (`ROW:HASH`) and how an auditor checks
that history was not rewritten since. Slack keeps the message, out of reach of whoever holds the database."""

from __future__ import annotations

from bot.cards.blocks import context, section
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import Message

WHY = {  # approvals.seals' reasons, as finance reads them
    "daily": "the daily seal",
    "policy change": "after a change of the approval policy",
    "by hand": "taken by hand (`billsleuth activity seal`)",
}


def seal_message(row: int, hash_: str, why: str) -> Message:
    """The seal `row:hash_` and the command that checks it; `why` is approvals.seals' DAILY, POLICY_CHANGE or
    BY_HAND."""
    seal = f"{row}:{hash_}"
    blocks = [
        section(
            "activity_seal",
            f":lock: *Activity log seal* ({WHY.get(why, why)}): the history up to row {row} is\n`{seal}`",
        ),
        context(
            "activity_seal_check",
            f"Keep this message. To check that no one rewrote the history since: "
            f"`billsleuth activity verify --anchor {seal}`",
        ),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=f"Activity log seal: {seal}", blocks=blocks)
