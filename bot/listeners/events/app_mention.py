"""`@BillSleuth C-0007 <the customer's words>`: Bolt acks the event before this runs; the case is
investigated as background work. Messages from bots (this one included) never start a case.

A person's mention may come with a subtype: `thread_broadcast` (a thread reply "also sent to the channel")
or `file_share` (a file attached); those are read like plain mentions. An edit of the message arrives as
the app_mention again, with an `edited` field and the same `ts`: the flow opens no second case."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.investigate import on_mention
from bot.runtime import runtime_of

# Subtypes of messages a person typed; anything else (bot_message, message_changed, …) is not a request.
PERSON_SUBTYPES = frozenset({"thread_broadcast", "file_share"})


async def app_mention(event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext) -> None:
    if not _from_a_person(event, context.bot_user_id):
        return
    runtime = runtime_of(context)
    event_id = str(body.get("event_id") or f"{event.get('channel')}:{event.get('ts')}")
    runtime.start(on_mention(runtime, event, event_id, context.bot_user_id), name=f"mention {event_id}")


def _from_a_person(event: dict[str, Any], bot_user_id: str | None) -> bool:
    subtype = event.get("subtype")
    if event.get("bot_id") or (subtype is not None and subtype not in PERSON_SUBTYPES):
        return False
    return bool(event.get("user")) and event.get("user") != bot_user_id
