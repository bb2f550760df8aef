"""The reject-reason modal submitted: a blank reason stays in the modal as a field error; otherwise the
modal closes and the reject is decided as the submitting user."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.cards import read_reject_submission, reason_errors
from bot.cards.models import RejectModalMetadata
from bot.decisions import decide, tell
from bot.identity import sent_by_a_bot
from bot.runtime import BotRuntime, runtime_of

NEEDS_REASON = "A reject needs a reason: say what is wrong with this credit note."
OUT_OF_DATE = "This form is out of date; close it and click Reject on the card again."


async def reject_reason_submitted(
    ack: Any, body: dict[str, Any], view: dict[str, Any], context: AsyncBoltContext
) -> None:
    try:
        RejectModalMetadata.from_json(str(view.get("private_metadata", "")))
    except ValueError:
        await ack(response_action="errors", errors=reason_errors(OUT_OF_DATE))
        return
    try:
        meta, reason = read_reject_submission(view)
    except ValueError:
        await ack(response_action="errors", errors=reason_errors(NEEDS_REASON))
        return
    await ack()
    runtime = runtime_of(context)
    user_id = str(body["user"]["id"])
    from_a_bot = sent_by_a_bot(body, None, None)
    runtime.start(
        reject(runtime, meta, user_id, reason, from_a_bot=from_a_bot),
        name=f"reject {meta.credit_note_id} by {user_id}",
    )


async def reject(
    runtime: BotRuntime, meta: RejectModalMetadata, user_id: str, reason: str, *, from_a_bot: bool = False
) -> None:
    # The reason was typed against the card as it was when Reject was clicked: if the card moved on
    # meanwhile (another vote), say so instead of deciding on what the person did not see.
    report = await decide(
        runtime,
        meta.credit_note_id,
        user_id=user_id,
        decision="reject",
        comment=reason,
        seen_revision=meta.revision,
        from_a_bot=from_a_bot,
    )
    if report.notice is not None:
        await tell(
            runtime, user_id, report.notice, channel=meta.channel or None, credit_note_id=meta.credit_note_id
        )
