"""Cases: open one (run the graph), show one, decide on its credit note (claim, then resume), recover.

This is the one service the CLI, the Slack bot and the evaluation all call. The `cases` table holds each
case's summary for quick reads; the graph's checkpoints hold its full state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.graph.configuration import CaseContext, Configuration
from agent.graph.lazy_graph import LazyGraph
from agent.graph.state import (
    EXPIRED_RESUME,
    FINISHED,
    UNFINISHED,
    CaseState,
    CaseStatus,
    Resume,
    refused_at_issue,
)
from agent.model import budget
from agent.model.clients import model_clients_held
from agent.model.costs import SpendSettings, case_model_cost
from approvals import activity, cancelling, decisions, expiry, holds, policy_store, queries
from approvals.config import ApprovalSettings
from approvals.models import (
    CLI_SOURCE,
    NO_MONEY,
    ApprovalRefused,
    CreditNoteView,
    Decision,
    DecisionOutcome,
    NoteStatus,
    Rule,
)
from engine import locks, schema
from engine.db import autocommit, create_engine, reading
from engine.logcontext import bind

if TYPE_CHECKING:
    from langgraph.types import Durability

log = logging.getLogger(__name__)

ProgressCallback = Callable[[dict[str, Any]], None]
WAITING_NODE = "await_approval"
FINISHED_CHECKPOINT_RETENTION = timedelta(days=30)
MAX_CASE_LOCK_HOLDERS = 6
# The service's pool keeps every connection it opens, up to the 15 SQLAlchemy's default allows (5 + 10
# overflow): overflow connections were closed as soon as they were back, so a burst of mentions opened and
# closed more than one Postgres backend per mention, each new one warming its catalog caches again.
POOL_CONNECTIONS = 15


RESUBMITTED = "case.resubmitted"  # activity: the requester answered the approver's question
# An outbox change (migration 0006's table): a case was opened from the CLI in a Slack user's name; the
# bot tells that user by DM. Written in the transaction that records the case, so it is never lost.
OPENED_FROM_CLI = "case.opened_from_cli"
_TELL_REQUESTER = text("SELECT outbox_add('case', :case_id, :case_id, :change)").bindparams(
    change=OPENED_FROM_CLI
)
# What a case hears when the sweep cancels its note, approved but never issued, for the hold limit.
HOLD_LIMIT_PASSED = Resume.by_system(Decision.CANCEL, "hold limit passed")
NOTE_LESS = (CaseStatus.EXPLAINED, CaseStatus.NEEDS_CUSTOMER)  # statuses whose case JSON shows no note


# The cases still waiting for approval whose latest note is no longer a draft, oldest first: the only ones
# settling can move. One statement, however many cases wait on an undecided draft (nearly all of them).
_WAITING_ON_A_DECIDED_NOTE = (
    select(schema.cases.c.id)
    .where(
        schema.cases.c.status == CaseStatus.AWAITING_APPROVAL,
        # no note at all: NULL, left out
        queries.latest_note_of_case(schema.credit_notes.c.status) != NoteStatus.DRAFT,
    )
    .order_by(schema.cases.c.created_at, schema.cases.c.id)
)


class CaseNotFound(LookupError):
    pass


class NotWaitingForAnswer(ValueError):
    """An answer came for a case that is not waiting for one (answered already, or never sent back)."""


@dataclass(frozen=True)
class Sweep:
    expired: list[str]  # credit notes that ran out of time in this sweep
    settled: list[str]  # cases resumed because their note was settled (or released by the budget)
    cancelled: list[str] = field(default_factory=list)  # notes held by the daily limit for too long


@dataclass
class CaseService:
    engine: AsyncEngine
    graph: LazyGraph  # compiled on first use (agent.graph.lazy_graph); the bot compiles it at start
    configuration: Configuration
    approval_settings: ApprovalSettings
    # True when the settings are the database's stored policy (re-read before every decision, so a bot
    # started since, or `policy apply`, is obeyed at once); False for settings a caller fixed (tests, eval).
    follows_stored_policy: bool = False
    # Where this process's own environment disagrees with the stored policy (it warns; the stored one holds).
    policy_differences: tuple[policy_store.Difference, ...] = ()
    # A case lock holds a pooled connection for a whole graph run, which checks out more of its own. With
    # at most this many holders per process the pool (5 + 10 overflow) always has connections left for
    # them, so holders never end up waiting on each other for one.
    _lock_holders: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(MAX_CASE_LOCK_HOLDERS), init=False, repr=False
    )

    # ---- opening ----

    async def new_case_id(self, conn: AsyncConnection | None = None) -> str:
        """The next case id; on `conn` when given (say, inside the transaction that claims its event)."""
        if conn is None:
            async with self.engine.begin() as own:
                return await self.new_case_id(own)
        number = (await conn.execute(select(func.nextval("case_number")))).scalar_one()
        return f"CASE-{number:04d}"

    async def register_case(
        self,
        conn: AsyncConnection,
        question: str,
        *,
        requester: str,
        customer_id: str | None = None,
        channel: str | None = None,
        thread_ts: str | None = None,
        status: str = CaseStatus.QUEUED,
        opened_from: str | None = None,
        found_by: str | None = None,
        linked_from: str | None = None,
        case_id: str | None = None,
    ) -> str:
        """Record a new case on the caller's connection and return its id: `queued` until an
        investigation slot runs it. Written in the transaction that claims the request (a Slack event),
        so a claimed request always has its case, and recovery finds it whatever stops the process.
        `opened_from`: `cli:<os account>` for a case opened from the CLI (that OS account may not decide
        it, and the requester is told through the outbox), or the Slack user who opened a linked case.
        `linked_from`: the case whose audit found the overcharge this one is opened for. `case_id`: one
        taken earlier with `new_case_id` on the same transaction (default: the next one)."""
        question = question.strip()
        if not question:
            raise ValueError("the complaint is empty: say what the customer wrote")
        case_id = case_id or await self.new_case_id(conn)
        await conn.execute(
            insert(schema.cases).values(
                id=case_id,
                customer_id=customer_id,
                question=question,
                requester=requester,
                status=status,
                channel=channel,
                thread_ts=thread_ts,
                opened_from=opened_from,
                found_by=found_by,
                linked_from=linked_from,
            )
        )
        details = {"customer_id": customer_id, **({"opened_from": opened_from} if opened_from else {})}
        if found_by:
            details["found_by"] = found_by
        if linked_from:
            details["linked_from"] = linked_from
        if opened_from and opened_from.startswith(CLI_SOURCE):
            await conn.execute(_TELL_REQUESTER, {"case_id": case_id})
        await activity.record(conn, "user", requester, "case.opened", "case", case_id, details)
        return case_id

    async def open_case(
        self,
        question: str,
        *,
        requester: str,
        customer_id: str | None = None,
        channel: str | None = None,
        thread_ts: str | None = None,
        message_ts: str | None = None,
        on_progress: ProgressCallback | None = None,
        case_id: str | None = None,
        opened_from: str | None = None,
        found_by: str | None = None,
    ) -> dict[str, Any]:
        """Run a case's investigation to its end or its pause, and return the case JSON.

        `case_id`: a case registered earlier (queued); without one the case is recorded here. A queued
        case some other run has already taken up (recovery, another process) is not run again.
        `channel`, `thread_ts`, `message_ts`: where the case lives in Slack (its thread, and the message
        that shows its progress and then its card), recorded with the case so any process can find it."""
        if case_id is None:
            async with self.engine.begin() as conn:
                case_id = await self.register_case(
                    conn, question, requester=requester, customer_id=customer_id, channel=channel,
                    thread_ts=thread_ts, opened_from=opened_from, found_by=found_by,
                )  # fmt: skip
        initial: CaseState = {
            "case_id": case_id,
            "customer_id": customer_id,
            "question": question.strip(),
            "requester": requester,
        }
        async with self._case_lock(case_id):
            if not await self._take_up(case_id, message_ts):
                return await self.show_case(case_id)
            await self.settings_in_force()  # the model budget it runs under is the stored one, as it is now
            values = await self.graph.ainvoke(
                initial,
                self._config(case_id),
                context=self._context(on_progress),
                durability=self._investigation_durability(),
            )
            case = await self.sync_case(case_id, values)  # under the lock: no resume can be newer
            log.info("case %s investigated: %s", case_id, case["status"])  # one line per case, for ops
            return case

    async def _take_up(self, case_id: str, message_ts: str | None = None) -> bool:
        """queued → investigating, under the case lock; False when another run already took it up."""
        cases = schema.cases.c
        async with autocommit(self.engine) as conn:  # one UPDATE … RETURNING: a compare-and-set
            taken = await conn.execute(
                update(schema.cases)
                .where(cases.id == case_id, cases.status == CaseStatus.QUEUED)
                .values(
                    status=CaseStatus.INVESTIGATING,
                    message_ts=func.coalesce(message_ts, cases.message_ts),
                    updated_at=func.now(),
                )
                .returning(cases.id)
            )
            return taken.first() is not None

    async def choose_customer(self, case_id: str, customer_id: str, *, by: str) -> bool:
        """A person picked the customer of a case whose message could name several: it is queued to run
        (once: compare-and-set on a case still without one). False when it had one already."""
        cases = schema.cases.c
        async with self.engine.begin() as conn:
            chosen = await conn.execute(
                update(schema.cases)
                .where(
                    cases.id == case_id,
                    cases.status == CaseStatus.NEEDS_CUSTOMER,
                    cases.customer_id.is_(None),
                )
                .values(
                    customer_id=customer_id,
                    status=CaseStatus.QUEUED,
                    found_by="chosen",
                    updated_at=func.now(),
                )
                .returning(cases.id)
            )
            if chosen.first() is None:
                return False
            await activity.record(
                conn, "user", by, "case.customer_chosen", "case", case_id, {"customer_id": customer_id}
            )
        return True

    async def abandon(self, case_id: str, reason: str) -> bool:
        """A queued case that can never be run (its Slack thread cannot be written to): escalated with the
        reason, so recovery does not try it forever. False when it was already taken up."""
        cases = schema.cases.c
        async with self.engine.begin() as conn:
            ended = await conn.execute(
                update(schema.cases)
                .where(cases.id == case_id, cases.status == CaseStatus.QUEUED)
                .values(status=CaseStatus.ESCALATED, escalation_reason=reason, updated_at=func.now())
                .returning(cases.id)
            )
            if ended.first() is None:
                return False
            await activity.record(
                conn,
                "system",
                "billsleuth",
                "case.escalated",
                "case",
                case_id,
                {"from": CaseStatus.QUEUED, "reason": reason},
            )
        return True

    # ---- reading ----

    async def case_row(self, case_id: str) -> Any:
        async with reading(self.engine) as conn:
            return await case_row_in(conn, case_id)

    async def show_case(self, case_id: str) -> dict[str, Any]:
        async with reading(self.engine) as conn:
            row = await case_row_in(conn, case_id)
            model_cost = await case_model_cost(conn, case_id)
            notes = await queries.credit_notes_for_case_in(conn, case_id)  # one checkout for the three
        return case_json(row, notes[-1] if notes else None, model_cost)

    async def state_of(self, case_id: str) -> Any:
        return await self.graph.aget_state(self._config(case_id))

    # ---- deciding ----

    async def decide(
        self,
        credit_note_id: str,
        *,
        approver: str,
        decision: Decision,
        comment: str = "",
        approver_is_bot: bool = False,
        source: str | None = None,
        resume_as: Decision | None = None,
    ) -> tuple[DecisionOutcome, dict[str, Any]]:
        """Claim the decision in the database first (compare-and-set), then resume the paused graph.
        `source`: where the vote came from, `slack:<team id>` or `cli:<os account>` (approvals.source).
        `resume_as`: what the graph hears, when it is more than the vote (a reject that requests changes)."""
        note = await queries.get_credit_note(self.engine, credit_note_id)
        if note.case_id is None:
            raise CaseNotFound(f"{credit_note_id} was not drafted by a case")
        row = await self.case_row(note.case_id)
        try:
            outcome = await decisions.decide(
                self.engine,
                credit_note_id,
                approver=approver,
                decision=decision,
                comment=comment,
                requester=row.requester,
                settings=await self.settings_in_force(),
                approver_is_bot=approver_is_bot,
                source=source,
            )
        except ApprovalRefused as refusal:
            if refusal.rule == Rule.EXPIRED:  # the vote found the draft overdue and expired it
                await self.resume(note.case_id, EXPIRED_RESUME)
            raise
        if outcome.changed:
            await self.resume(note.case_id, Resume(approver, resume_as or decision, comment))
        return outcome, await self.show_case(note.case_id)

    async def request_changes(
        self,
        credit_note_id: str,
        *,
        approver: str,
        question: str,
        approver_is_bot: bool = False,
        source: str | None = None,
    ) -> tuple[DecisionOutcome, dict[str, Any]]:
        """Send the note back with a question: a reject vote (every rule of a vote applies) whose comment is
        the question; the case then waits for the requester's answer (`revision_requested`), or escalates
        after the last round."""
        return await self.decide(
            credit_note_id,
            approver=approver,
            decision=Decision.REJECT,
            comment=question,
            approver_is_bot=approver_is_bot,
            source=source,
            resume_as=Decision.REQUEST_CHANGES,
        )

    async def resubmit(
        self,
        case_id: str,
        *,
        answer: str,
        by: str,
        message_ts: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """The requester's answer to the approver's question: record it, then run the next round (see
        `accept_answer` and `run_round`). Returns the case JSON."""
        await self.accept_answer(case_id, answer=answer, by=by)
        return await self.run_round(case_id, message_ts=message_ts, on_progress=on_progress)

    async def accept_answer(self, case_id: str, *, answer: str, by: str) -> None:
        """Take the answer (once: compare-and-set `revision_requested` → `queued`) and record it in
        activity_log, which is what the next round runs with — so a round a stop interrupts is run again
        by recovery with the same answer. NotWaitingForAnswer when the case is not waiting for one."""
        answer = answer.strip()
        if not answer:
            raise ValueError("the answer is empty: say what the approver asked for")
        cases = schema.cases.c
        async with self.engine.begin() as conn:
            taken = await conn.execute(
                update(schema.cases)
                .where(cases.id == case_id, cases.status == CaseStatus.REVISION_REQUESTED)
                .values(status=CaseStatus.QUEUED, updated_at=func.now())
                .returning(cases.id)
            )
            if taken.first() is None:
                raise NotWaitingForAnswer(f"case {case_id} is not waiting for an answer")
            await activity.record(conn, "user", by, RESUBMITTED, "case", case_id, {"answer": answer})

    async def run_round(
        self, case_id: str, *, message_ts: str | None = None, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Investigate an answered case again (a new round, whose note has a new idempotency key): it
        drafts a new note or explains. `message_ts`: the Slack message showing this round. Case JSON."""
        async with self._case_lock(case_id):
            answer = await self._pending_answer(case_id)
            if answer is None or not await self._take_up(case_id, message_ts):
                return await self.show_case(case_id)
            values = await self._next_round(case_id, *answer, on_progress)
            return await self.sync_case(case_id, values)

    async def _next_round(
        self, case_id: str, answer: str, by: str, on_progress: ProgressCallback | None
    ) -> dict[str, Any]:
        """Investigate again with the complaint and every answer so far; what the last round concluded
        (its note, findings, reply) is cleared so nothing of it is mistaken for this round's."""
        row = await self.case_row(case_id)
        previous = (await self.state_of(case_id)).values
        rounds = list(previous.get("rounds", []))
        rounds[-1] = {**rounds[-1], "answer": answer, "answered_by": by}
        again: CaseState = {
            "case_id": case_id,
            "customer_id": row.customer_id,
            "question": row.question,
            "requester": row.requester,
            "round": previous.get("round", 1) + 1,
            "rounds": rounds,
            "credit_note": None,
            "findings": None,
            "verified": False,
            "reply": None,
            "escalation_reason": None,
        }
        await self.settings_in_force()
        return await self.graph.ainvoke(  # type: ignore[no-any-return]
            again,
            self._config(case_id),
            context=self._context(on_progress),
            durability=self._investigation_durability(),
        )

    async def _pending_answer(self, case_id: str) -> tuple[str, str] | None:
        """The last answer recorded for the case (answer, by): what an interrupted round was run with."""
        log_ = schema.activity_log.c
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(log_.details, log_.actor_id)
                    .where(log_.entity_id == case_id, log_.action == RESUBMITTED)
                    .order_by(log_.id.desc())
                    .limit(1)
                )
            ).first()
        return (str(row.details["answer"]), str(row.actor_id)) if row is not None else None

    async def cancel(
        self,
        credit_note_id: str,
        *,
        approver: str,
        reason: str,
        approver_is_bot: bool = False,
        source: str | None = None,
    ) -> tuple[DecisionOutcome, dict[str, Any]]:
        """Cancel an approved note that was never issued (held, or refused at issue); its case rewrites the
        customer reply as for a reject, and its invoice is free for a new case."""
        note = await queries.get_credit_note(self.engine, credit_note_id)
        if note.case_id is None:
            raise CaseNotFound(f"{credit_note_id} was not drafted by a case")
        row = await self.case_row(note.case_id)
        outcome = await cancelling.cancel(
            self.engine,
            credit_note_id,
            approver=approver,
            reason=reason,
            requester=row.requester,
            settings=await self.settings_in_force(),
            approver_is_bot=approver_is_bot,
            source=source,
        )
        if outcome.changed:
            await self.take_note_outcome(note.case_id, Resume(approver, Decision.CANCEL, reason))
        return outcome, await self.show_case(note.case_id)

    async def settings_in_force(self) -> ApprovalSettings:
        """The policy to decide by: the stored one as it is now, when this service follows it (another
        bot's start or `policy apply` may have changed it since this process began)."""
        if self.follows_stored_policy:
            stored = await policy_store.read_policy(self.engine)
            if stored is not None:
                self.approval_settings = stored
        return self.approval_settings

    async def take_note_outcome(self, case_id: str, decision: Resume) -> bool:
        """Let the case take its note's outcome: resume it when it is waiting; a case that already ended
        with its note approved (an escalated case whose issue was refused, then cancelled) is rewritten in
        place, so its reply promises no money either."""
        if await self.resume(case_id, decision):
            return True
        async with self._case_lock(case_id):
            state = await self.state_of(case_id)
            note = await queries.credit_note_for_case(self.engine, case_id)
            values = state.values
            if (
                state.next
                or note is None
                or note.status not in NO_MONEY
                or values.get("status") != CaseStatus.ESCALATED
            ):
                return False
            from agent.graph.graph import settled_on_note  # a graph is running: LangGraph is loaded already

            heard = [*values.get("decisions", []), decision.to_dict()]
            ended = {"decisions": heard, **settled_on_note(values, note)}
            await self.graph.aupdate_state(self._config(case_id), ended, as_node=WAITING_NODE)
            await self.sync_case(case_id)
        return True

    async def resume(self, case_id: str, decision: Resume) -> bool:
        """Resume a case waiting for approval; one resumer at a time per case (advisory lock).

        LangGraph does not stop two concurrent resumes of one thread, and resuming a thread that is not
        waiting would start a fresh run — so check it is waiting, under the lock, every time.
        """
        async with self._case_lock(case_id):
            state = await self.state_of(case_id)
            if WAITING_NODE not in (state.next or ()):
                log.info("case %s is not waiting for approval; not resuming", case_id)
                return False
            from langgraph.types import Command  # loaded by the graph already; not at import time

            values = await self.graph.ainvoke(
                Command(resume=decision.to_dict()),
                self._config(case_id),
                context=self._context(None),
                durability="sync",
            )
            await self.sync_case(case_id, values)
        return True

    async def expire_overdue(self, now: datetime | None = None) -> list[str]:
        """Mark overdue drafts expired and let their cases rewrite the customer reply. Held notes stay
        held: only the bot's sweep releases them, because only it redraws their cards."""
        expired = await expiry.expire_overdue(self.engine, now)
        await self.settle_waiting_cases(release_held=False)
        return expired

    async def sweep(self, now: datetime | None = None) -> Sweep:
        """The bot's periodic chores: expire overdue drafts, resume every waiting case whose note was
        settled meanwhile or can now leave the daily limit's hold (see `settle_waiting_cases`), and cancel
        notes the daily limit has held longer than the hold limit."""
        expired = await expiry.expire_overdue(self.engine, now)
        settled = await self.settle_waiting_cases()
        settings = await self.settings_in_force()
        held, refused = await self.held_too_long(settings, now)
        cancelled = await cancelling.cancel_held_too_long(self.engine, held, settings, now)
        if cancelled:  # their cases rewrite the customer reply
            settled += await self.settle_waiting_cases(release_held=False)
        ended = await cancelling.cancel_held_too_long(self.engine, list(refused), settings, now, refused=True)
        for note_id in ended:  # their cases escalated: rewritten in place, the reply promising nothing
            if await self.take_note_outcome(refused[note_id], HOLD_LIMIT_PASSED):
                settled.append(refused[note_id])
        return Sweep(expired, settled, cancelled + ended)

    async def held_too_long(
        self, settings: ApprovalSettings, now: datetime | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """Approved notes never issued for longer than the hold limit, counted from their approval (the
        moment they could first have been issued), oldest first: those the daily limit holds now
        (approvals.holds; `now` moves only the hold clock: today's room is today's, as when releasing), and
        those refused at issue that nobody cancelled (note id → its case)."""
        cutoff = (now or datetime.now(UTC)) - timedelta(days=settings.hold_max_days)
        notes, cases = schema.credit_notes.c, schema.cases.c
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(
                        notes.id,
                        notes.status,
                        notes.amount,
                        notes.currency,
                        notes.case_id,
                        cases.status.label("case_status"),
                    )
                    .join(schema.cases, cases.id == notes.case_id)
                    .where(notes.status == NoteStatus.APPROVED, notes.decided_at <= cutoff)
                    .order_by(notes.decided_at, notes.id)
                )
            ).all()
            held = [
                row.id
                for row in rows
                if await holds.held_by_daily_limit(
                    conn, row, case_waits=row.case_status == CaseStatus.AWAITING_APPROVAL, settings=settings
                )
            ]
        refused = {row.id: row.case_id for row in rows if refused_at_issue(row.status, row.case_status)}
        return held, refused

    async def settle_waiting_cases(self, *, release_held: bool = True) -> list[str]:
        """Resume every case still waiting whose credit note was decided or expired meanwhile (by a sweep,
        by a vote that found it overdue, or by a process that stopped before resuming), and — with
        `release_held` — those whose approved note the daily credit limit held back and now has room for.
        Oldest first, so a held note is not overtaken by newer ones when the day's room is scarce.

        The stored policy is read first: another process may have lowered the daily limit since this one
        last looked, and a held note must leave (or not) by the limit in force, not a remembered one."""
        await self.settings_in_force()
        async with reading(self.engine) as conn:
            waiting = list((await conn.execute(_WAITING_ON_A_DECIDED_NOTE)).scalars())
        settled = []
        for case_id in waiting:
            try:  # one broken case must not keep the others waiting
                if await self._settle(case_id, release_held):
                    settled.append(case_id)
            except Exception:
                log.exception("could not settle waiting case %s", case_id)
        return settled

    async def _settle(self, case_id: str, release_held: bool) -> bool:
        note = await queries.credit_note_for_case(self.engine, case_id)
        if note is None or note.status == NoteStatus.DRAFT:
            return False
        if note.status == NoteStatus.APPROVED and (not release_held or await self._held(note)):
            return False  # held: without room today, resuming would only record the same hard stop again
        settled = Resume.by_system(note.status)
        return await self.resume(case_id, settled) or await self._catch_up(case_id)

    async def _held(self, note: CreditNoteView) -> bool:
        """Whether the daily limit holds a waiting case's approved note (approvals.holds)."""
        async with reading(self.engine) as conn:
            return await holds.held_by_daily_limit(
                conn, note, case_waits=True, settings=self.approval_settings
            )

    async def _catch_up(self, case_id: str) -> bool:
        """A stop between the graph's last checkpoint and the cases row leaves the row behind (say, still
        waiting for approval with its note issued): copy the graph's end into it. True when it did."""
        async with self._case_lock(case_id):
            state = await self.state_of(case_id)
            ended = state.values.get("status")
            if state.next or ended in (None, CaseStatus.AWAITING_APPROVAL):
                return False
            if (await self.case_row(case_id)).status == ended:
                return False
            await self.sync_case(case_id)
        return True

    async def prune_finished(self, older_than: timedelta = FINISHED_CHECKPOINT_RETENTION) -> list[str]:
        """Delete the graph checkpoints of cases finished longer ago than `older_than`.

        The OSS Postgres saver keeps every checkpoint forever; a finished case never resumes, and its
        outcome stays in the cases row, the audit log and the activity log.
        """
        cutoff = datetime.now(UTC) - older_than
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(schema.cases.c.id).where(
                    schema.cases.c.status.in_(FINISHED), schema.cases.c.updated_at < cutoff
                )
            )
            finished = list(rows.scalars())
        pruned = []
        for case_id in finished:
            if (await self.state_of(case_id)).values:
                await self.graph.adelete_thread(case_id)
                pruned.append(case_id)
        return pruned

    # ---- recovery ----

    async def recover(self, *, idle_for: timedelta | None = None) -> list[str]:
        """Run the cases a stop left queued or investigating, and deliver decisions not yet applied.

        At start every such case is taken up (one a live process is running holds its lock and is left
        alone); the periodic sweep passes `idle_for`, so it takes up only cases nobody has touched for
        that long, never one a live process still has waiting for an investigation slot."""
        recovered = [
            case_id for case_id in await self.unfinished_cases(idle_for) if await self._finish(case_id)
        ]
        recovered += await self.settle_waiting_cases()
        return recovered

    async def unfinished_cases(self, idle_for: timedelta | None = None) -> list[str]:
        """Cases queued or investigating (untouched for `idle_for`, when given), oldest first."""
        cases = schema.cases.c
        query = select(cases.id).where(cases.status.in_(UNFINISHED))
        if idle_for is not None:
            query = query.where(cases.updated_at < func.now() - idle_for)
        async with self.engine.connect() as conn:
            return list((await conn.execute(query.order_by(cases.created_at, cases.id))).scalars())

    async def _finish(self, case_id: str) -> bool:
        row = await self.case_row(case_id)
        if row.status not in UNFINISHED:
            return False  # finished since we looked
        state = await self.state_of(case_id)
        return await self._finish_interrupted(row, state.values, tuple(state.next or ()))

    async def retry_interrupted(self, case_id: str) -> dict[str, Any]:
        """Run a case again whose run failed part-way (say, on a connection a Postgres restart ended): from
        its last checkpoint, or from the top when it has none. Returns the case JSON. A case that was
        never recorded raises CaseNotFound: open it instead."""
        row = await self.case_row(case_id)
        state = await self.state_of(case_id)
        await self._finish_interrupted(row, state.values, tuple(state.next or ()))
        return await self.show_case(case_id)

    async def _finish_interrupted(self, row: Any, values: dict[str, Any], pending: tuple[str, ...]) -> bool:
        """Run an interrupted investigation to its end, unless a live process is running it right now."""
        async with self._case_lock(row.id, wait=False) as taken:
            if not taken:
                return False
            if row.status == CaseStatus.QUEUED and not await self._take_up(row.id):
                return False  # taken up and finished since we looked
            await self.settings_in_force()
            if not values:  # stopped before the first checkpoint: start over
                initial: CaseState = {
                    "case_id": row.id,
                    "customer_id": row.customer_id,
                    "question": row.question,
                    "requester": row.requester,
                }
                await self.graph.ainvoke(
                    initial,
                    self._config(row.id),
                    context=self._context(None),
                    durability=self._investigation_durability(),
                )
            elif pending and WAITING_NODE not in pending:
                await self.graph.ainvoke(
                    None, self._config(row.id), context=self._context(None), durability="sync"
                )
            elif values.get("status") == CaseStatus.REVISION_REQUESTED:  # the next round never finished
                answer = await self._pending_answer(row.id)
                if answer is not None:
                    await self._next_round(row.id, *answer, None)
        await self.sync_case(row.id)
        return True

    # ---- internals ----

    async def sync_case(self, case_id: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        """Copy the graph's outcome into the cases row (the quick-read summary) and return the case JSON.

        `values`: the state a graph run under this case's lock just returned; else the last checkpoint's."""
        if values is None:
            values = (await self.state_of(case_id)).values
        status = values.get("status") or CaseStatus.INVESTIGATING
        async with self.engine.begin() as conn:
            before = (
                await conn.execute(select(schema.cases.c.status).where(schema.cases.c.id == case_id))
            ).scalar_one()
            row = (
                await conn.execute(
                    update(schema.cases)
                    .where(schema.cases.c.id == case_id)
                    .values(
                        customer_id=values.get("customer_id"),
                        status=status,
                        findings=_stored_findings(values),
                        reply=values.get("reply"),
                        escalation_reason=values.get("escalation_reason"),
                        updated_at=func.now(),
                    )
                    .returning(*schema.cases.c)
                )
            ).one()
            if before != status:
                details = {"from": before, "reason": values.get("escalation_reason")}
                if status == CaseStatus.REVISION_REQUESTED:  # the round sent back, and the question asked
                    details["round"] = (values.get("rounds") or [None])[-1]
                await activity.record(
                    conn, "system", "billsleuth", f"case.{status}", "case", case_id, details
                )
        # Read after the commit: an activity row holds the log's head until its transaction ends, and
        # every other appender (both processes) waits for it. Still under the case lock.
        async with reading(self.engine) as conn:
            notes = await queries.credit_notes_for_case_in(conn, case_id)
            model_cost = await case_model_cost(conn, case_id)
        return case_json(row, notes[-1] if notes else None, model_cost)

    def _investigation_durability(self) -> Durability:
        """How often an investigation run is checkpointed, up to its pause or end.

        A model's steps cost tokens and minutes to redo: checkpoint each one before the next starts. The
        offline auditor redoes a whole run in milliseconds with the same result, so its run is written
        once, when it pauses, ends or fails (a failure is checkpointed where it happened). A process killed
        mid-run leaves no checkpoint, and recovery runs the case again from the top: its tool calls are
        then on the trail twice (both runs happened), and drafting's idempotency key returns the same note
        for the same verified amount. Resuming after a decision (which issues money) is always
        checkpointed step by step.
        """
        return "sync" if self.configuration.investigator == "llm" else "exit"

    def _config(self, case_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": case_id}, "recursion_limit": 50}

    def _context(self, on_progress: ProgressCallback | None) -> CaseContext:
        return CaseContext(self.engine, self._configuration_in_force(), self.approval_settings, on_progress)

    def _configuration_in_force(self) -> Configuration:
        """Model spend rules are policy (issue 25 item 6): a service that follows the stored policy runs
        models under its budget and prices, whatever this process's own environment says."""
        if not self.follows_stored_policy:
            return self.configuration
        spend = SpendSettings.of_policy(self.approval_settings)
        return self.configuration.model_copy(update={"spend": spend})

    @asynccontextmanager
    async def _case_lock(self, case_id: str, *, wait: bool = True) -> AsyncIterator[bool]:
        """Hold the case's advisory lock (one graph run per case across processes); yields whether it
        was taken — always True when waiting, False when `wait=False` and another process holds it."""
        key = locks.case(case_id)
        # A session-level lock needs no transaction: in autocommit, no BEGIN and COMMIT around the run.
        async with self._lock_holders, autocommit(self.engine) as conn:
            if wait:
                await locks.session_lock(conn, key)
                taken = True
            else:
                taken = await locks.try_session_lock(conn, key)
            try:
                with bind(case_id=case_id):  # every log line of this run names the case
                    yield taken
            finally:
                if taken:
                    await locks.session_unlock(conn, key)
                await conn.commit()


# Built once: every card draw and every step of a case reads its row, several times a mention.
_CASE_ROW = select(schema.cases).where(schema.cases.c.id == bindparam("case_id"))


async def case_row_in(conn: AsyncConnection, case_id: str) -> Any:
    """The case's row, read on the caller's connection. Unknown id → CaseNotFound."""
    row = (await conn.execute(_CASE_ROW, {"case_id": case_id})).first()
    if row is None:
        raise CaseNotFound(f"no case {case_id!r}")
    return row


def case_json(
    row: Any, note: CreditNoteView | None, model_cost: dict[str, Any] | None = None
) -> dict[str, Any]:
    """DESIGN.md's case shape. A model-backed case also carries `model_cost` (`{input_tokens,
    output_tokens, cost}`, agent/model/costs.py); a case the offline auditor took over from the model (the
    month's model budget) carries `investigator_note` saying so."""
    findings = row.findings
    shown = {
        "case_id": row.id,
        "customer_id": row.customer_id,
        "status": row.status,
        "findings": (
            {
                key: findings[key]
                for key in ("root_cause", "invoice_ids", "overcharge", "expected_action", "reasoning")
            }
            if findings
            else None
        ),
        # An explaining round after a note was sent back has no note of its own.
        "credit_note": note.summary() if note and row.status not in NOTE_LESS else None,
        "reply": row.reply,
        "escalation_reason": row.escalation_reason,
        "requester": row.requester,  # who asked: a Slack id (from the CLI, --as names it)
        "other_findings": [
            {key: other[key] for key in ("invoice_id", "root_cause", "overcharge")}
            for other in (findings or {}).get("other_findings", [])
        ],
    }
    if model_cost is not None:
        shown["model_cost"] = model_cost
    if (findings or {}).get("investigator_note"):
        shown["investigator_note"] = findings["investigator_note"]
    return shown


def _stored_findings(values: dict[str, Any]) -> dict[str, Any] | None:
    """The findings the cases row keeps: verified ones only, with the account's other verified
    overcharges beside them (the row's findings JSONB holds both; no column of their own)."""
    if not values.get("verified") or not values.get("findings"):
        return None
    stored = {**values["findings"], "other_findings": list(values.get("other_findings") or [])}
    if values.get("investigator_note"):  # why the offline auditor investigated (the model budget)
        stored["investigator_note"] = values["investigator_note"]
    return stored


# How a service comes by its policy (see `case_service`).
FIXED, COMMAND, BOT_START = "fixed", "command", "bot start"


@asynccontextmanager
async def case_service(
    libpq_url: str,
    configuration: Configuration | None = None,
    approval_settings: ApprovalSettings | None = None,
    *,
    policy: str | None = None,
    actor: str = activity.BILLSLEUTH,
) -> AsyncIterator[CaseService]:
    """A ready CaseService on this database: its engine now; its graph and checkpointer pool when a case
    first needs them (a read command never does).

    `policy` — how it comes by the policy it enforces; `approval_settings` (default: the environment's)
    are this process's own:
    - COMMAND (the default without settings): the database's stored policy; when there is none yet, its
      own is stored first (by `actor`). Where its own disagrees is in `policy_differences`, for a warning.
    - BOT_START: its own is proposed as the stored policy (by `actor`): what narrows power applies at
      once, what widens it waits for an approver's consent in Slack (approvals.policy_store.propose); the
      stored policy is then enforced.
    - FIXED (the default with settings): exactly the given settings, the store neither read nor written
      (tests and the evaluation, which pin their own policy).
    """
    mode = policy or (FIXED if approval_settings is not None else COMMAND)
    own = approval_settings or ApprovalSettings.from_env()
    engine = create_engine(libpq_url, pool_size=POOL_CONNECTIONS, max_overflow=0)
    try:
        settings, differences = await _policy_for(engine, own, mode, actor)
        # The checkpointer's pool once a graph runs; the model clients (shared by every case) once a case
        # asks a model, closed when the service closes.
        async with AsyncExitStack() as graph_resources, model_clients_held():
            yield CaseService(
                engine,
                LazyGraph(libpq_url, graph_resources),
                configuration or Configuration.from_env(),
                settings,
                follows_stored_policy=mode != FIXED,
                policy_differences=differences,
            )
    finally:
        await engine.dispose()


async def _policy_for(
    engine: AsyncEngine, own: ApprovalSettings, mode: str, actor: str
) -> tuple[ApprovalSettings, tuple[policy_store.Difference, ...]]:
    if mode == FIXED:
        return own, ()
    if mode == BOT_START:  # its environment is a proposal: what widens power waits for consent
        proposal = await policy_store.propose(
            engine,
            own,
            proposer=actor,
            source=policy_store.BOT_START,
            why=policy_store.BOT_START,
            on_apply=budget.apply_policy_change,
        )
        if proposal.pending is not None:
            log.warning(
                "this environment's policy widens power: policy change #%s waits for an approver's "
                "consent in Slack; until then the stored policy holds",
                proposal.pending.id,
            )
        return proposal.settings, proposal.differences
    if mode != COMMAND:
        raise ValueError(f"policy must be {FIXED!r}, {COMMAND!r} or {BOT_START!r}, not {mode!r}")
    in_force = await policy_store.policy_in_force(engine, own, actor_type=activity.USER, actor_id=actor)
    return in_force.settings, in_force.differences
