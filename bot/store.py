"""The bot's own SQL: Slack deliveries claimed once, where each case's message lives, what Slack was last
shown of a case, the outbox of changes Slack has yet to show, and the advisory locks that order the bot
processes' work.

Everything here takes an engine or a connection; nothing here knows of Slack's API or of the flows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import bindparam, delete, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.cases.service import CaseService
from agent.graph.state import SETTLED, UNFINISHED, CaseStatus
from approvals.models import NoteStatus, note_revision
from engine import locks, schema
from engine.db import autocommit, reading
from engine.locks import LockKey

LOCAL_LOCK_STRIPES = 64
MAX_LOCK_HOLDERS = 4  # with the case locks' 6 (agent.cases.runner), 10 of the pool's 15 connections at most

# A case drawn in one of these states never changes again (an escalated one may, while its note is
# approved: it can still be cancelled).
FINAL_DRAWN_STATES = (CaseStatus.EXPLAINED, CaseStatus.NEEDS_CUSTOMER, *SETTLED)


@dataclass(frozen=True)
class CaseRequest:
    """A complaint to investigate, as Slack handed it to us."""

    customer_id: str
    words: str  # the customer's words
    requester: str  # the Slack user who asked
    channel: str
    thread_ts: str | None  # the thread the case goes into; None: the case's own message starts one
    found_by: str | None = None  # how the customer was found in the words (id, email, name, fuzzy name)
    # Who opened it when that is not the requester: the clicker of a linked case's `Open a case`, who
    # then may not decide its note either (cases.opened_from, as for a case opened from the CLI).
    opened_from: str | None = None


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # this process opens the case
    EVENT_SEEN = "event_seen"  # a redelivery of an event claimed before
    MESSAGE_SEEN = "message_seen"  # an edit of a message that already has a case


@dataclass(frozen=True)
class Claim:
    outcome: ClaimOutcome
    case_id: str | None  # the case opened for the event (CLAIMED, or a redelivery of a claimed one)


# ---- exactly once, across processes ------------------------------------------------------------------------


async def claim(engine: AsyncEngine, key: str, case_id: str | None = None) -> bool:
    """True for the one caller (in any bot process) that records `key` first; False for the rest.

    Slack event ids are claimed this way (a retried or twice-delivered event runs once), and so are
    one-off posts such as a case's customer reply."""
    async with autocommit(engine) as conn:  # one INSERT … ON CONFLICT: atomic by itself
        return await _claim_in(conn, key, case_id)


@asynccontextmanager
async def claimed_while(engine: AsyncEngine, key: str, case_id: str | None = None) -> AsyncIterator[bool]:
    """Claim `key` for a one-off post made inside the block: True for the one caller that gets it.

    The claim commits only when the block ends without an error, so a post that fails — or a process that
    dies before posting — leaves the post owed, and the next attempt makes it. Another process claiming
    the same key meanwhile waits on the unique key until this one commits (then gets False) or rolls back
    (then gets the claim). Should a process die after Slack took the post but before the commit, the post
    goes out twice: a duplicate reply is the lesser failure than a customer reply never sent."""
    async with engine.begin() as conn:
        yield await _claim_in(conn, key, case_id)


async def is_claimed(engine: AsyncEngine, key: str) -> bool:
    async with reading(engine) as conn:
        found = await conn.execute(
            select(schema.slack_events.c.event_id).where(schema.slack_events.c.event_id == key)
        )
        return found.first() is not None


async def claim_case(
    service: CaseService,
    event_key: str,
    message_key: str,
    request: CaseRequest,
    status: str = CaseStatus.QUEUED,
) -> Claim:
    """Claim a Slack event and the message it is about, and record its case (queued; or needs_customer
    while a person picks which customer the words mean), in one transaction: a claimed mention always has
    its case, whatever stops the process next.

    The event claim makes a retried or twice-delivered event run once; the message claim makes an
    edited mention (a new event on the same message) open no second case."""
    events = schema.slack_events
    async with service.engine.begin() as conn:
        if not await _claim_in(conn, event_key):
            linked = await conn.execute(select(events.c.case_id).where(events.c.event_id == event_key))
            return Claim(ClaimOutcome.EVENT_SEEN, linked.scalar())
        if not await _claim_in(conn, message_key):
            return Claim(ClaimOutcome.MESSAGE_SEEN, None)  # the event's claim is kept: retries stay silent
        # The case's id first and the event linked to it, so that the case's activity row is the
        # transaction's last statement: it holds the log's head until the commit, and every appender of
        # both processes waits behind it (approvals/activity.py).
        case_id = await service.new_case_id(conn)
        await conn.execute(update(events).where(events.c.event_id == event_key).values(case_id=case_id))
        await _register_case(service, conn, request, status, case_id)
    return Claim(ClaimOutcome.CLAIMED, case_id)


