"""Investigate billing (a message shortcut): open the confirm modal in the ack path (the trigger_id lives
three seconds), pre-filled with the customer id the message names, if any, and the message's words."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.cards import InvestigateMetadata, investigate_modal
from bot.grammar import parse_mention


async def investigate_billing(
    ack: Any, shortcut: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    await ack()
    message = shortcut.get("message") or {}
    ts = str(message.get("ts") or shortcut.get("message_ts") or "")
    meta = InvestigateMetadata(
        channel=str((shortcut.get("channel") or {}).get("id") or ""),
        message_ts=ts,
        thread_ts=str(message.get("thread_ts") or ts),
    )
    found = parse_mention(str(message.get("text") or ""), context.bot_user_id)
    view = investigate_modal(meta, customer_id=found.customer_id, words=found.words)
    await client.views_open(trigger_id=shortcut["trigger_id"], view=view)
