"""A candidate's button under "Which customer is this?": ack, then run the case for that customer."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.investigate import pick_customer
from bot.runtime import runtime_of


async def customer_picked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    container = body.get("container") or {}
    channel, ts = str(container.get("channel_id") or ""), str(container.get("message_ts") or "")
    runtime.start(
        pick_customer(runtime, user_id, str(action.get("value") or ""), channel, ts),
        name=f"pick a customer by {user_id}",
    )
