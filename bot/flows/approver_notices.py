"""Approvers are told: when a note needs a decision, each approver who can still vote gets one message (a
DM, or one post in BILLSLEUTH_FINANCE_CHANNEL when it is set) with the amount, the customer and a link to
the card; at half the approval time, a reminder to those who have not voted; once the note is decided,
those messages are updated to say what happened and by whom.

Each message is claimed in the database before it is posted (store.claim_notice), so it goes out once
whichever bot process gets there first; the outbox (bot/flows/outbox.py) calls in here for every change of
a note, and its poll brings the reminders.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from agent.cases.record import CaseNotFound
from approvals import queries
from approvals.models import CreditNoteView as Note
from approvals.models import NoteStatus
from bot import store
from bot.cards.approver_notices import (
    approver_notice_message,
    approver_outcome_message,
    approver_reminder_message,
)
from bot.cards.models import ApproverNoticeView, Message
from bot.presenters.approver_notices import approver_notice_view
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)


async def tell_approvers(runtime: BotRuntime, case_id: str) -> None:
    """After a change of the case's note: announce it while it waits, or update the notices once decided."""
    note = await queries.credit_note_for_case(runtime.engine, case_id)
    if note is None:  # no note (yet), or a reseed erased the case
        return
    if note.status == NoteStatus.DRAFT:
        await _post_once(runtime, note, store.NoticeKind.NOTICE)
    else:
        await _update_decided(runtime, note)


async def remind_approvers(runtime: BotRuntime) -> list[str]:
    """Remind the approvers who have not voted on notes past half their approval time. Returns the notes."""
    due = await store.drafts_due_for_reminder(runtime.engine, datetime.now(UTC))
    for credit_note_id in due:
        try:
            await _post_once(
                runtime,
                await queries.get_credit_note(runtime.engine, credit_note_id),
                store.NoticeKind.REMINDER,
            )
        except Exception:
            log.exception("could not remind the approvers of %s", credit_note_id)
    return due


async def _post_once(runtime: BotRuntime, note: Note, kind: store.NoticeKind) -> None:
    waiting_for = await _can_still_vote(runtime, note)
    if not waiting_for:
        return
    channel = runtime.slack.finance_channel
    recipients = (channel,) if channel else waiting_for
    view: ApproverNoticeView | None = None
    for recipient in recipients:
        notice_id = await store.claim_notice(runtime.engine, note.id, recipient, kind)
        if notice_id is None:
            continue
        view = view or await _view(runtime, note, waiting_for)
        draw = approver_notice_message if kind == store.NoticeKind.NOTICE else approver_reminder_message
        try:
            posted = await runtime.client.chat_postMessage(
                channel=recipient, **draw(view, in_channel=bool(channel)).as_kwargs()
            )
        except Exception:
            await store.drop_notice(runtime.engine, notice_id)
            raise
        await store.record_notice(runtime.engine, notice_id, str(posted["channel"]), str(posted["ts"]))


async def _update_decided(runtime: BotRuntime, note: Note) -> None:
    stale = [n for n in await store.posted_notices(runtime.engine, note.id) if n.shows != note.status]
    if not stale:
        return
    message: Message = approver_outcome_message(await _view(runtime, note, ()))
    for notice in stale:
        await runtime.client.chat_update(channel=notice.channel, ts=notice.ts, **message.as_kwargs())
        await store.mark_notice(runtime.engine, notice.id, note.status)


async def _can_still_vote(runtime: BotRuntime, note: Note) -> tuple[str, ...]:
    """Approvers on the stored list who have not voted and did not open the case themselves: neither
    its requester (whichever door: a mention, the CLI's --as) nor whoever opened it on the requester's
    behalf (a linked case's clicker). Neither may decide it, so neither is asked to."""
    voted = {*note.approvers, note.rejected_by}
    openers = await store.openers_of(runtime.engine, note.case_id) if note.case_id else set()
    return tuple(sorted(runtime.approval_settings.approvers - voted - openers))


async def _view(runtime: BotRuntime, note: Note, waiting_for: tuple[str, ...]) -> ApproverNoticeView:
    return await approver_notice_view(
        runtime.engine, note, waiting_for=waiting_for, card_link=await _card_link(runtime, note)
    )


async def _card_link(runtime: BotRuntime, note: Note) -> str | None:
    if note.case_id is None:
        return None
    try:
        row = await runtime.service.case_row(note.case_id)
    except CaseNotFound:
        return None
    if not row.channel or not row.message_ts:
        return None
    found = await runtime.client.chat_getPermalink(channel=row.channel, message_ts=row.message_ts)
    return str(found["permalink"])
