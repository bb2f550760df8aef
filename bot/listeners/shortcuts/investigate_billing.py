"""Investigate billing (a message shortcut): ack, then offer the confirm modal for the message it was run
on (in the listener itself: the trigger_id lives three seconds)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.cards import InvestigateMetadata
from bot.flows.investigate import offer_investigation
from bot.runtime import runtime_of


async def investigate_billing(ack: Any, shortcut: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    message = shortcut.get("message") or {}
    ts = str(message.get("ts") or shortcut.get("message_ts") or "")
    meta = InvestigateMetadata(
        channel=str((shortcut.get("channel") or {}).get("id") or ""),
        message_ts=ts,
        thread_ts=str(message.get("thread_ts") or ts),
    )
    user_id = str((shortcut.get("user") or {}).get("id") or "")
    await offer_investigation(
        runtime_of(context),
        user_id,
        message,
        meta,
        trigger_id=str(shortcut["trigger_id"]),
        bot_user_id=context.bot_user_id,
    )
