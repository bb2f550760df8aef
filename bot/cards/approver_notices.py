"""What approvers are told of a note waiting for them: one notice when it starts waiting (a DM, or one post
in the finance channel), one reminder at half its approval time, and both updated once it is decided."""

from __future__ import annotations

from bot.cards.blocks import amount, clip, context, escape, section, slack_time, user
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import ApproverNoticeView, Message

MAX_REASON = 500


def approver_notice_message(view: ApproverNoticeView, *, in_channel: bool) -> Message:
    """The note needs a decision. In the finance channel it names who can decide; a DM is to one of them."""
    what = _what(view)
    lead = f":inbox_tray: *A credit note waits for a decision:* {what}"
    if in_channel:
        lead += f"\nFor: {_people(view.waiting_for)}"
    return _message(view, lead, f"A credit note waits for a decision: {_plain_what(view)}")


def approver_reminder_message(view: ApproverNoticeView, *, in_channel: bool) -> Message:
    """Half its approval time has gone and it still waits."""
    lead = f":alarm_clock: *Reminder:* {_what(view)} still waits; it expires {slack_time(view.expires_at)}."
    if in_channel:
        lead += f"\nStill to decide: {_people(view.waiting_for)}"
    return _message(view, lead, f"Reminder: {_plain_what(view)} still waits for a decision")


def approver_outcome_message(view: ApproverNoticeView) -> Message:
    """The notice once the note is decided: no longer a call to act, and who decided."""
    lead = f":white_check_mark: *Decided:* {_what(view)} — {_outcome(view)}."
    return _message(view, lead, f"Decided: {_plain_what(view)}", with_approvals=False)


def _message(view: ApproverNoticeView, lead: str, text: str, *, with_approvals: bool = True) -> Message:
    facts = [f"Case `{escape(view.case_id)}` · invoice `{escape(view.invoice_id)}`"]
    if with_approvals:
        facts.append(f"Approvals: {view.approvals} of {view.needed}")
    if view.card_link:
        facts.append(f"<{view.card_link}|Open the card>")
    blocks = [section("notice", lead), context("notice_facts", " · ".join(facts))]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=escape(text), blocks=blocks)


def _outcome(view: ApproverNoticeView) -> str:
    by = _people(view.approved_by)
    why = clip(view.reason, MAX_REASON)
    who = user(view.ended_by) if view.ended_by else "BillSleuth"
    return {
        "draft": "waiting",
        "approved": f"approved by {by}, not issued yet",
        "issued": f"approved by {by} and issued",
        "rejected": f"rejected by {who}: {why}",
        "expired": "expired: nobody decided in time",
        "cancelled": f"cancelled by {who}: {why}",
    }[view.status]


def _what(view: ApproverNoticeView) -> str:
    customer = view.customer
    return (
        f"`{escape(view.credit_note_id)}` for *{amount(view.amount, customer.currency)}* to "
        f"{escape(customer.name)} (`{escape(customer.id)}`)"
    )


def _plain_what(view: ApproverNoticeView) -> str:
    return f"{view.credit_note_id} for {amount(view.amount, view.customer.currency)} to {view.customer.name}"


def _people(user_ids: tuple[str, ...]) -> str:
    return ", ".join(user(u) for u in user_ids) or "nobody on the approver list"
