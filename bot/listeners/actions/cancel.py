"""Cancel (an approved note that was never issued): ack, then ask for the reason in the same modal a
reject uses."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from approvals.models import Decision
from bot.flows.decide import Click, ask_for_reason
from bot.runtime import runtime_of


async def cancel_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    await ask_for_reason(runtime_of(context), Decision.CANCEL, Click.from_payload(body, action))
