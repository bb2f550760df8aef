"""Investigate billing (a message shortcut): open the confirm modal in the ack path (the trigger_id lives
three seconds), pre-filled with the customer id the message names, if any, and the message's words."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from approvals.models import Rule
from bot.access import NOT_ALLOWED_TO_OPEN
from bot.cards import InvestigateMetadata, investigate_modal
from bot.decisions import refusal, tell
from bot.grammar import parse_mention
from bot.runtime import runtime_of


async def investigate_billing(
    ack: Any, shortcut: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    await ack()
    message = shortcut.get("message") or {}
    ts = str(message.get("ts") or shortcut.get("message_ts") or "")
    channel = str((shortcut.get("channel") or {}).get("id") or "")
    user_id = str((shortcut.get("user") or {}).get("id") or "")
    runtime = runtime_of(context)
    if not runtime.may_open_cases(user_id):  # no modal: the case could not be opened from it
        thread_ts = str(message.get("thread_ts") or ts) or None
        said = refusal(Rule.NOT_ALLOWED_TO_OPEN, NOT_ALLOWED_TO_OPEN)
        runtime.start(
            tell(runtime, user_id, said, channel=channel, thread_ts=thread_ts), name="refuse shortcut"
        )
        return
    meta = InvestigateMetadata(
        channel=channel,
        message_ts=ts,
        thread_ts=str(message.get("thread_ts") or ts),
    )
    found = parse_mention(str(message.get("text") or ""), context.bot_user_id)
    view = investigate_modal(meta, customer_id=found.customer_id, words=found.words)
    await client.views_open(trigger_id=shortcut["trigger_id"], view=view)
