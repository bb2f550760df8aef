"""A case's messages in its thread: the one message that goes from progress to result (the evidence card,
the explanation, or why it stopped), and the customer reply once a credit note is settled.

Any bot process may touch a card. Each redraw reads the note's state inside a per-note Postgres lock and
then calls chat.update, so whichever process draws last draws the newest state: a slow update carrying
"Approvals: 1 of 2" can never land after "Issued". A decision's redraw takes the note as the decision's
own run committed it instead of reading it again, under the same lock, unless a later vote or a later
drawn change shows it is behind (bot/presenters/approver.py `_nothing_since`). The customer reply is
claimed in the database in the transaction that posts it, so two processes that both saw the outcome post
it once, and a post that failed is made again by the next redraw.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases.record import CaseNotFound, case_row_in
from agent.graph.state import MAX_ROUNDS, SETTLED, UNFINISHED, CaseStatus
from approvals import queries
from approvals.models import CreditNoteView
from bot import store
from bot.cards import customer_reply_message
from bot.cards.models import Message, ProgressStep
from bot.cards.rounds import changes_requested_message
from bot.presenters.approver import CARD_VIEWER, card_message, read_approver_view
from bot.presenters.cases import case_message
from bot.presenters.rounds import rounds_in
from bot.runtime import BotRuntime
from engine import locks

log = logging.getLogger(__name__)


async def put_case_message(
    runtime: BotRuntime, case_id: str, message: Message, conn: AsyncConnection | None = None
) -> str | None:
    """Draw `message` in the case's own message (chat.update), or post it in the case's thread when it
    has none yet (a case recovered before its message was recorded). Returns the message ts.
    `conn`: read the case on the caller's connection (the card's lock) instead of a pooled one."""
    row = await (case_row_in(conn, case_id) if conn is not None else runtime.service.case_row(case_id))
    if not row.channel:
        return None  # opened outside Slack (the CLI): no card to draw
    if row.message_ts:
        await runtime.client.chat_update(channel=row.channel, ts=row.message_ts, **message.as_kwargs())
        return str(row.message_ts)
    posted = await runtime.client.chat_postMessage(
        channel=row.channel, thread_ts=row.thread_ts, **message.as_kwargs()
    )
    ts = str(posted["ts"])
    await store.record_message(runtime.engine, case_id, row.channel, ts)
    return ts


async def refresh_card(
    runtime: BotRuntime, credit_note_id: str, as_left: CreditNoteView | None = None
) -> bool:
    """Redraw the note's evidence card from the database as it stands now; False when it has no card.
    `as_left`: the note as the caller's own committed change left it (read_approver_view says when that
    is taken instead of reading the note again)."""
    async with runtime.locks.locked(locks.card(credit_note_id)) as conn:
        # One read of the note, its votes and its case: the card is drawn from it, and marked as drawn
        # from the same state.
        view = await read_approver_view(
            runtime.service, credit_note_id, viewer=CARD_VIEWER, conn=conn, as_left=as_left
        )
        if view.case is None:
            return False
        case_id = view.case.case_id
        if await put_case_message(runtime, case_id, card_message(view), conn) is None:
            return False
        await store.mark_drawn(conn, case_id, store.drawn_state(view.case.status, view.note.summary()))
        return True


async def show_case_result(
    runtime: BotRuntime, case: Mapping[str, Any], *, steps: Sequence[ProgressStep] = (), revision: int = 1
) -> None:
    """The end (or pause) of an investigation, drawn in the case's message; then any settled reply."""
    note = case.get("credit_note")
    if note is not None and case["status"] != CaseStatus.ESCALATED:
        await refresh_card(runtime, note["id"])
    else:
        message = await case_message(runtime.service, case, steps=steps, revision=revision)
        if await put_case_message(runtime, case["case_id"], message) is not None:
            async with runtime.engine.begin() as conn:
                await store.mark_drawn(conn, case["case_id"], store.drawn_state(case["status"], note))
    if case["status"] in SETTLED:  # e.g. a recovered case whose decision was applied meanwhile
        await announce_outcome(runtime, case["case_id"])
    elif case["status"] == CaseStatus.REVISION_REQUESTED:
        await ask_the_requester(runtime, case["case_id"])


