"""Approve: ack, then vote as the clicking user (the id in the signed payload, nothing else)."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.decisions import Click, decide, tell
from bot.home import publish_home
from bot.runtime import BotRuntime, runtime_of


async def approve_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime = runtime_of(context)
    click = Click.from_payload(body, action)
    runtime.start(approve(runtime, click), name=f"approve {click.credit_note_id} by {click.user_id}")


async def approve(runtime: BotRuntime, click: Click) -> None:
    report = await decide(
        runtime,
        click.credit_note_id,
        user_id=click.user_id,
        decision="approve",
        seen_revision=click.revision,
        source=click.source,
        from_a_bot=click.from_a_bot,
    )
    if report.notice is not None:
        await tell(
            runtime,
            click.user_id,
            report.notice,
            channel=click.channel,
            thread_ts=click.thread_ts,
            credit_note_id=click.credit_note_id,
        )
    if click.in_home:
        await publish_home(runtime, click.user_id)
