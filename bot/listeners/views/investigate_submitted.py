"""The investigate-billing modal submitted: what is wrong with it stays in the modal as field errors
(answered in the ack); otherwise the case starts in the thread of the message the shortcut was run on."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.access import delivery_key
from bot.flows.investigate import investigate_once, read_submission
from bot.runtime import runtime_of


async def investigate_submitted(
    ack: Any,
    body: dict[str, Any],
    view: dict[str, Any],
    context: AsyncBoltContext,
    request: AsyncBoltRequest,
) -> None:
    runtime = runtime_of(context)
    case, errors = await read_submission(runtime, str(body["user"]["id"]), view)
    if case is None:
        await ack(response_action="errors", errors=errors)
        return
    await ack()
    key = delivery_key("view", request.raw_body)
    runtime.start(
        investigate_once(runtime, case, key), name=f"investigate {case.customer_id} from a shortcut"
    )
