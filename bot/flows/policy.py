"""Rules change only with consent, and loudly (issue 25 item 4): every policy change reaches Slack, and a
pending one is decided there.

- `announce_policy_changes` (the outbox calls it, and a decision here): each change whose status Slack has
  not heard of — proposed by a bot start, `policy apply` or `budget raise` in any process — is posted as a
  card to the finance channel, else to each current approver by DM (a pending one with Approve/Reject, not
  to its proposer); once decided, those cards are redrawn without buttons. A change locked while told
  (another bot process skips it) and marked in the same transaction, like the budget's incidents.
- `decide_policy_change`: an Approve/Reject click, as the clicking user of the signed payload; approvals/
  judges it (a current approver, not the proposer, the policy not moved on) and a refusal goes to the
  clicker alone, naming its rule.
- `after_policy_in_force` is the one hook for what follows each change put in force: the activity chain's
  seal is posted from there at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.model import budget
from approvals import policy_changes, policy_store
from approvals.models import Refused, Rule
from bot.cards.ids import parse_block_id
from bot.cards.policy import PolicyChangeView, policy_change_card
from bot.flows.decide import slack_source, team_of
from bot.flows.one_person import refusal, tell
from bot.flows.seals import seal_now
from bot.identity import sent_by_a_bot
from bot.runtime import BotRuntime
from engine import schema

log = logging.getLogger(__name__)


def view_of(change: policy_changes.PolicyChange) -> PolicyChangeView:
    return PolicyChangeView(
        id=change.id,
        status=change.status,
        proposed_by=change.proposed_by,
        source=change.source,
        why=change.why,
        changes=tuple((name, change.old.get(name, ""), value) for name, value in change.new.items()),
        month=change.month,
        decided_by=change.decided_by,
    )


async def announce_policy_changes(runtime: BotRuntime) -> int:
    """Tell Slack of every policy change it has not heard of; returns how many were told."""
    told = 0
    while True:
        async with runtime.engine.begin() as conn:  # one change a transaction: a failure redoes only it
            change = await policy_changes.claim_unannounced(conn)
            if change is None:
                return told
            await _announce(runtime, conn, change)
            await policy_changes.mark_announced(conn, change)
        told += 1
        await runtime.service.settings_in_force()  # this process enforces what is stored now
        if change.in_force:
            await after_policy_in_force(runtime, change)


async def after_policy_in_force(runtime: BotRuntime, change: policy_changes.PolicyChange) -> None:
    """What follows each change put in force, once it is announced: the activity chain's seal, at once
    (bot/flows/seals.py would post it at its next look too; a seal already posted since makes that look
    find nothing due). A seal Slack refuses is logged: the periodic look tries again."""
    try:
        await seal_now(runtime)
    except Exception:
        log.exception("could not seal the activity log after policy change #%s", change.id)


async def _announce(runtime: BotRuntime, conn: AsyncConnection, change: policy_changes.PolicyChange) -> None:
    message = policy_change_card(view_of(change)).as_kwargs()
    posted = await _posted(conn, change.id)
    if posted:  # the cards already out say what became of it
        m = schema.policy_change_messages.c
        for row in posted:
            await runtime.client.chat_update(channel=row.channel, ts=row.ts, **message)
            await conn.execute(
                update(schema.policy_change_messages).where(m.id == row.id).values(shows=change.status)
            )
        return
    recipients = await _recipients(runtime, change)
    if not recipients:
        log.warning("nobody to tell of policy change #%s (%s)", change.id, change.status)
    for recipient in recipients:
        answer = await runtime.client.chat_postMessage(channel=recipient, **message)
        await conn.execute(
            insert(schema.policy_change_messages).values(
                change_id=change.id,
                recipient=recipient,
                channel=str(answer["channel"]),
                ts=str(answer["ts"]),
                shows=change.status,
            )
        )


async def _posted(conn: AsyncConnection, change_id: int) -> list[Any]:
    m = schema.policy_change_messages.c
    query = select(schema.policy_change_messages).where(m.change_id == change_id).order_by(m.id)
    return list(await conn.execute(query))


async def _recipients(runtime: BotRuntime, change: policy_changes.PolicyChange) -> tuple[str, ...]:
    """The finance channel, else every current approver by DM (a pending change: not its proposer, who
    cannot decide it)."""
    if runtime.slack.finance_channel:
        return (runtime.slack.finance_channel,)
    approvers = (await runtime.service.settings_in_force()).approvers
    if change.status == policy_changes.PENDING:
        approvers = approvers - {change.proposed_by}
    return tuple(sorted(approvers))


# ---- a click on Approve or Reject ----


@dataclass(frozen=True)
class PolicyClick:
    """A click on a policy change card's button, as the signed block_actions payload tells it."""

    user_id: str
    change_id: int | None  # None: the button's value is not a change id
    revision: int | None
    channel: str | None
    thread_ts: str | None
    team_id: str | None
    from_a_bot: bool

    @classmethod
    def from_payload(cls, body: dict[str, Any], action: dict[str, Any]) -> PolicyClick:
        container = body.get("container") or {}
        ref = parse_block_id(action.get("block_id"))
        value = str(action.get("value") or "")
        return cls(
            user_id=str(body["user"]["id"]),
            change_id=int(value) if value.isdigit() else None,
            revision=ref.revision if ref is not None else None,
            channel=container.get("channel_id") or (body.get("channel") or {}).get("id"),
            thread_ts=container.get("thread_ts"),
            team_id=team_of(body),
            from_a_bot=sent_by_a_bot(body, None, None),
        )


async def decide_policy_change(runtime: BotRuntime, click: PolicyClick, *, approve: bool) -> None:
    """Approve or reject a pending policy change as the clicking user; refusals go to them alone."""
    try:
        if click.change_id is None:
            raise policy_changes.PolicyChangeRefused(
                Rule.UNKNOWN_POLICY_CHANGE, "that button names no policy change"
            )
        is_bot = click.from_a_bot or sent_by_a_bot({}, click.user_id, await runtime.installation())
        await policy_store.decide(
            runtime.engine,
            click.change_id,
            approver=click.user_id,
            approve=approve,
            source=slack_source(click.team_id),
            approver_is_bot=is_bot,
            on_apply=budget.apply_policy_change,
        )
    except Refused as refused:
        notice = refusal(refused.rule, refused.message)
        await tell(runtime, click.user_id, notice, channel=click.channel, thread_ts=click.thread_ts)
    await runtime.service.settings_in_force()  # a change in force holds here from this click on
    await announce_policy_changes(runtime)  # the cards say what became of it, at once
