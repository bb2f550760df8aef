"""What a click or command that did nothing says, to the person who tried only (chat.postEphemeral): a
refusal and the rule that refused, a note already decided, a card out of date."""

from __future__ import annotations

from bot.cards.blocks import escape, section
from bot.cards.limits import truncate
from bot.cards.models import Message, Refusal


def refusal_message(refusal: Refusal) -> Message:
    """For chat.postEphemeral: what was refused and the rule that refused it."""
    text = f":no_entry: Not done: {truncate(refusal.reason, 500)} (rule: {truncate(refusal.rule, 100)})"
    return _one_section("refusal", text)


def already_decided_message(credit_note_id: str, status: str) -> Message:
    """A click on a note that is already decided: nothing changes, and the clicker is told so."""
    return _one_section(
        "already_decided", f":information_source: {credit_note_id} is already {status}; nothing changed."
    )


def stale_card_message(credit_note_id: str) -> Message:
    """A click on an older revision of a card: Slack may still show it; the current card is in the thread."""
    return _one_section(
        "stale_card",
        f":information_source: That card for {credit_note_id} was out of date, so the click did nothing. "
        f"The card now shows the current state; `/billsleuth show {credit_note_id}` has everything.",
    )


def _one_section(block: str, text: str) -> Message:
    # The text is ours plus ids; escape it anyway so nothing in a reason can turn into a mention.
    safe = escape(text)
    return Message(text=safe, blocks=[section(block, safe)])
