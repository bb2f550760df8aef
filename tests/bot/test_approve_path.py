"""One Approve click through the real Bolt app (signed block action → listener → flow → the case's verbs →
approvals → the graph's settle → the card's redraw): how often it reads its credit note's row, and which of
our modules the note's id walks through (issue 26). Run this file with `-s` to see the numbers."""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any

import greenlet
import pytest
from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import queries
from approvals.models import CreditNoteView, Decision, NoteStatus, Vote
from bot.cards import APPROVE_ACTION_ID
from bot.flows.chores import sweep
from bot.flows.show import refresh_card
from bot.presenters.approver import _nothing_since
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from bot.store import drawn_state
from engine import schema
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    SECRET,
    OpenedCase,
    all_text,
    buttons,
    card_of,
    first_scenario,
    offline_bot,
    open_case,
    snapshot,
)

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(str(ROOT / package) + "/" for package in ("bot", "agent", "approvals", "engine", "scenarios"))
GRAPH = ROOT / "agent" / "graph" / "graph.py"
# A statement that reads credit_notes rows (selects its columns from it); a sum over the table (the room
# left on an invoice, today's total) reads no row, and an UPDATE … RETURNING is a write.
READS_A_NOTE = re.compile(
    r"^\s*SELECT\s+credit_notes\.id\b.*\bFROM\s+credit_notes\b", re.IGNORECASE | re.DOTALL
)


@dataclass
class NoteReads:
    by_the_click: list[str] = field(default_factory=list)  # the flow, the decision's claim, the card
    by_the_graph: list[str] = field(default_factory=list)  # the resumed graph: its settle, issuing's checks


@contextmanager
def note_reads(engine: AsyncEngine) -> Iterator[NoteReads]:
    """The SELECTs of credit_notes rows this engine runs inside the block, told apart by who asked: the
    resumed graph's node (agent/graph/graph.py on the asking stack) or the click's own code."""
    reads = NoteReads()

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not READS_A_NOTE.search(statement):
            return
        # SQLAlchemy's async engine runs the statement in a greenlet; its parent holds the asking stack.
        asking = traceback.extract_stack(greenlet.getcurrent().parent.gr_frame)
        where = " < ".join(
            f"{Path(f.filename).name}:{f.name}" for f in reversed(asking) if f.filename.startswith(OURS)
        )
        into = reads.by_the_graph if str(GRAPH) in {f.filename for f in asking} else reads.by_the_click
        into.append(where)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield reads
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


@contextmanager
def modules_entered(credit_note_id: str) -> Iterator[tuple[set[str], set[str]]]:
    """Our source files whose code runs inside the block (on this thread: the app, its tasks, the flows),
    and those of them a function is called in with the credit note's id as an argument (the id's walk)."""
    entered: set[str] = set()
    walked: set[str] = set()

    def profile(frame: FrameType, what: str, arg: Any) -> None:
        if what == "call" and frame.f_code.co_filename.startswith(OURS):
            module = str(Path(frame.f_code.co_filename).relative_to(ROOT))
            entered.add(module)
            if credit_note_id in frame.f_locals.values():
                walked.add(module)

    sys.setprofile(profile)
    try:
        yield entered, walked
    finally:
        sys.setprofile(None)


async def approve_once(bot: RunningBot, client: SignedClient, card: dict[str, Any]) -> None:
    click = p.click(card, user=FINANCE[0], channel=CHANNEL, action_id=APPROVE_ACTION_ID)
    assert (await client.send(click)).status == 200
    await bot.settled()


async def note_status(bot: RunningBot, opened: OpenedCase) -> str:
    notes = schema.credit_notes.c
    async with bot.runtime.engine.connect() as conn:
        found = await conn.execute(select(notes.status).where(notes.id == opened.credit_note_id))
        return str(found.scalar_one())