async def new_case(service: CaseService, request: CaseRequest) -> str:
    """Record a case nobody claimed an event for (the shortcut's modal, the slash command), queued."""
    async with service.engine.begin() as conn:
        return await _register_case(service, conn, request)


async def new_case_in(conn: AsyncConnection, service: CaseService, request: CaseRequest) -> str:
    """Record a case (queued) in the caller's transaction, with whatever else it claims (a finding)."""
    return await _register_case(service, conn, request)


async def _register_case(
    service: CaseService,
    conn: AsyncConnection,
    request: CaseRequest,
    status: str = CaseStatus.QUEUED,
    case_id: str | None = None,
) -> str:
    return await service.register_case(
        conn,
        request.words,
        requester=request.requester,
        customer_id=request.customer_id or None,
        channel=request.channel,
        thread_ts=request.thread_ts,
        status=status,
        found_by=request.found_by,
        case_id=case_id,
    )


# Built once: every mention claims its event and its message, every one-off post its key.
_CLAIM = (
    pg_insert(schema.slack_events)
    .values(event_id=bindparam("key"), case_id=bindparam("case"))
    .on_conflict_do_nothing(index_elements=[schema.slack_events.c.event_id])
    .returning(schema.slack_events.c.event_id)
)


async def _claim_in(conn: AsyncConnection, key: str, case_id: str | None = None) -> bool:
    return (await conn.execute(_CLAIM, {"key": key, "case": case_id})).first() is not None


# ---- linked cases: one per other finding, whoever clicks and however often --------------------------------

LINKED_PREFIX = "linked:"


def linked_key(case_id: str, invoice_id: str) -> str:
    """The claim that gives one of a case's other findings its linked case, once."""
    return f"{LINKED_PREFIX}{case_id}:{invoice_id}"


async def claim_linked_case(
    service: CaseService, case_id: str, invoice_id: str, request: CaseRequest
) -> Claim:
    """Record the linked case for the finding on `invoice_id` of case `case_id` (queued; `linked_from` the
    case), claimed in the same transaction: concurrent clicks on the same finding wait on the claim's
    unique key, and all but the first get the case it opened (EVENT_SEEN)."""
    events = schema.slack_events
    key = linked_key(case_id, invoice_id)
    async with service.engine.begin() as conn:
        if not await _claim_in(conn, key):
            linked = await conn.execute(select(events.c.case_id).where(events.c.event_id == key))
            return Claim(ClaimOutcome.EVENT_SEEN, linked.scalar())
        linked_id = await service.register_case(
            conn,
            request.words,
            requester=request.requester,
            customer_id=request.customer_id,
            channel=request.channel,
            thread_ts=request.thread_ts,
            opened_from=request.opened_from,
            linked_from=case_id,
        )
        await conn.execute(update(events).where(events.c.event_id == key).values(case_id=linked_id))
    return Claim(ClaimOutcome.CLAIMED, linked_id)


async def linked_cases_in(conn: AsyncConnection, case_id: str) -> dict[str, str]:
    """The linked cases opened from this case's card so far: invoice id → case id."""
    events = schema.slack_events.c
    prefix = linked_key(case_id, "")
    rows = await conn.execute(
        select(events.event_id, events.case_id).where(
            events.event_id.startswith(prefix, autoescape=True), events.case_id.is_not(None)
        )
    )
    return {row.event_id.removeprefix(prefix): row.case_id for row in rows}


# ---- where a case's message lives, and what it shows -------------------------------------------------------


async def record_message(
    engine: AsyncEngine, case_id: str, channel: str, ts: str, thread_ts: str | None = None
) -> None:
    """Where the case's card lives (and its thread, when the card started it), so that decisions
    and recovery (from any process) update it."""
    cases = schema.cases
    where = {"channel": channel, "message_ts": ts}
    if thread_ts is not None:
        where["thread_ts"] = thread_ts
    async with autocommit(engine) as conn:  # one UPDATE
        await conn.execute(update(cases).where(cases.c.id == case_id).values(**where))


async def forget_message(engine: AsyncEngine, case_id: str) -> None:
    """The case's result goes into a new message of its thread (a new round): the old one keeps its card."""
    cases = schema.cases
    async with autocommit(engine) as conn:  # one UPDATE
        await conn.execute(update(cases).where(cases.c.id == case_id).values(message_ts=None))


def drawn_state(status: str, note: Mapping[str, Any] | None) -> str:
    """What a case's Slack message shows, as one comparable string: the case's status and its note's."""
    shown = f"{note['id']}:{note['status']}:{note['approvals']}" if note else "-"
    return f"{status}|{shown}"


