"""Approve / Reject on a pending policy change's card: ack, then decide as the clicking user (the id in the
signed payload, nothing else). The confirm dialog was shown by Slack before the click was sent."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.policy import PolicyClick, decide_policy_change
from bot.runtime import runtime_of


async def policy_approve_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    click = PolicyClick.from_payload(body, action)
    runtime_of(context).start(
        decide_policy_change(runtime_of(context), click, approve=True),
        name=f"approve policy change {click.change_id} by {click.user_id}",
    )


async def policy_reject_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    click = PolicyClick.from_payload(body, action)
    runtime_of(context).start(
        decide_policy_change(runtime_of(context), click, approve=False),
        name=f"reject policy change {click.change_id} by {click.user_id}",
    )
