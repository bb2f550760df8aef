"""Resubmit (under an approver's question in the case's thread): ack, then open the answer modal at once;
the next round starts when it is submitted (listeners/views/answer_submitted.py)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.rounds import ask_for_answer
from bot.runtime import runtime_of


async def resubmit_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    await ask_for_answer(runtime, str(action.get("value") or ""), user_id, str(body.get("trigger_id") or ""))
