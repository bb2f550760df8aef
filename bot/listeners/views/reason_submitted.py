"""A reason modal submitted (a reject's, a request for changes' question, or a cancel's): a blank reason
stays in the modal as a field error; otherwise the modal closes and the decision is made as the submitting
user."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from approvals.models import Decision
from bot.cards import read_reason_submission, reason_errors
from bot.cards.models import RejectModalMetadata
from bot.cards.reject_modal import DECISION_OF_CALLBACK
from bot.flows.decide import decide_with_reason, slack_source, team_of
from bot.identity import sent_by_a_bot
from bot.runtime import runtime_of
from engine.logcontext import bind_for_task

NEEDS_REASON = {
    Decision.REJECT: "A reject needs a reason: say what is wrong with this credit note.",
    Decision.CANCEL: "A cancel needs a reason: say why this credit note should never be issued.",
    Decision.REQUEST_CHANGES: "Say what you want the requester to check or tell you.",
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
        asked_for = DECISION_OF_CALLBACK.get(str(view.get("callback_id")), Decision.REJECT)
        await ack(response_action="errors", errors=reason_errors(NEEDS_REASON[asked_for]))
        return
    await ack()
    runtime, user_id = runtime_of(context), str(body["user"]["id"])
    source, from_a_bot = slack_source(team_of(body)), sent_by_a_bot(body, None, None)
    runtime.start(
        bind_for_task(
            decide_with_reason(runtime, meta, user_id, decision, reason, source, from_a_bot=from_a_bot),
            credit_note_id=meta.credit_note_id,
        ),
        name=f"{decision} {meta.credit_note_id} by {user_id}",
    )
