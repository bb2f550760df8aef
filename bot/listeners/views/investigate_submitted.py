"""The investigate-billing modal submitted: a bad or unknown customer id, or no words, stays in the modal
as a field error; otherwise the case starts in the thread of the message the shortcut was run on."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.access import NOT_ALLOWED_TO_OPEN, delivery_key
from bot.cards import read_investigate_submission
from bot.cards.investigate_modal import CUSTOMER_BLOCK_ID, WORDS_BLOCK_ID
from bot.investigations import CaseRequest, investigate
from bot.operations import OperationError, check_customer_id
from bot.presenters import customer_exists
from bot.runtime import BotRuntime, runtime_of


async def investigate_submitted(
    ack: Any,
    body: dict[str, Any],
    view: dict[str, Any],
    context: AsyncBoltContext,
    request: AsyncBoltRequest,
) -> None:
    runtime = runtime_of(context)
    if not runtime.may_open_cases(str(body["user"]["id"])):
        await ack(response_action="errors", errors={CUSTOMER_BLOCK_ID: NOT_ALLOWED_TO_OPEN})
        return
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
    case = CaseRequest(customer_id, words, str(body["user"]["id"]), meta.channel, meta.thread_ts)
    key = delivery_key("view", request.raw_body)
    runtime.start(investigate_once(runtime, case, key), name=f"investigate {customer_id} from a shortcut")


async def investigate_once(runtime: BotRuntime, case: CaseRequest, key: str) -> None:
    """A replay of the same signed submission is claimed already: it opens no second case."""
    if await runtime.claim(key):
        await investigate(runtime, case)
