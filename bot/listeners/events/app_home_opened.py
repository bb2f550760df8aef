"""The Home tab, drawn each time it is opened."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.home import publish_home
from bot.runtime import runtime_of


async def app_home_opened(event: dict[str, Any], context: AsyncBoltContext) -> None:
    if event.get("tab", "home") != "home" or not event.get("user"):
        return
    runtime = runtime_of(context)
    user_id = str(event["user"])
    runtime.start(publish_home(runtime, user_id), name=f"home {user_id}")