def drawn_note(drawn: str | None) -> tuple[str, int] | None:
    """The note a drawn state (`drawn_state`) shows, as its id and revision; None when it shows none (a
    note's only reject vote is what makes it rejected)."""
    shown = (drawn or "").partition("|")[2].rsplit(":", 2)
    if len(shown) != 3:
        return None
    note_id, status, approvals = shown
    return note_id, note_revision(status, int(approvals), rejected=status == NoteStatus.REJECTED)


_MARK_DRAWN = (
    update(schema.cases).where(schema.cases.c.id == bindparam("case")).values(drawn_state=bindparam("state"))
)


async def mark_drawn(conn: AsyncConnection, case_id: str, state: str) -> None:
    await conn.execute(_MARK_DRAWN, {"case": case_id, "state": state})


def told_requester_key(case_id: str) -> str:
    """The claim that tells a case's requester once that it was opened in their name from the CLI."""
    return f"told-requester:{case_id}"


def reply_key(case_id: str, status: str) -> str:
    """The claim that makes a settled case's customer reply go out once."""
    return f"reply:{case_id}:{status}"


async def maybe_behind(engine: AsyncEngine) -> list[tuple[str, str | None]]:
    """Cases with a Slack message that may be behind: never drawn, drawn in a state that can still change,
    or settled with no customer reply claimed. A case drawn in a final state is never read again."""
    cases, events = schema.cases.c, schema.slack_events.c
    final = or_(*(cases.drawn_state.like(f"{status}|%") for status in FINAL_DRAWN_STATES)) | (
        cases.drawn_state.like("escalated|%") & ~cases.drawn_state.like("%:approved:%")
    )
    reply_claimed = (
        select(events.event_id)
        .where(events.event_id == func.concat("reply:", cases.id, ":", cases.status))
        .exists()
    )
    query = (
        select(cases.id, cases.drawn_state)
        .where(
            cases.channel.is_not(None),
            cases.status.not_in(UNFINISHED),
            cases.drawn_state.is_(None) | ~final | (cases.status.in_(SETTLED) & ~reply_claimed),
        )
        .order_by(cases.created_at, cases.id)
    )
    async with reading(engine) as conn:
        return [(row.id, row.drawn_state) for row in await conn.execute(query)]


# ---- the outbox: changes Slack has yet to show (written by triggers, migration 0006) --------------------


@dataclass(frozen=True)
class Change:
    id: int
    at: datetime
    case_id: str | None
    change: str  # e.g. credit_note.approved, vote.approve, case.issued


