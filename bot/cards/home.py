"""App Home: approvers see the credit notes waiting for a decision, with buttons; everyone sees their own
open cases. Published with views.publish when the tab is opened and whenever a note changes."""

from __future__ import annotations

from typing import Any

from bot.cards.blocks import (
    Block,
    actions,
    amount,
    button,
    clip,
    context,
    divider,
    escape,
    header,
    humanise,
    section,
    slack_time,
)
from bot.cards.credit_note import approvals_line
from bot.cards.ids import APPROVE_ACTION_ID, REJECT_ACTION_ID, block_id
from bot.cards.limits import CardLimitError, view_problems
from bot.cards.models import CaseSummaryView, HomeView, PendingNoteView

MAX_PENDING_SHOWN = 20  # three blocks each
MAX_CASES_SHOWN = 20  # one block each
MAX_COMPLAINT = 200


def home_view(view: HomeView) -> dict[str, Any]:
    blocks: list[Block] = [header("home_head", "BillSleuth")]
    if view.is_approver:
        blocks.extend(_pending_blocks(view))
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
    for item in view.pending[:MAX_PENDING_SHOWN]:
        blocks.extend(_pending_note(item))
    if len(view.pending) > MAX_PENDING_SHOWN:
        left = len(view.pending) - MAX_PENDING_SHOWN
        blocks.append(context("home_pending_more", f"_…and {left} more — `/billsleuth list` for all_"))
    return blocks


def _pending_note(item: PendingNoteView) -> list[Block]:
    note = item.credit_note

    def bid(part: str) -> str:
        return block_id("home", note.id, part, item.revision)

    return [
        section(
            bid("note"),
            f"*{escape(note.id)}* · {amount(note.amount, item.customer.currency)} on "
            f"`{escape(note.invoice_id)}` · {clip(item.customer.name, 80)} (`{escape(item.customer.id)}`)\n"
            f"{clip(note.reason, 300)}\n"
            f"{approvals_line(note)} · expires {slack_time(note.expires_at)} · "
            f"`/billsleuth show {escape(note.id)}` for the evidence",
        ),
        actions(
            bid("decide"),
            button("Approve", APPROVE_ACTION_ID, note.id, style="primary"),
            button("Reject", REJECT_ACTION_ID, note.id, style="danger"),
        ),
        divider(bid("split")),
    ]


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
