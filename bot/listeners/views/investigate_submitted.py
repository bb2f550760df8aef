"""The investigate-billing modal submitted: a bad or unknown customer id, or no words, stays in the modal
as a field error; otherwise the case starts in the thread of the message the shortcut was run on."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.cards import read_investigate_submission
from bot.cards.investigate_modal import CUSTOMER_BLOCK_ID, WORDS_BLOCK_ID
from bot.investigations import CaseRequest, investigate
from bot.operations import OperationError, check_customer_id
from bot.presenters import customer_exists
from bot.runtime import runtime_of


async def investigate_submitted(
    ack: Any, body: dict[str, Any], view: dict[str, Any], context: AsyncBoltContext
) -> None:
    runtime = runtime_of(context)
    try:
        meta, typed_id, words = read_investigate_submission(view)
    except ValueError:
        await ack(response_action="errors", errors={CUSTOMER_BLOCK_ID: "This form is out of date."})
        return
    errors: dict[str, str] = {}
    customer_id = ""
    try:
        customer_id = check_customer_id(typed_id) if typed_id else ""
        if not customer_id:
            errors[CUSTOMER_BLOCK_ID] = "Which customer? Give their id, like C-0007."
        elif not await customer_exists(runtime.engine, customer_id):
            errors[CUSTOMER_BLOCK_ID] = f"There is no customer {customer_id} in the ledger."
    except OperationError as error:
        errors[CUSTOMER_BLOCK_ID] = str(error)
    if not words:
        errors[WORDS_BLOCK_ID] = "Say what the customer wrote."
    if errors:
        await ack(response_action="errors", errors=errors)
        return
    await ack()
    request = CaseRequest(customer_id, words, str(body["user"]["id"]), meta.channel, meta.thread_ts)
    runtime.start(investigate(runtime, request), name=f"investigate {customer_id} from a shortcut")
