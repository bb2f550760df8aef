"""`/billsleuth help | list | show CN-0001 | case C-0007 text… | approve CN-0001 [note] | reject CN-0001
reason…` — the same grammar as the CLI; the identity is the Slack user who typed it. Bad input and help
are answered in the ack itself (ephemeral); everything else after it."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.access import delivery_key
from bot.flows.decide import slack_source
from bot.flows.slash import run_command
from bot.grammar import HELP_TEXT, Help, OperationError, parse_command
from bot.runtime import runtime_of


async def billsleuth_command(
    ack: Any, command: dict[str, Any], respond: Any, context: AsyncBoltContext, request: AsyncBoltRequest
) -> None:
    user_id = str(command["user_id"])
    try:
        parsed = parse_command(str(command.get("text") or ""), user_id)
    except OperationError as error:
        await ack(text=f":warning: {error}", response_type="ephemeral")
        return
    if isinstance(parsed, Help):
        await ack(text=HELP_TEXT, response_type="ephemeral")
        return
    await ack()
    runtime = runtime_of(context)
    channel = str(command.get("channel_id") or "")
    runtime.start(
        run_command(
            runtime,
            parsed,
            user_id=user_id,
            channel=channel,
            respond=respond,
            source=slack_source(command.get("team_id")),
            delivery_key=delivery_key("slash", request.raw_body),
        ),
        name=f"/billsleuth {type(parsed).__name__} by {user_id}",
    )
