"""Block Kit cards, apart from the listeners. Builders take the view models in `bot.cards.models` and return
plain dicts (a `Message` for chat.postMessage / chat.update, a view dict for views.open / views.publish),
already checked against Slack's limits."""

from bot.cards.credit_note import approvals_line, credit_note_card
from bot.cards.customer_reply import customer_reply_message
from bot.cards.explanation import explanation_message
from bot.cards.home import home_view
from bot.cards.ids import (
    APPROVE_ACTION_ID,
    CANCEL_ACTION_ID,
    CANCEL_MODAL_CALLBACK_ID,
    INVESTIGATE_SHORTCUT_CALLBACK_ID,
    REJECT_ACTION_ID,
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
    SLASH_COMMAND,
    BlockRef,
    block_id,
    parse_block_id,
)
from bot.cards.investigate_modal import (
    INVESTIGATE_MODAL_CALLBACK_ID,
    InvestigateMetadata,
    investigate_modal,
    read_investigate_submission,
)
from bot.cards.limits import CardLimitError, check_blocks
from bot.cards.progress import progress_message
from bot.cards.refusals import already_decided_message, refusal_message, stale_card_message
from bot.cards.reject_modal import (
    read_reason_submission,
    read_reject_submission,
    reason_errors,
    reason_modal,
    reject_reason_modal,
)

__all__ = [
    "APPROVE_ACTION_ID",
    "CANCEL_ACTION_ID",
    "CANCEL_MODAL_CALLBACK_ID",
    "INVESTIGATE_MODAL_CALLBACK_ID",
    "INVESTIGATE_SHORTCUT_CALLBACK_ID",
    "REJECT_ACTION_ID",
    "REJECT_MODAL_CALLBACK_ID",
    "REJECT_REASON_ACTION_ID",
    "REJECT_REASON_BLOCK_ID",
    "SLASH_COMMAND",
    "BlockRef",
    "CardLimitError",
    "InvestigateMetadata",
    "already_decided_message",
    "approvals_line",
    "block_id",
    "check_blocks",
    "credit_note_card",
    "customer_reply_message",
    "explanation_message",
    "home_view",
    "investigate_modal",
    "parse_block_id",
    "progress_message",
    "read_investigate_submission",
    "read_reason_submission",
    "read_reject_submission",
    "reason_errors",
    "reason_modal",
    "refusal_message",
    "reject_reason_modal",
    "stale_card_message",
]
