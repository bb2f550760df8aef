"""Telling one person something only they should see: an ephemeral message in the channel they acted in
(or their direct message with the app, where there is no such channel)."""

from __future__ import annotations

import logging
from typing import Any

from agent.cases.record import CaseNotFound
from approvals import queries
from approvals.models import Rule, UnknownCreditNote
from bot.cards import refusal_message
from bot.cards.models import Message, Refusal
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)


def refusal(rule: Rule, reason: str) -> Message:
    return refusal_message(Refusal(rule, reason))


async def tell(
    runtime: BotRuntime,
    user_id: str,
    message: Message,
    *,
    channel: str | None,
    thread_ts: str | None = None,
    credit_note_id: str | None = None,
) -> bool:
    """An ephemeral message for one person, in the channel they clicked in — or, for a click in App
    Home, in the channel of the note's card; a note with no card (its case was opened from the CLI) has
    the person's direct message with the app, which only they read. False when there is nowhere to say it."""
    if not channel and credit_note_id:
        channel, thread_ts = await _card_channel(runtime, credit_note_id)
        if not channel:
            await runtime.client.chat_postMessage(channel=user_id, **message.as_kwargs())
            return True
    if not channel:
        log.warning("no channel to tell %s: %s", user_id, message.text)
        return False
    kwargs: dict[str, Any] = {"channel": channel, "user": user_id, **message.as_kwargs()}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    await runtime.client.chat_postEphemeral(**kwargs)
    return True


async def _card_channel(runtime: BotRuntime, credit_note_id: str) -> tuple[str | None, str | None]:
    try:
        note = await queries.get_credit_note(runtime.engine, credit_note_id)
        if note.case_id is None:
            return None, None
        row = await runtime.service.case_row(note.case_id)
    except (UnknownCreditNote, CaseNotFound):
        return None, None
    return row.channel, row.thread_ts
