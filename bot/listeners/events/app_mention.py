"""`@BillSleuth C-0007 <the customer's words>`: Bolt acks the event before this runs; the case is
investigated as background work. Messages from bots (this one included) never start a case."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.investigations import handle_mention
from bot.runtime import runtime_of


async def app_mention(event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext) -> None:
    if event.get("bot_id") or event.get("subtype") or not event.get("user"):
        return
    if context.bot_user_id and event.get("user") == context.bot_user_id:
        return
    runtime = runtime_of(context)
    event_id = str(body.get("event_id") or f"{event.get('channel')}:{event.get('ts')}")
    runtime.start(handle_mention(runtime, event, event_id, context.bot_user_id), name=f"mention {event_id}")
