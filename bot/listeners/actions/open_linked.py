"""`Open a case` under one of a case's other findings: ack, then open the linked case in the thread."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.linked import open_linked_case
from bot.runtime import runtime_of


async def open_linked_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    channel = str((body.get("container") or {}).get("channel_id") or "")
    runtime.start(
        open_linked_case(runtime, user_id, str(action.get("value") or ""), channel),
        name=f"open a linked case by {user_id}",
    )
