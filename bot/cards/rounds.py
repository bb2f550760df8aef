"""Request changes in the thread: the approver's question to the requester (with a Resubmit button), and
the modal the requester answers in. A mention of the bot in the thread answers too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.cards.blocks import actions, button, context, escape, plain, quote, section, user
from bot.cards.ids import ANSWER_ACTION_ID, ANSWER_BLOCK_ID, RESUBMIT_ACTION_ID, RESUBMIT_MODAL_CALLBACK_ID
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, CardLimitError, check_blocks, view_problems
from bot.cards.models import Message, RoundView

MAX_QUESTION = 500
ANSWER_MAX_CHARS = 2000


def changes_requested_message(case_id: str, requester: str, sent_back: RoundView, max_rounds: int) -> Message:
    """In the case's thread: the approver's question, addressed to the requester."""
    to = user(requester) if requester[:1] in ("U", "W") else "Requester"
    blocks = [
        section(
            "changes_requested",
            f":leftwards_arrow_with_hook: {user(sent_back.asked_by)} sent "
            f"`{escape(sent_back.credit_note_id)}` back before deciding:\n"
            + quote(sent_back.question, MAX_QUESTION),
        ),
        section(
            "changes_requested_ask",
            f"{to}, answer by mentioning me in this thread, or press *Resubmit*. Case `{escape(case_id)}` "
            f"then investigates again with your answer (round {sent_back.round + 1} of {max_rounds}).",
        ),
        actions(
            "changes_requested_actions", button("Resubmit", RESUBMIT_ACTION_ID, case_id, style="primary")
        ),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(
        text=f"Changes requested on {sent_back.credit_note_id}: {sent_back.question}", blocks=blocks
    )


def answer_modal(case_id: str, sent_back: RoundView) -> dict[str, Any]:
    """The Resubmit button's modal: the question again, and a required answer."""
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": RESUBMIT_MODAL_CALLBACK_ID,
        "private_metadata": case_id,
        "title": plain("Answer and resubmit"),
        "submit": plain("Resubmit"),
        "close": plain("Back"),
        "blocks": [
            section(
                "answer_question", f"{user(sent_back.asked_by)} asked:\n{quote(sent_back.question, 1500)}"
            ),
            {
                "type": "input",
                "block_id": ANSWER_BLOCK_ID,
                "label": plain("Your answer"),
                "element": {
                    "type": "plain_text_input",
                    "action_id": ANSWER_ACTION_ID,
                    "multiline": True,
                    "max_length": ANSWER_MAX_CHARS,
                },
            },
            context("answer_then", f"Case `{escape(case_id)}` then investigates again with your answer."),
        ],
    }
    problems = view_problems(view)
    if problems:
        raise CardLimitError("; ".join(problems))
    return view


def read_answer_submission(view: Mapping[str, Any]) -> tuple[str, str]:
    """(case id, answer) from the answer modal's submission; a blank answer comes back blank."""
    values = (view.get("state") or {}).get("values") or {}
    typed = ((values.get(ANSWER_BLOCK_ID) or {}).get(ANSWER_ACTION_ID) or {}).get("value")
    return str(view.get("private_metadata") or ""), (typed or "").strip()[:ANSWER_MAX_CHARS]


def answer_errors(message: str) -> dict[str, str]:
    """The `errors` for `ack(response_action="errors", …)`: shown under the answer field."""
    return {ANSWER_BLOCK_ID: message}
