"""Request changes: ack, then open the question modal in the listener itself (the click's trigger_id lives
three seconds); the note is sent back when the modal is submitted (listeners/views/reason_submitted.py)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from approvals.models import Decision
from bot.flows.decide import Click, ask_for_reason
from bot.runtime import runtime_of


async def request_changes_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    await ask_for_reason(runtime_of(context), Decision.REQUEST_CHANGES, Click.from_payload(body, action))
