"""The policy change card: what a proposal changes (each variable, stored value → proposed value), who
proposed it and from where, and — while it is pending — Approve and Reject, each behind a confirm dialog.
Once decided (or applied at once, or superseded) the same card without buttons says what became of it.

Block ids are revisioned like the other cards (`pc:<id>:decide:r<N>`): revision 0 while pending, 1 once
decided, so a click on a card drawn before the decision is known to be stale.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.cards.blocks import actions, button, confirm_dialog, context, escape, section, user
from bot.cards.ids import POLICY_APPROVE_ACTION_ID, POLICY_REJECT_ACTION_ID, block_id
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks, truncate
from bot.cards.models import Message

MAX_VALUE = 300  # a value shown on the card (a price table can be long); `policy show` has it whole


@dataclass(frozen=True)
class PolicyChangeView:
    """A policy change as the card shows it (built from approvals.policy_changes.PolicyChange)."""

    id: int
    status: str  # pending | approved | rejected | applied | superseded
    proposed_by: str  # a Slack user id, `cli:<os account>` or `bot`
    source: str
    why: str
    changes: tuple[tuple[str, str, str], ...]  # (variable, stored, proposed)
    month: str | None = None
    decided_by: str | None = None

    @property
    def revision(self) -> int:
        return 0 if self.status == "pending" else 1


def _who(actor: str) -> str:
    return user(actor) if actor[:1] in ("U", "W") else f"`{escape(actor)}`"


def _value(text: str) -> str:
    return f"`{escape(truncate(text, MAX_VALUE))}`" if text else "_(empty)_"


_OUTCOME = {
    "pending": ":hourglass: Waiting for a current approver other than the proposer to approve it.",
    "applied": ":white_check_mark: Applied at once: it narrows power, or no other approver could consent.",
    "superseded": ":fast_forward: Superseded: the policy changed before anyone decided; it never applied.",
}


def outcome_line(view: PolicyChangeView) -> str:
    if view.status == "approved":
        return f":white_check_mark: Approved by {_who(view.decided_by or '?')}; in force now."
    if view.status == "rejected":
        return f":x: Rejected by {_who(view.decided_by or '?')}; the stored policy is unchanged."
    return _OUTCOME.get(view.status, view.status)


def policy_change_card(view: PolicyChangeView) -> Message:
    """The card for finance (the finance channel, or each approver's DM)."""
    key, revision = str(view.id), view.revision
    what = f"the model budget for {view.month}" if view.month else "the policy"
    title = f":scales: *Policy change #{view.id}* · {view.status}"
    lines = [f"*{escape(name)}*: {_value(old)} → {_value(new)}" for name, old, new in view.changes]
    blocks = [
        section(block_id("pc", key, "head", revision), title),
        section(
            block_id("pc", key, "who", revision),
            f"{_who(view.proposed_by)} proposes to change {what} ({escape(view.why)}, from "
            f"`{escape(view.source)}`):",
        ),
        section(block_id("pc", key, "values", revision), "\n".join(lines) or "_(nothing)_"),
        context(block_id("pc", key, "outcome", revision), outcome_line(view)),
    ]
    if view.status == "pending":
        blocks.append(actions(block_id("pc", key, "decide", revision), *decision_buttons(view)))
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=f"Policy change #{view.id} ({what}): {view.status}", blocks=blocks)


def decision_buttons(view: PolicyChangeView) -> list[dict[str, object]]:
    names = ", ".join(name for name, _, _ in view.changes)
    what = truncate(f"policy change #{view.id} ({names})", 200)
    return [
        button(
            "Approve",
            POLICY_APPROVE_ACTION_ID,
            str(view.id),
            style="primary",
            confirm=confirm_dialog(
                "Approve this policy change?", f"Put {what} in force now.", "Approve", "Back"
            ),
        ),
        button(
            "Reject",
            POLICY_REJECT_ACTION_ID,
            str(view.id),
            style="danger",
            confirm=confirm_dialog(
                "Reject this policy change?",
                f"Reject {what}; nothing changes.",
                "Reject",
                "Back",
                danger=True,
            ),
        ),
    ]
