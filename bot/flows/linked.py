"""`Open a case` under one of a case's other findings: a linked case for that invoice — same customer,
same requester, same thread, `linked_from` the case — run exactly as a mention's case. Once per finding,
whoever clicks and however often; the original card then shows the linked case instead of the button."""

from __future__ import annotations

import logging
from typing import Any

from agent.cases.intake import parse_complaint
from agent.cases.record import CaseNotFound
from agent.graph.prompts import linked_case_question
from approvals.models import Rule
from bot import store
from bot.flows.investigate import investigate, tell_not_allowed_to_open
from bot.flows.one_person import refusal, tell
from bot.flows.show import show_case_result
from bot.runtime import BotRuntime
from bot.store import CaseRequest, ClaimOutcome

log = logging.getLogger(__name__)


async def open_linked_case(
    runtime: BotRuntime, user_id: str, value: str, channel: str
) -> dict[str, Any] | None:
    """The button's value is `<case id> <invoice id>`. Anyone who may open cases may click; the linked
    case's requester is the original case's (who answers for the account), not the clicker. Returns the
    linked case's JSON when this click ran it."""
    case_id, _, invoice_id = value.partition(" ")
    if not runtime.may_open_cases(user_id):
        await tell_not_allowed_to_open(runtime, user_id, channel, None)
        return None
    service = runtime.service
    try:
        case, row = await service.show_case(case_id), await service.case_row(case_id)
    except CaseNotFound:
        await tell(
            runtime, user_id, refusal(Rule.UNKNOWN_CASE, f"there is no case {case_id}"), channel=channel
        )
        return None
    # Only a finding the case itself verified: the button's value names it, the case vouches for it.
    other = next((o for o in case["other_findings"] if o["invoice_id"] == invoice_id), None)
    if other is None or not row.customer_id or not row.channel:
        why = f"{invoice_id or 'that invoice'} is not one of case {case_id}'s other overcharges"
        await tell(runtime, user_id, refusal(Rule.NOT_AN_OTHER_FINDING, why), channel=channel)
        return None
    language = parse_complaint(row.question).language
    question = linked_case_question(language, case_id, invoice_id, other["overcharge"], other["root_cause"])
    # The original case's requester asks; the clicker opened it, and so may not decide its note.
    thread = row.thread_ts or row.message_ts
    request = CaseRequest(row.customer_id, question, row.requester, row.channel, thread, opened_from=user_id)
    claim = await store.claim_linked_case(service, case_id, invoice_id, request)
    await show_case_result(runtime, case)  # the original card: the linked case's id for the button
    if claim.outcome != ClaimOutcome.CLAIMED:
        why = f"{invoice_id} has its case already: {claim.case_id}"
        await tell(runtime, user_id, refusal(Rule.LINKED_CASE_OPENED_ALREADY, why), channel=channel)
        return None
    log.info("case %s opened from %s for %s by %s", claim.case_id, case_id, invoice_id, user_id)
    return await investigate(runtime, request, case_id=claim.case_id)