async def ask_the_requester(runtime: BotRuntime, case_id: str) -> bool:
    """An approver sent the case's note back: put their question to the requester in the thread — once,
    whichever process gets here first. True when this call posted it."""
    row = await runtime.service.case_row(case_id)
    async with runtime.engine.connect() as conn:
        rounds = await rounds_in(conn, case_id)
    waiting = row.status == CaseStatus.REVISION_REQUESTED and rounds and rounds[-1].answer is None
    if not waiting or not row.channel:
        return False
    sent_back = rounds[-1]
    async with store.claimed_while(runtime.engine, f"question:{case_id}:{sent_back.round}", case_id) as mine:
        if not mine:
            return False
        message = changes_requested_message(case_id, row.requester, sent_back, MAX_ROUNDS)
        await runtime.client.chat_postMessage(
            channel=row.channel, thread_ts=row.thread_ts or row.message_ts, **message.as_kwargs()
        )
    return True


async def announce_outcome(runtime: BotRuntime, case_id: str, case: Mapping[str, Any] | None = None) -> bool:
    """Once the case's credit note is settled, post the customer reply (exactly `case show`'s text) in the
    thread — once, whichever process gets here first. True when this call posted it. `case`: its case JSON
    as the caller just had it back (a decision's), else read now."""
    try:
        case = case or await runtime.service.show_case(case_id)
        row = await runtime.service.case_row(case_id)
    except CaseNotFound:
        return False
    status, note = case["status"], case.get("credit_note")
    reply = (case.get("reply") or {}).get("customer_message") or ""
    if status not in SETTLED or note is None or not reply or not row.channel:
        return False
    async with store.claimed_while(runtime.engine, store.reply_key(case_id, status), case_id) as mine:
        if not mine:
            return False
        message = customer_reply_message(case_id, note["id"], status, reply)
        await runtime.client.chat_postMessage(
            channel=row.channel, thread_ts=row.thread_ts or row.message_ts, **message.as_kwargs()
        )
    return True


async def settle_card(
    runtime: BotRuntime,
    credit_note_id: str,
    case: Mapping[str, Any] | None = None,
    as_left: CreditNoteView | None = None,
) -> None:
    """After anything changed a note (a vote, an expiry, a recovered decision): redraw, then announce the
    outcome — or, for a note sent back, put the approver's question to the requester. `case` and
    `as_left`: the note's case JSON and the note as the change left them (a decision hands both back), so
    neither is read again here."""
    case_id = (
        case["case_id"] if case else (await queries.get_credit_note(runtime.engine, credit_note_id)).case_id
    )
    if case_id is None:
        return
    await refresh_card(runtime, credit_note_id, as_left)
    await announce_outcome(runtime, case_id, case)
    await ask_the_requester(runtime, case_id)


async def redraw_behind(runtime: BotRuntime) -> list[str]:
    """Draw every finished case whose Slack message is behind its state — a stop came between a change
    and its redraw (a card still saying Investigating…, or waiting for approval after its note was
    issued) — and post the customer replies still owed. Returns the cases drawn."""
    drawn = []
    for case_id, _ in await store.maybe_behind(runtime.engine):
        try:
            if await redraw_if_behind(runtime, case_id):
                drawn.append(case_id)
        except Exception:
            log.exception("could not redraw case %s", case_id)
    return drawn


async def redraw_if_behind(runtime: BotRuntime, case_id: str, *, force: bool = False) -> bool:
    """Draw the case's result when its Slack message shows an older state, or a customer reply is owed;
    True when it drew. A case still being investigated is left to the run drawing its progress, and one
    that no longer exists (a reseed erased it) has nothing to draw. `force`: the card shows more than the
    state compared (an import changed the ledger under the note), so draw it anyway."""
    try:
        row = await runtime.service.case_row(case_id)
    except CaseNotFound:
        return False
    if not row.channel or row.status in UNFINISHED:
        return False
    case = await runtime.service.show_case(case_id)
    shown = store.drawn_state(case["status"], case.get("credit_note"))
    if not force and shown == row.drawn_state and not await _reply_owed(runtime, case):
        return False
    await show_case_result(runtime, case)
    return True


async def _reply_owed(runtime: BotRuntime, case: Mapping[str, Any]) -> bool:
    if case["status"] not in SETTLED or not (case.get("reply") or {}).get("customer_message"):
        return False
    return not await store.is_claimed(runtime.engine, store.reply_key(case["case_id"], case["status"]))