@pytest.mark.parametrize(
    ("single_approver", "after_the_click"),
    [(True, NoteStatus.ISSUED), (False, NoteStatus.DRAFT)],
    ids=["one-approver note, issued", "two-approver note, first vote"],
)
async def test_an_approve_click_reads_its_note_once_per_step_that_needs_it(
    ready_db_url: str, slack: SlackRecorder, single_approver: bool, after_the_click: NoteStatus
) -> None:
    # No outbox delivery or digest of its own: what is counted is the click's work, nothing that a
    # notification of it starts afterwards.
    async with (
        offline_bot(ready_db_url, slack, outbox_poll=None, digest_check=None) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        opened = await open_case(
            slack, client, bot, first_scenario(action="credit_note", single_approver=single_approver)
        )
        card = snapshot(card_of(slack, opened))
        await bot.settled()
        with (
            note_reads(bot.runtime.engine) as reads,
            modules_entered(opened.credit_note_id) as (modules, walk),
        ):
            await approve_once(bot, client, card)
        # The whole path ran: approved and issued, or (the first of two votes) counted, the note still open.
        assert await note_status(bot, opened) == after_the_click
        assert ("1 of 2" in str(card_of(slack, opened).to_slack())) == (not single_approver)
    print(f"\nApprove click: {len(reads.by_the_click)} + {len(reads.by_the_graph)} reads of the note's row")
    print(*(f"  click: {where}" for where in reads.by_the_click), sep="\n")
    print(*(f"  graph: {where}" for where in reads.by_the_graph), sep="\n")
    print(
        f"{len(modules)} of our modules entered; the note id walked through {len(walk)}:",
        *sorted(walk),
        sep="\n  ",
    )
    # Before the case verbs (issue 26): 8 + 4 reads. The click reads the note once, in the vote's claim on
    # the locked row (which also checks the card: is the note still open, is the card current); the
    # resumed graph reads it once, under issuing's locks, and settles on what issuing left; the card is
    # drawn from that same note, so the redraw reads it no more.
    assert len(reads.by_the_click) <= 1, reads.by_the_click
    assert len(reads.by_the_graph) <= 1, reads.by_the_graph
    assert len(reads.by_the_click) + len(reads.by_the_graph) <= 2, reads
    assert len(walk) < 16, sorted(walk)


# ---- a card drawn from the note as a change left it never shows an older state ---------------------------
# The decision hands the card the note as its resumed case committed it (`as_left`), and the card does not
# read the note again. A slower process holding an older note must still not draw it over a newer card.


async def test_a_note_handed_over_before_a_later_vote_is_read_again(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=False))
    before_the_vote = await queries.get_credit_note(bot.runtime.engine, opened.credit_note_id)
    await approve_once(bot, client, snapshot(card_of(slack, opened)))
    assert "Approvals: 1 of 2" in all_text(card_of(slack, opened).blocks)

    assert await refresh_card(bot.runtime, opened.credit_note_id, as_left=before_the_vote)

    card = card_of(slack, opened)
    assert "Approvals: 1 of 2" in all_text(card.blocks) and "Approvals: 0 of 2" not in all_text(card.blocks)


async def test_a_note_handed_over_before_it_expired_is_read_again(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    # An expiry casts no vote: only the card's drawn state tells that a later change was drawn already.
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    still_a_draft = await queries.get_credit_note(bot.runtime.engine, opened.credit_note_id)
    async with bot.runtime.engine.begin() as conn:
        await conn.execute(
            update(schema.credit_notes).values(expires_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    assert await sweep(bot.runtime) == [opened.credit_note_id]
    assert buttons(card_of(slack, opened)) == []

    assert await refresh_card(bot.runtime, opened.credit_note_id, as_left=still_a_draft)

    card = card_of(slack, opened)
    assert buttons(card) == [] and "Expired" in all_text(card.blocks)


def test_an_approved_note_handed_over_is_always_read_again() -> None:
    # Issuing reopens an approved note whose approvers left the list: back to a draft, a lower revision.
    # A card drawn from the reopened draft would not look newer than the approved note, so an approved
    # note is never taken as it was handed over; a draft or an issued note with the same votes is.
    vote = Vote("U0ALICE", Decision.APPROVE, "", "hash", datetime.now(UTC))
    approved = CreditNoteView(
        id="CN-1", invoice_id="INV-1", amount=Decimal("10.00"), currency="USD", reason="duplicate",
        status=NoteStatus.APPROVED, approvals=1, needed=1, approvers=("U0ALICE",), case_id="case-1",
        expires_at=None, memo="", root_cause="", args_hash="hash", created_at=datetime.now(UTC),
        decided_at=None, issued_at=None,
    )  # fmt: skip
    reopened = drawn_state("awaiting_approval", replace(approved, status=NoteStatus.DRAFT).summary())
    assert not _nothing_since(approved, [vote], reopened)
    issued = replace(approved, status=NoteStatus.ISSUED)
    assert _nothing_since(issued, [vote], drawn_state("awaiting_approval", approved.summary()))
    assert not _nothing_since(issued, [vote, replace(vote, approver="U0BOB")], None)
