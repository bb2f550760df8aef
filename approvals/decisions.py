"""Votes on a credit note, and the compare-and-set that resolves it.

Who may vote: a Slack user ID on BILLSLEUTH_APPROVERS, never a bot, never the literal "agent", never the
person who opened the case. One vote each; at or above the threshold two distinct people must approve;
a reject needs a reason and ends the note at once.

Where from: every vote records its source (`slack:<team id>` or `cli:<os account>`, the process's real
account: approvals.identity). The CLI is a break-glass door, shut unless the stored policy opens it
(`cli_decisions`); the OS account who opened a case from the CLI cannot decide it from the CLI under any
Slack id, and one OS account casts at most one vote on a note, whatever `--as` says.

Concurrency: a vote locks the note row (FOR UPDATE) before counting, so two approvers clicking at the
same moment are counted one after the other, never both as "the first of two". The status change
itself is a conditional UPDATE … WHERE status = 'draft', so a decision never overwrites another.
That locked read is the vote's only read of the note: a vote cast from a card is checked against the
card there too (is the note still a draft, is the card current: NoteMovedOn), and the outcome names
the note's case.

Refusals roll back whatever the vote had started and are then recorded on their own in activity_log.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.config import ApprovalSettings, is_slack_user_id
from approvals.expiry import expire_if_overdue
from approvals.models import (
    CLI_SOURCE,
    ApprovalRefused,
    Decision,
    DecisionOutcome,
    NoCase,
    NoteMovedOn,
    NoteStatus,
    Rule,
    Vote,
)
from approvals.policy import note_args_hash, utc_now
from approvals.queries import note_row_in, to_view, votes_in
from engine import schema as t
from engine.logcontext import bind

OUTCOME = {Decision.APPROVE: NoteStatus.APPROVED, Decision.REJECT: NoteStatus.REJECTED}
# Statuses that already carry a decision's outcome: issuing is what follows an approval.
SAME_OUTCOME = {
    Decision.APPROVE: (NoteStatus.APPROVED, NoteStatus.ISSUED),
    Decision.REJECT: (NoteStatus.REJECTED,),
}


class _Overdue(Exception):
    """Under the note's lock the draft turned out to be past its expiry; nothing of the vote is kept."""

    def __init__(self, at: datetime) -> None:
        super().__init__(f"overdue at {at.isoformat()}")
        self.at = at