async def take_changes(conn: AsyncConnection, limit: int) -> list[Change]:
    """The oldest undelivered changes, locked for this transaction; rows another process is delivering
    are skipped, so each change is delivered by one process at a time, and again if that one dies."""
    outbox = schema.outbox.c
    rows = await conn.execute(
        select(outbox.id, outbox.at, outbox.case_id, outbox.change)
        .order_by(outbox.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [Change(row.id, row.at, row.case_id, row.change) for row in rows]


async def forget_changes(conn: AsyncConnection, changes: list[Change]) -> None:
    """Delivered: commit with the caller's transaction."""
    await conn.execute(delete(schema.outbox).where(schema.outbox.c.id.in_([c.id for c in changes])))


# ---- approver notices: each one posted once (migration 0007) ---------------------------------------------


class NoticeKind(StrEnum):
    NOTICE = "notice"  # the note waits for a decision
    REMINDER = "reminder"  # half its approval time has gone


@dataclass(frozen=True)
class Notice:
    id: int
    recipient: str
    kind: NoticeKind
    channel: str
    ts: str
    shows: str  # "waiting", or the note status it was last updated to


async def claim_notice(
    engine: AsyncEngine, credit_note_id: str, recipient: str, kind: NoticeKind
) -> int | None:
    """The right to post this notice, once across processes; None when it was claimed before."""
    notices = schema.approver_notices
    async with autocommit(engine) as conn:  # one INSERT … ON CONFLICT
        claimed = await conn.execute(
            pg_insert(notices)
            .values(credit_note_id=credit_note_id, recipient=recipient, kind=kind)
            .on_conflict_do_nothing(constraint="approver_notices_once")
            .returning(notices.c.id)
        )
        return claimed.scalar()


async def record_notice(engine: AsyncEngine, notice_id: int, channel: str, ts: str) -> None:
    notices = schema.approver_notices
    async with autocommit(engine) as conn:  # one UPDATE
        await conn.execute(update(notices).where(notices.c.id == notice_id).values(channel=channel, ts=ts))


async def drop_notice(engine: AsyncEngine, notice_id: int) -> None:
    """Posting it failed: give up the claim, so the next delivery of the change tries again."""
    notices = schema.approver_notices
    async with autocommit(engine) as conn:  # one DELETE
        await conn.execute(delete(notices).where(notices.c.id == notice_id))


async def posted_notices(engine: AsyncEngine, credit_note_id: str) -> list[Notice]:
    n = schema.approver_notices.c
    async with reading(engine) as conn:
        rows = await conn.execute(
            select(n.id, n.recipient, n.kind, n.channel, n.ts, n.shows)
            .where(n.credit_note_id == credit_note_id, n.ts.is_not(None))
            .order_by(n.id)
        )
        return [Notice(r.id, r.recipient, NoticeKind(r.kind), r.channel, r.ts, r.shows) for r in rows]


async def mark_notice(engine: AsyncEngine, notice_id: int, shows: str) -> None:
    notices = schema.approver_notices
    async with autocommit(engine) as conn:  # one UPDATE
        await conn.execute(update(notices).where(notices.c.id == notice_id).values(shows=shows))


async def drafts_due_for_reminder(engine: AsyncEngine, now: datetime) -> list[str]:
    """Drafts past half their approval time that were announced and have no reminder yet."""
    notes, n = schema.credit_notes.c, schema.approver_notices.c
    halfway_past = text(
        "credit_notes.created_at + (credit_notes.expires_at - credit_notes.created_at) / 2 <= :now"
    )
    announced = select(n.id).where(n.credit_note_id == notes.id, n.kind == NoticeKind.NOTICE).exists()
    reminded = select(n.id).where(n.credit_note_id == notes.id, n.kind == NoticeKind.REMINDER).exists()
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(notes.id)
            .where(notes.status == NoteStatus.DRAFT, notes.expires_at > now, announced, ~reminded)
            .where(halfway_past.bindparams(now=now))
            .order_by(notes.id)
        )
        return list(rows.scalars())


async def case_waiting_in_thread(engine: AsyncEngine, channel: str, thread_ts: str) -> tuple[str, str] | None:
    """The case in this thread whose note was sent back and waits for an answer: (case id, requester)."""
    cases = schema.cases.c
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(cases.id, cases.requester)
                .where(
                    cases.channel == channel,
                    cases.thread_ts == thread_ts,
                    cases.status == CaseStatus.REVISION_REQUESTED,
                )
                .order_by(cases.created_at.desc())
                .limit(1)
            )
        ).first()
    return (row.id, row.requester) if row is not None else None


async def requesters_of(engine: AsyncEngine, case_ids: list[str]) -> set[str]:
    """Who asked for these cases (Slack ids, or cli:<os account>)."""
    if not case_ids:
        return set()
    cases = schema.cases.c
    async with reading(engine) as conn:
        return set((await conn.execute(select(cases.requester).where(cases.id.in_(case_ids)))).scalars())


async def openers_of(engine: AsyncEngine, case_id: str) -> set[str]:
    """Who opened the case: its requester, and `opened_from` when set (a linked case's clicker, or
    cli:<os account>). None of them may decide its note."""
    cases = schema.cases.c
    async with reading(engine) as conn:
        row = (
            await conn.execute(select(cases.requester, cases.opened_from).where(cases.id == case_id))
        ).first()
    return {who for who in row or () if who}


# ---- locks ----------------------------------------------------------------------------------------------


class Locks:
    """Postgres advisory locks, with this process's waiters queued locally first."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._stripes = tuple(asyncio.Lock() for _ in range(LOCAL_LOCK_STRIPES))
        self._holders = asyncio.Semaphore(MAX_LOCK_HOLDERS)

    @asynccontextmanager
    async def locked(self, key: LockKey) -> AsyncIterator[AsyncConnection]:
        """A Postgres advisory lock held for the block (transaction-scoped: it cannot leak). Yields the
        lock's connection: reads done on it cost no second checkout.

        Waiters in this process queue on a local lock first, so twenty clicks on one card hold one pooled
        connection between them, not twenty; and at most MAX_LOCK_HOLDERS hold one at a time, because a
        holder may check out a second connection (an audit row, the card's location) and the pool must
        never be all holders waiting for one."""
        stripe = self._stripes[hash(key) % len(self._stripes)]
        async with stripe, self._holders, self.engine.begin() as conn:
            await locks.xact_lock(conn, key)
            yield conn

    @asynccontextmanager
    async def leading(self, key: LockKey) -> AsyncIterator[bool]:
        """True when this process got the lock (the others skip the work instead of waiting)."""
        async with self.engine.begin() as conn:
            yield await locks.try_xact_lock(conn, key)
