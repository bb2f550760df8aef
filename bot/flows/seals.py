"""Seals in Slack: the activity chain's head posted to finance (BILLSLEUTH_FINANCE_CHANNEL, else a DM to
each approver), where whoever holds the database cannot reach it (approvals.seals).

The bot posts one once a UTC day while the log grows, and after every policy change — whoever made it, a
bot start, `policy apply` or psql: the database's own `db.policy` rows say so — within a check of the change
(`seal_when_due`, one bot process at a time). A flow that changes the policy can call `seal_now` to post at
once. `billsleuth activity seal` posts one by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import activity, seals
from approvals.seals import Seal
from bot.cards.seal import seal_message
from bot.runtime import BotRuntime
from engine import locks

log = logging.getLogger(__name__)


def seal_recipients(finance_channel: str, approvers: Iterable[str]) -> tuple[str, ...]:
    """Where seals go: the finance channel, else each approver by DM (as approver notices do)."""
    return (finance_channel,) if finance_channel else tuple(sorted(approvers))


async def post_seal(
    client: AsyncWebClient,
    engine: AsyncEngine,
    recipients: Sequence[str],
    *,
    why: str,
    actor_type: str,
    actor_id: str,
) -> Seal:
    """Post the chain's head to each recipient and record it (`activity.sealed`, naming where it went).
    A Slack error propagates and records nothing."""

    async def post(seal: Seal) -> list[str]:
        message = seal_message(seal.row, seal.hash, why)
        for recipient in recipients:
            await client.chat_postMessage(channel=recipient, **message.as_kwargs())
        return list(recipients)

    return await seals.post_seal(engine, post, why=why, actor_type=actor_type, actor_id=actor_id)


async def seal_now(runtime: BotRuntime, why: str = seals.POLICY_CHANGE) -> Seal | None:
    """Post a seal from the bot now (what a policy change calls); None when there is nobody to post to."""
    recipients = seal_recipients(runtime.slack.finance_channel, runtime.approval_settings.approvers)
    if not recipients:
        log.warning("no finance channel and no approvers: the activity log's seal (%s) goes nowhere", why)
        return None
    return await post_seal(
        runtime.client, runtime.engine, recipients, why=why, actor_type=activity.SYSTEM, actor_id="bot"
    )


async def seal_when_due(runtime: BotRuntime, now: datetime | None = None) -> Seal | None:
    """The periodic look: post a seal when a policy row was appended since the last one, or when none was
    posted this UTC day and the log grew since the last. One bot process does it; the others skip."""
    if not seal_recipients(runtime.slack.finance_channel, runtime.approval_settings.approvers):
        return None  # nobody to post to (doctor says so); not a warning a minute
    now = now or datetime.now(UTC)
    day_start = datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)
    async with runtime.locks.leading(locks.SEAL_DUE) as leader:
        if not leader:
            return None
        async with runtime.engine.connect() as conn:
            why = await seals.seal_due(conn, day_start)
        if why is None:
            return None
        return await seal_now(runtime, why)
