"""Reject: ack, then open the reason modal in the listener itself (the click's trigger_id lives three
seconds); the decision is made when the modal is submitted (bot/listeners/views/reason_submitted.py)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from approvals.models import Decision
from bot.flows.decide import Click, ask_for_reason
from bot.runtime import runtime_of


async def reject_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    await ask_for_reason(runtime_of(context), Decision.REJECT, Click.from_payload(body, action))
