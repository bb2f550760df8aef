"""A reason modal submitted (a reject's, or a cancel's): a blank reason stays in the modal as a field
error; otherwise the modal closes and the decision is made as the submitting user."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.cards import read_reason_submission, reason_errors
from bot.cards.models import RejectModalMetadata
from bot.cards.reject_modal import DECISION_OF_CALLBACK
from bot.decisions import decide, slack_source, team_of, tell
from bot.identity import sent_by_a_bot
from bot.runtime import BotRuntime, runtime_of

NEEDS_REASON = {
    "reject": "A reject needs a reason: say what is wrong with this credit note.",
    "cancel": "A cancel needs a reason: say why this credit note should never be issued.",
}
OUT_OF_DATE = "This form is out of date; close it and click the button on the card again."


async def reason_submitted(
    ack: Any, body: dict[str, Any], view: dict[str, Any], context: AsyncBoltContext
) -> None:
    try:
        RejectModalMetadata.from_json(str(view.get("private_metadata", "")))
    except ValueError:
        await ack(response_action="errors", errors=reason_errors(OUT_OF_DATE))
        return
    try:
        decision, meta, reason = read_reason_submission(view)
    except ValueError:
        asked_for = DECISION_OF_CALLBACK.get(str(view.get("callback_id")), "reject")
        await ack(response_action="errors", errors=reason_errors(NEEDS_REASON[asked_for]))
        return
    await ack()
    runtime = runtime_of(context)
    user_id = str(body["user"]["id"])
    source = slack_source(team_of(body))
    from_a_bot = sent_by_a_bot(body, None, None)
    runtime.start(
        decide_with_reason(runtime, meta, user_id, decision, reason, source, from_a_bot=from_a_bot),
        name=f"{decision} {meta.credit_note_id} by {user_id}",
    )


async def decide_with_reason(
    runtime: BotRuntime,
    meta: RejectModalMetadata,
    user_id: str,
    decision: str,
    reason: str,
    source: str | None = None,
    *,
    from_a_bot: bool = False,
) -> None:
    # The reason was typed against the card as it was when the button was clicked: if the card moved on
    # meanwhile (another vote), say so instead of deciding on what the person did not see.
    report = await decide(
        runtime,
        meta.credit_note_id,
        user_id=user_id,
        decision=decision,
        comment=reason,
        seen_revision=meta.revision,
        source=source,
        from_a_bot=from_a_bot,
    )
    if report.notice is not None:
        await tell(
            runtime, user_id, report.notice, channel=meta.channel or None, credit_note_id=meta.credit_note_id
        )
