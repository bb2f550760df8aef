"""Short messages: refusals and "nothing changed" notes (ephemeral, to the clicking user only), the
customer reply posted in the case thread once a credit note is settled (issued, rejected, expired or
cancelled), and direct messages (finance told of the model budget, a requester told a case was opened in
their name from the CLI)."""

from __future__ import annotations

from typing import Literal

from bot.cards.blocks import context, escape, quote, quoted_code, section
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks, truncate
from bot.cards.models import Message, Refusal

MAX_REPLY = 2800
MAX_QUOTED_WORDS = 1000  # the complaint as the requester's DM quotes it


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


def _one_section(block: str, text: str) -> Message:
    # The text is ours plus ids; escape it anyway so nothing in a reason can turn into a mention.
    safe = escape(text)
    return Message(text=safe, blocks=[section(block, safe)])


def model_budget_message(month: str, threshold: int, limit: str, spent: str) -> Message:
    """To finance (the finance channel, or each approver by DM): the month's model spend crossed 80% of
    its budget, or reached it and the model investigator is paused. `limit` and `spent` as shown."""
    if threshold >= 100:
        head = (
            f":octagonal_sign: *The model budget for {month} is spent*: {spent} of {limit}. The model "
            "investigator is paused; new cases are investigated by the offline auditor."
        )
        hint = "An approver can resume it: `billsleuth budget raise AMOUNT --as <your Slack id>`"
    else:
        head = (
            f":warning: *The model budget for {month} is {threshold}% used*: {spent} of {limit}. At 100% "
            "the model investigator pauses and the offline auditor takes new cases."
        )
        hint = "`billsleuth budget show` and `billsleuth costs --by case` say where it went"
    blocks = [section("model_budget", head), context("model_budget_hint", hint)]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    kind = "spent" if threshold >= 100 else f"{threshold}% used"
    return Message(text=f"Model budget for {month}: {kind} ({spent} of {limit})", blocks=blocks)


def opened_in_your_name_message(
    case_id: str, customer_id: str | None, os_account: str, words: str
) -> Message:
    """To the requester named by `case open --as`, by DM: someone at a shell opened a case in their name.
    They decide nothing on it; if they did not ask for it, they are the first to know."""
    head = (
        f":information_source: A case was opened in your name from the CLI by {escape(os_account)}: "
        f"`{escape(case_id)}`, customer {escape(customer_id or 'not named yet')}."
    )
    blocks = [
        section("opened_in_your_name", head + "\n" + quote(words, MAX_QUOTED_WORDS)),
        context(
            "opened_in_your_name_hint",
            "As its requester you cannot approve, reject or cancel its credit note. "
            "If you did not ask for it, tell finance.",
        ),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(
        text=f"A case was opened in your name from the CLI by {escape(os_account)}: {case_id}", blocks=blocks
    )
