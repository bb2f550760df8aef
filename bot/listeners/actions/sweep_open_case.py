"""A finding's `Open case` on the findings digest: ack, then open the case in the digest's thread."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.flows.digest import open_case_from_finding
from bot.runtime import runtime_of


async def sweep_open_case_clicked(
    ack: Any, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
) -> None:
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    container = body.get("container") or {}
    channel, digest_ts = str(container.get("channel_id") or ""), str(container.get("message_ts") or "")
    thread_ts = str(container.get("thread_ts") or digest_ts)
    value = str(action.get("value") or "")
    runtime.start(
        open_case_from_finding(runtime, user_id, value, channel, digest_ts, thread_ts),
        name=f"open a case from a finding by {user_id}",
    )
