"""Cancel (an approved note that was never issued): ack, then ask for the reason in the same modal a
reject uses."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners.actions.reject import ask_for_reason


async def cancel_clicked(
    ack: Any,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    await ack()
    await ask_for_reason("cancel", body, action, client, context)
