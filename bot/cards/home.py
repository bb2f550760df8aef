"""App Home: approvers see the credit notes waiting for a decision, with buttons; everyone sees their own
open cases. Published with views.publish when the tab is opened and whenever a note changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bot.cards.blocks import (
    Block,
    actions,
    amount,
    clip,
    context,
    divider,
    escape,
    header,
    humanise,
    section,
    slack_time,
)
from bot.cards.credit_note import LEAVES_WITH_THE_SWEEP, approvals_line, cancel_button, vote_buttons
from bot.cards.ids import block_id
from bot.cards.limits import CardLimitError, view_problems
from bot.cards.models import CaseSummaryView, HomeView, PendingNoteView

MAX_PENDING_SHOWN = 20  # three blocks each
MAX_HELD_SHOWN = 5  # two blocks each: with the rest, Home stays under Slack's 100 blocks
MAX_CASES_SHOWN = 20  # one block each
MAX_COMPLAINT = 200


def home_view(view: HomeView) -> dict[str, Any]:
    blocks: list[Block] = [header("home_head", "BillSleuth")]
    if view.is_approver:
        blocks.extend(_pending_blocks(view))
        blocks.extend(_held_blocks(view))
        blocks.append(context("home_credit_left", _credit_left_text(view)))
    else:
        blocks.append(
            context(
                "home_not_approver",
                "You are not on BILLSLEUTH_APPROVERS, so credit notes are not yours to approve.",
            )
        )
    blocks.extend(_case_blocks(view))
    home = {"type": "home", "blocks": blocks}
    problems = view_problems(home)
    if problems:
        raise CardLimitError("; ".join(problems))
    return home


def _pending_blocks(view: HomeView) -> list[Block]:
    blocks: list[Block] = [
        section("home_pending", f"*Credit notes waiting for a decision* ({len(view.pending)})")
    ]
    if not view.pending:
        blocks.append(context("home_pending_none", "Nothing is waiting for you."))
    return blocks + _listed(view.pending, MAX_PENDING_SHOWN, _pending_note, "home_pending_more")


def _pending_note(item: PendingNoteView) -> list[Block]:
    note = item.credit_note

    def bid(part: str) -> str:
        return block_id("home", note.id, part, item.revision)

    return [
        section(
            bid("note"),
            f"{_note_line(item)}\n{clip(note.reason, 300)}\n"
            f"{approvals_line(note)} · expires {slack_time(note.expires_at)} · "
            f"`/billsleuth show {escape(note.id)}` for the evidence",
        ),
        actions(bid("decide"), *vote_buttons(note, item.customer.currency)),
        divider(bid("split")),
    ]


def _held_blocks(view: HomeView) -> list[Block]:
    if not view.held:
        return []
    blocks: list[Block] = [
        section("home_held", f"*Approved, not issued* ({len(view.held)})"),
        context(
            "home_held_why",
            "One held by the daily credit limit is issued once today's limit has room; one whose issuing "
            "was refused waits for a person. An approver may cancel either.",
        ),
    ]
    return blocks + _listed(view.held, MAX_HELD_SHOWN, _held_note, "home_held_more")


def _listed(
    items: Sequence[PendingNoteView], most: int, draw: Callable[[PendingNoteView], list[Block]], more: str
) -> list[Block]:
    """The first `most` notes' blocks, and a line counting the rest (`/billsleuth list` has them all)."""
    blocks = [block for item in items[:most] for block in draw(item)]
    if len(items) > most:
        blocks.append(context(more, f"_…and {len(items) - most} more — `/billsleuth list` for all_"))
    return blocks


def _held_note(item: PendingNoteView) -> list[Block]:
    note = item.credit_note

    def bid(part: str) -> str:
        return block_id("home", note.id, part, item.revision)

    if note.issue_refused:
        why = f"Issuing it was refused: {clip(note.issue_refused, 300)}"
    elif note.held_by_budget:
        why = "Held by the daily credit limit"
    else:
        why = f"Not held: {LEAVES_WITH_THE_SWEEP}"
    blocks = [section(bid("held"), f"{_note_line(item)}\n{why}")]
    if note.cancellable:  # as on its card: nothing to cancel on a note that is about to be issued
        blocks.append(actions(bid("cancel"), cancel_button(note, item.customer.currency)))
    return blocks


def _note_line(item: PendingNoteView) -> str:
    note, customer = item.credit_note, item.customer
    return (
        f"*{escape(note.id)}* · {amount(note.amount, customer.currency)} on `{escape(note.invoice_id)}` · "
        f"{clip(customer.name, 80)} (`{escape(customer.id)}`)"
    )


def _credit_left_text(view: HomeView) -> str:
    if not view.credit_left:
        return "Daily credit limit (UTC): nothing issued today."
    return "Left today under the daily credit limit (UTC): " + ", ".join(
        f"{amount(c.left, c.currency)} of {amount(c.limit, c.currency)}" for c in view.credit_left
    )


def _case_blocks(view: HomeView) -> list[Block]:
    blocks: list[Block] = [section("home_cases", f"*Your open cases* ({len(view.open_cases)})")]
    if not view.open_cases:
        blocks.append(
            context("home_cases_none", "No open cases. Mention @BillSleuth with a customer id to start one.")
        )
    for case in view.open_cases[:MAX_CASES_SHOWN]:
        blocks.append(section(f"home_case:{case.case_id}", _case_text(case)))
    if len(view.open_cases) > MAX_CASES_SHOWN:
        left = len(view.open_cases) - MAX_CASES_SHOWN
        blocks.append(context("home_cases_more", f"_…and {left} more_"))
    return blocks


def _case_text(case: CaseSummaryView) -> str:
    note = f" · credit note `{escape(case.credit_note_id)}`" if case.credit_note_id else ""
    return (
        f"*{escape(case.case_id)}* · `{escape(case.customer_id)}` · {humanise(case.status)}{note} · "
        f"opened {slack_time(case.opened_at)}\n>{clip(case.complaint, MAX_COMPLAINT)}"
    )