class _AlreadyResolved(Exception):
    """The compare-and-set found the note decided by someone else: undo our vote, report the outcome."""

    def __init__(self, outcome: DecisionOutcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@dataclass(frozen=True)
class Ballot:
    """One person's vote as cast, before any rule has looked at it."""

    credit_note_id: str
    approver: str
    decision: str
    comment: str
    requester: str | None
    approver_is_bot: bool
    source: str | None = None  # slack:<team id> or cli:<os account>; None: a caller that did not say
    seen_revision: int | None = None  # cast from a card at this revision; None: not from a card
    seen_at: datetime | None = None  # when that vote arrived: what landed later was not on its card
    case_required: bool = False  # the note must have been drafted by a case (NoCase otherwise)

    @property
    def from_cli(self) -> bool:
        return bool(self.source) and str(self.source).startswith(CLI_SOURCE)

    @property
    def actor_type(self) -> str:
        if self.approver_is_bot:
            return activity.BOT
        return activity.AGENT if self.approver.strip().lower() == "agent" else activity.USER


async def decide(
    engine: AsyncEngine,
    credit_note_id: str,
    *,
    approver: str,
    decision: str,
    comment: str = "",
    requester: str | None,
    settings: ApprovalSettings,
    approver_is_bot: bool = False,
    source: str | None = None,
    now: datetime | None = None,
    seen_revision: int | None = None,
    case_required: bool = False,
) -> DecisionOutcome:
    """Record one person's approve/reject and resolve the note when the vote settles it.

    Returns the outcome; `changed` is False when the note already had this outcome (a no-op).
    Raises ApprovalRefused(rule, message) when a rule says no (recorded; nothing else changes),
    UnknownCreditNote (a LookupError) for an unknown id, ValueError for a decision other than
    approve/reject. A draft past its expiry is marked expired first, then the vote is refused.
    `seen_revision`: the vote was cast from a card at this revision; a note no longer a draft, or a
    card behind it, raises NoteMovedOn before any rule looks at the vote (nothing recorded).
    `case_required`: a note drafted outside a case raises NoCase, before anything is recorded.
    """
    with bind(credit_note_id=credit_note_id):
        if decision not in OUTCOME:
            raise ValueError(f"decision must be 'approve' or 'reject', not {decision!r}")
        ballot = Ballot(
            credit_note_id,
            approver,
            decision,
            (comment or "").strip(),
            requester,
            approver_is_bot,
            source,
            seen_revision,
            (now or utc_now()) if seen_revision is not None else None,
            case_required,
        )
        try:
            try:
                return await _claim(engine, ballot, settings, now)
            except _Overdue as overdue:
                # Expired on its own (it stays expired whatever the vote), then the vote is judged on
                # the expired note: a rule that refuses the voter still speaks first, then "expired".
                await expire_if_overdue(engine, credit_note_id, overdue.at)
                return await _claim(engine, replace(ballot, seen_revision=None), settings, now)
        except _AlreadyResolved as resolved:
            return resolved.outcome
        except ApprovalRefused as refusal:
            await record_refused(engine, ballot, refusal)
            raise


async def _claim(
    engine: AsyncEngine, ballot: Ballot, settings: ApprovalSettings, now: datetime | None
) -> DecisionOutcome:
    async with engine.begin() as conn:
        return await _count_vote(conn, ballot, settings, now)


async def record_refused(engine: AsyncEngine, ballot: Ballot, refusal: ApprovalRefused) -> None:
    """A refused decision leaves one activity row, in its own transaction, and nothing else."""
    await activity.record_refusal(
        engine,
        ballot.actor_type,
        ballot.approver,
        "approval.refused",
        "credit_note",
        ballot.credit_note_id,
        rule=refusal.rule,
        message=refusal.message,
        details={"decision": ballot.decision, "comment": ballot.comment, "source": ballot.source},
    )


async def _count_vote(
    conn: AsyncConnection, ballot: Ballot, settings: ApprovalSettings, now: datetime | None
) -> DecisionOutcome:
    note = await note_row_in(conn, ballot.credit_note_id, lock=True)
    votes = await votes_in(conn, note.id)
    _check_seen(ballot, note, votes)
    now = now or utc_now()  # the vote counts at the moment it holds the note, not when it was cast
    if note.status == NoteStatus.DRAFT and note.expires_at is not None and note.expires_at <= now:
        raise _Overdue(now)
    check_identity(ballot, settings)
    await check_not_requester(conn, ballot, note.case_id)
    if ballot.decision == Decision.REJECT and not ballot.comment:
        raise ApprovalRefused(Rule.REASON_REQUIRED, "a reject needs a reason")
    if note.status != NoteStatus.DRAFT:
        return _settled(note, ballot.decision, votes)
    if note_args_hash(note) != note.args_hash:
        raise ApprovalRefused(
            Rule.ARGS_MISMATCH,
            f"{note.id} was changed after it was drafted; it cannot be decided as it stands",
        )
    if any(v.approver == ballot.approver for v in votes):
        raise ApprovalRefused(
            Rule.ONE_VOTE_EACH, f"{ballot.approver} has already voted on {note.id}; it needs someone else"
        )
    check_one_vote_per_os_account(ballot, votes, note.id)
    await _insert_vote(conn, note, ballot, now)
    approvals = len(current_approvals(votes, settings)) + (ballot.decision == Decision.APPROVE)
    if ballot.decision == Decision.APPROVE and approvals < note.needed:
        waiting = f"Approval recorded for {note.id}: {approvals} of {note.needed}; it needs another approver"
        return DecisionOutcome(note.id, NoteStatus.DRAFT, approvals, note.needed, True, waiting, note.case_id)
    await _resolve(conn, note, ballot, approvals, now)
    done = _resolved_message(note.id, ballot)
    return DecisionOutcome(
        note.id, OUTCOME[ballot.decision], approvals, note.needed, True, done, note.case_id
    )


def _check_seen(ballot: Ballot, note: Row[Any], votes: list[Vote]) -> None:
    """Before any rule looks at the vote: a vote from a card needs the note still a draft and the card
    current; a decision that needs a case needs the note to have one.

    The card is judged as the note was when the vote arrived: a vote or a decision that landed while
    this one waited for the lock was on no card it could have seen, so two approvers clicking at once
    are still counted one after the other, and a note decided meanwhile is left to the rules (a no-op
    for the same outcome, else a conflict)."""
    if ballot.seen_revision is not None and ballot.seen_at is not None:
        arrived = ballot.seen_at
        if note.status != NoteStatus.DRAFT:
            if note.decided_at is None or note.decided_at <= arrived:
                raise NoteMovedOn(to_view(note, votes))
        elif ballot.seen_revision < to_view(note, [v for v in votes if v.decided_at <= arrived]).revision:
            raise NoteMovedOn(to_view(note, votes))
    if ballot.case_required and note.case_id is None:
        raise NoCase(f"{note.id} was not drafted by a case")


def check_identity(ballot: Ballot, settings: ApprovalSettings) -> None:
    if ballot.from_cli and not settings.cli_decisions:
        raise ApprovalRefused(
            Rule.CLI_DECISIONS_OFF,
            "decisions from the CLI are off in the stored policy; decide in Slack "
            "(or start the bot with BILLSLEUTH_CLI_DECISIONS=on)",
        )
    approver = ballot.approver
    if approver.strip().lower() == "agent":
        raise ApprovalRefused(
            Rule.AGENT_CANNOT_APPROVE, "the agent cannot approve credit notes; a person must"
        )
    if ballot.approver_is_bot:
        raise ApprovalRefused(Rule.APPROVER_IS_BOT, f"{approver} is a bot; only people can approve")
    if not is_slack_user_id(approver):
        raise ApprovalRefused(Rule.APPROVER_ID, f"{approver!r} is not a Slack user ID (like U012AB3CD)")
    if approver not in settings.approvers:
        raise ApprovalRefused(Rule.NOT_AN_APPROVER, f"{approver} is not on BILLSLEUTH_APPROVERS")


async def check_not_requester(conn: AsyncConnection, ballot: Ballot, case_id: str | None) -> None:
    """The caller names the requester; the case row, when there is one, is checked as well. From the
    CLI the OS account counts too: whoever opened the case from a shell (`cli:<os account>`, under any
    `--as`) cannot decide it from that shell under any Slack id."""
    approver = ballot.approver
    requesters = {ballot.requester} if ballot.requester else set()
    if case_id is not None:
        cases = t.cases.c
        found = (
            await conn.execute(select(cases.requester, cases.opened_from).where(cases.id == case_id))
        ).first()
        if found is not None:
            requesters |= {who for who in found if who}
        elif ballot.case_required:  # the note names a case that is gone: nothing to resume
            raise NoCase(f"{ballot.credit_note_id} names case {case_id}, which does not exist")
    if approver in requesters:
        raise ApprovalRefused(
            Rule.REQUESTER_CANNOT_APPROVE,
            f"{approver} opened this case and cannot also decide its credit note",
        )
    if ballot.from_cli and ballot.source in requesters:
        raise ApprovalRefused(
            Rule.REQUESTER_CANNOT_APPROVE,
            f"{ballot.source} opened this case and cannot also decide its credit note, under any --as",
        )


def check_one_vote_per_os_account(ballot: Ballot, votes: list[Vote], credit_note_id: str) -> None:
    """`--as` is only a claim: whoever holds one OS account is one person, so a note counts one CLI vote
    from it, whichever Slack ids it names. Read under the note's row lock, like the other vote checks, so
    two such votes at once are counted one after the other."""
    if not ballot.from_cli:
        return
    earlier = next((v for v in votes if v.source == ballot.source), None)
    if earlier is not None:
        account = str(ballot.source)[len(CLI_SOURCE) :]
        raise ApprovalRefused(
            Rule.ONE_VOTE_PER_OS_ACCOUNT,
            f"the OS account {account} has already voted on {credit_note_id} from the CLI (as "
            f"{earlier.approver}); one OS account counts once, whatever --as says",
        )


def _expired(credit_note_id: str) -> ApprovalRefused:
    return ApprovalRefused(Rule.EXPIRED, f"{credit_note_id} expired undecided; draft it again to decide it")


def current_approvals(votes: list[Vote], settings: ApprovalSettings) -> list[Vote]:
    """The approve votes that still carry weight: those of people on the approver list today. A vote
    stays on record when its author leaves finance, but no longer moves money."""
    return [v for v in votes if v.decision == Decision.APPROVE and v.approver in settings.approvers]


def _settled(note: Row[Any], decision: str, votes: list[Vote]) -> DecisionOutcome:
    """The note is no longer a draft: the same outcome again is a no-op, another one a conflict."""
    if note.status == NoteStatus.EXPIRED:
        raise _expired(note.id)
    if note.status not in SAME_OUTCOME[decision]:
        raise ApprovalRefused(
            Rule.CONFLICT,
            f"{note.id} is already {note.status}; a {decision} now would contradict that decision",
        )
    approvals = sum(v.decision == Decision.APPROVE for v in votes)
    return DecisionOutcome(
        note.id,
        note.status,
        approvals,
        note.needed,
        False,
        f"{note.id} is already {note.status}; nothing changed",
        note.case_id,
    )


async def _insert_vote(conn: AsyncConnection, note: Row[Any], ballot: Ballot, now: datetime) -> None:
    decision, comment = ballot.decision, ballot.comment
    await conn.execute(
        insert(t.approvals).values(
            credit_note_id=note.id,
            approver=ballot.approver,
            decision=decision,
            comment=comment,
            args_hash=note.args_hash,  # the vote is bound to exactly these arguments
            decided_at=now,
            source=ballot.source,
        )
    )
    await activity.record(
        conn,
        ballot.actor_type,
        ballot.approver,
        "approval.recorded",
        "credit_note",
        note.id,
        {"decision": decision, "comment": comment, "args_hash": note.args_hash, "source": ballot.source},
    )


async def _resolve(
    conn: AsyncConnection, note: Row[Any], ballot: Ballot, approvals: int, now: datetime
) -> None:
    """Compare-and-set draft → outcome. Under our row lock it cannot miss; if it ever does (someone
    resolved the note without taking the lock), nothing of ours is kept and the outcome is re-read."""
    decision = ballot.decision
    target = OUTCOME[decision]
    cas = (
        update(t.credit_notes)
        .where(t.credit_notes.c.id == note.id, t.credit_notes.c.status == NoteStatus.DRAFT)
        .values(status=target, decided_at=now)
        .returning(t.credit_notes.c.id)
    )
    if (await conn.execute(cas)).first() is None:
        current = await note_row_in(conn, note.id)
        raise _AlreadyResolved(_settled(current, decision, await votes_in(conn, note.id)))
    await activity.record(
        conn,
        ballot.actor_type,
        ballot.approver,  # whose vote settled it
        f"credit_note.{target}",
        "credit_note",
        note.id,
        {"approvals": approvals, "needed": note.needed, "amount": note.amount, "invoice_id": note.invoice_id},
    )


def _resolved_message(credit_note_id: str, ballot: Ballot) -> str:
    if ballot.decision == Decision.REJECT:
        return f"{credit_note_id} rejected: {ballot.comment}"
    return f"{credit_note_id} approved"
