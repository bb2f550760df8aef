"""Direct messages the bot sends unprompted to someone outside a case thread: the requester a CLI user named
with `case open --as` (an OS account opened a case in their name), and finance when the model budget
crosses a threshold (the finance channel when BILLSLEUTH_FINANCE_CHANNEL is set, else each approver).
Each goes out once whichever bot process gets there first; the outbox (bot/flows/outbox.py) calls in here.
"""

from __future__ import annotations

import logging

from agent.cases.record import CaseNotFound
from agent.model import budget
from agent.model.costs import usd_display
from approvals.config import is_slack_user_id
from approvals.models import CLI_SOURCE
from bot import store
from bot.cards.direct_messages import model_budget_message, opened_in_your_name_message
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)


async def tell_requester(runtime: BotRuntime, case_id: str) -> bool:
    """A case opened from the CLI names its requester with --as: tell that Slack user by DM, once, that
    an OS account opened a case in their name (they may not have asked). True when this call posted it."""
    try:
        row = await runtime.service.case_row(case_id)
    except CaseNotFound:  # a reseed erased it
        return False
    opened_from = row.opened_from or ""
    if not opened_from.startswith(CLI_SOURCE) or not is_slack_user_id(row.requester):
        return False
    message = opened_in_your_name_message(
        case_id, row.customer_id, opened_from[len(CLI_SOURCE) :], row.question
    )
    # A failed post gives the claim back, and the outbox keeps the change: the next round retries.
    async with store.claimed_while(runtime.engine, store.told_requester_key(case_id), case_id) as mine:
        if mine:
            await runtime.client.chat_postMessage(channel=row.requester, **message.as_kwargs())
    return mine


async def tell_finance_of_budget(runtime: BotRuntime) -> int:
    """Each model-budget threshold crossed (80%, 100%) — by this process or any other, a CLI command too —
    told to finance once: the finance channel, else each approver by DM. An incident is locked while it is
    told (another bot process skips it) and marked in the same transaction; a failed post leaves it for the
    next round. Returns how many incidents were told."""
    told = 0
    while True:
        async with runtime.engine.begin() as conn:  # one incident a transaction: a failure redoes only it
            incident = await budget.claim_incident(conn)
            if incident is None:
                return told
            channel = runtime.slack.finance_channel
            recipients = (channel,) if channel else tuple(sorted(runtime.approval_settings.approvers))
            message = model_budget_message(
                incident.month, incident.threshold, usd_display(incident.limit), usd_display(incident.spent)
            )
            for recipient in recipients:
                await runtime.client.chat_postMessage(channel=recipient, **message.as_kwargs())
            if not recipients:
                log.warning("nobody to tell that the model budget for %s crossed %s%%", incident.month,
                            incident.threshold)  # fmt: skip
            await budget.mark_notified(conn, incident.id)
            told += 1
