"""Direct messages to someone outside a case thread: finance told the model budget crossed a threshold, a
requester told a case was opened in their name from the CLI."""

from __future__ import annotations

from bot.cards.blocks import context, escape, quote, section
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import Message

MAX_QUOTED_WORDS = 1000  # the complaint as the requester's DM quotes it


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
