"""The answer modal submitted: a blank answer stays in the modal as a field error; otherwise the modal
closes and the case's next round starts as background work."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.cards.rounds import answer_errors, read_answer_submission
from bot.flows.rounds import next_round
from bot.runtime import runtime_of

NEEDS_ANSWER = "Say what the approver asked for: your answer starts the next round."


async def answer_submitted(
    ack: Any, body: dict[str, Any], view: dict[str, Any], context: AsyncBoltContext
) -> None:
    case_id, answer = read_answer_submission(view)
    if not answer:
        await ack(response_action="errors", errors=answer_errors(NEEDS_ANSWER))
        return
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    row = await runtime.service.case_row(case_id)
    runtime.start(
        next_round(runtime, case_id, answer, user_id, channel=row.channel, thread_ts=row.thread_ts),
        name=f"answer {case_id} by {user_id}",
    )
