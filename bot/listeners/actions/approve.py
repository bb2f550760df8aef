"""Approve: ack, then vote as the clicking user (the id in the signed payload, nothing else)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.decide import Click, approve
from bot.runtime import runtime_of
from engine.logcontext import bind_for_task


async def approve_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime = runtime_of(context)
    click = Click.from_payload(body, action)
    runtime.start(
        bind_for_task(approve(runtime, click), credit_note_id=click.credit_note_id),
        name=f"approve {click.credit_note_id} by {click.user_id}",
    )
