"""The evidence card an approver decides from, and the same card once decided.

What the approver sees first is the system's own fresh recomputation of the invoice (billed, should have
billed, paid, the lines that differ, the payments), not the agent's words; the agent's conclusion and its
tool trail are there, labelled as the agent's, to be checked against it (seed 000, "what an approver must
see"). Long ledgers are cut to fit Slack's limits with a pointer to `/billsleuth show CN-…`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.cards.blocks import (
    Block,
    actions,
    amount,
    bounded_rows,
    button,
    clip,
    confirm_dialog,
    context,
    day,
    divider,
    escape,
    fields,
    header,
    humanise,
    more_line,
    quote,
    section,
    signed,
    slack_time,
    user,
)
from bot.cards.ids import (
    APPROVE_ACTION_ID,
    CANCEL_ACTION_ID,
    REJECT_ACTION_ID,
    REQUEST_CHANGES_ACTION_ID,
    block_id,
)
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import (
    CardNote,
    ConclusionView,
    CreditNoteCardView,
    DecisionView,
    LineDiffView,
    Message,
    PaymentView,
    RecomputationView,
    RoundView,
    ToolCallView,
)
from bot.cards.other_findings import other_findings_blocks
from engine.money import fmt

MAX_NAME = 80
MAX_COMPLAINT = 500
MAX_SUMMARY = 1000
MAX_REASON = 400
MAX_DESCRIPTION = 60
MAX_COMMENT = 200
MAX_ROUND_TEXT = 150
# An approved note whose case waits and that today's room would take (approvals.holds: not held).
LEAVES_WITH_THE_SWEEP = "today's limit has room for it, so the bot's next sweep issues it"
DIFF_ROWS, DIFF_CHARS = 8, 1400
PAYMENT_ROWS, PAYMENT_CHARS = 6, 800
TRAIL_CALLS, TRAIL_CHARS = 20, 1400
DECISION_ROWS, DECISION_CHARS = 6, 1500


def approvals_line(note: CardNote) -> str:
    """The exact words the outside checks look for: `Approvals: 1 of 2`."""
    return f"Approvals: {note.approvals} of {note.needed}"


def show_command(note_id: str) -> str:
    return f"/billsleuth show {note_id}"


def credit_note_card(view: CreditNoteCardView) -> Message:
    """Draft: the evidence, `Approvals: k of n`, and the Approve / Reject / Request changes buttons (value =
    the note id). Any other status: the same evidence, who decided what, and no buttons — except an
    approved note that nothing will issue now (held by the daily limit, or refused at issue), which offers
    Cancel. A case's earlier rounds (notes sent back with a question, and the answers) are listed."""
    note, currency = view.credit_note, view.customer.currency

    def bid(part: str) -> str:
        return block_id("cn", note.id, part, view.revision)

    blocks: list[Block] = [
        header(bid("head"), _title(note, currency)),
        _customer_block(view, bid("customer")),
        section(
            bid("conclusion"),
            f"*Agent's conclusion:* {escape(humanise(view.conclusion.root_cause))}, overcharge "
            f"{amount(view.conclusion.overcharge, currency)}\n"
            + _whose_words(view.conclusion)
            + clip(view.conclusion.summary, MAX_SUMMARY),
        ),
        divider(bid("split")),
        *_recompute_blocks(view.recompute, currency, note.id, bid),
        context(bid("trail"), _trail_text(view.tool_trail, note.id)),
        *([context(bid("model"), clip(view.model_line, 500))] if view.model_line else []),
        divider(bid("split2")),
        section(bid("note"), _note_text(note, currency)),
    ]
    if note.ledger_changed and note.status in ("draft", "approved"):
        # An import changed the invoice under the open note: the recomputation above is the new ledger's.
        blocks.append(context(bid("ledger"), f":warning: {escape(clip(note.ledger_changed, MAX_REASON))}"))
    if view.decisions:
        blocks.append(section(bid("votes"), _decisions_text(view.decisions)))
    if view.rounds:
        blocks.append(context(bid("rounds"), _rounds_text(view)))
    if note.status == "draft":
        blocks.append(actions(bid("decide"), *vote_buttons(note, currency), request_changes_button(note)))
    elif view.sent_back is not None:
        blocks.append(section(bid("outcome"), _sent_back_text(view.sent_back, view.requested_by)))
    else:
        blocks.append(section(bid("outcome"), _outcome_text(note, view.decisions, currency)))
    if note.cancellable:
        blocks.append(actions(bid("cancel"), cancel_button(note, currency)))
    blocks += other_findings_blocks(view.case_id, view.other_findings, currency, bid)
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=_fallback(note, currency), blocks=blocks)


def vote_buttons(note: CardNote, currency: str) -> list[dict[str, object]]:
    """Approve and Reject, each asking "are you sure?" with the note id and amount (the card and Home)."""
    what = f"{note.id} for {amount(note.amount, currency)} on {note.invoice_id}"
    return [
        button(
            "Approve",
            APPROVE_ACTION_ID,
            note.id,
            style="primary",
            confirm=confirm_dialog(
                "Approve this credit note?", f"Approve credit note {what}.", "Approve", "Back"
            ),
        ),
        button(
            "Reject",
            REJECT_ACTION_ID,
            note.id,
            style="danger",
            confirm=confirm_dialog(
                "Reject this credit note?",
                f"Reject credit note {what}? You will be asked for a reason.",
                "Reject",
                "Back",
                danger=True,
            ),
        ),
    ]


def request_changes_button(note: CardNote) -> dict[str, object]:
    """Send the note back with a question (a modal asks for it); no confirm: nothing is final yet."""
    return button("Request changes", REQUEST_CHANGES_ACTION_ID, note.id)


def _rounds_text(view: CreditNoteCardView) -> str:
    """The case's earlier rounds, one line each: whose question, and the answer that started the next."""
    lines = [f"Round {len(view.rounds) + (view.sent_back is None)} of {view.max_rounds}."]
    for r in view.rounds[-view.max_rounds :]:
        answer = f" — answer: “{clip(r.answer, MAX_ROUND_TEXT)}”" if r.answer else " — waiting for an answer"
        lines.append(
            f"`{escape(r.credit_note_id)}` sent back by {user(r.asked_by)}: "
            f"“{clip(r.question, MAX_ROUND_TEXT)}”{answer}"
        )
    return "\n".join(lines)


def _sent_back_text(sent_back: RoundView, requester: str) -> str:
    who = user(requester) if requester[:1] in ("U", "W") else "the requester"  # not a cli:<os account>
    return (
        f":leftwards_arrow_with_hook: *Changes requested* by {user(sent_back.asked_by)}: "
        f"“{clip(sent_back.question, MAX_COMMENT)}” No credit is issued on this note; {who} answers in the "
        "thread, and the case investigates again."
    )


def cancel_button(note: CardNote, currency: str) -> dict[str, object]:
    """Cancel for an approved note never issued, with its own "are you sure?" (the card and Home)."""
    text = (
        f"Cancel credit note {note.id} for {amount(note.amount, currency)} on {note.invoice_id}? It was "
        "approved but never issued; cancelled, it never will be. You will be asked for a reason."
    )
    confirm = confirm_dialog("Cancel this credit note?", text, "Yes, cancel it", "Keep it", danger=True)
    return button("Cancel", CANCEL_ACTION_ID, note.id, style="danger", confirm=confirm)


def _whose_words(conclusion: ConclusionView) -> str:
    """The reasoning is labelled: a model's own words (shown only when every figure in them was found in
    the evidence), or the deterministic auditor's."""
    if not conclusion.summary:
        return ""
    if conclusion.summary_by == "model":
        return "_In the model's words (its figures checked against the ledger):_ "
    return "_In the auditor's words:_ "


def _title(note: CardNote, currency: str) -> str:
    state = {
        "draft": "waiting for approval",
        "approved": "approved",
        "issued": "issued",
        "rejected": "rejected",
        "expired": "expired",
        "cancelled": "cancelled",
    }[note.status]
    return f"Credit note {note.id} · {amount(note.amount, currency)} · {state}"


def _fallback(note: CardNote, currency: str) -> str:
    return (
        f"Credit note {note.id}: {amount(note.amount, currency)} on {note.invoice_id} "
        f"({note.status}) — {approvals_line(note)}"
    )


def _customer_block(view: CreditNoteCardView, bid: str) -> Block:
    return section(
        bid,
        f"*{clip(view.customer.name, MAX_NAME)}* (`{escape(view.customer.id)}`){_found_by(view)} · "
        f"case `{escape(view.case_id)}` opened by {user(view.requested_by)}\n"
        + quote(view.complaint, MAX_COMPLAINT),
    )


def _found_by(view: CreditNoteCardView) -> str:
    """How the customer was found, when the complaint did not give its id."""
    how = {
        "email": "found by the email address",
        "name": "found by name",
        "fuzzy name": "found by a name close to theirs — check it",
        "chosen": "picked from the candidates",
    }.get(view.found_by or "")
    return f" · _{how}_" if how else ""


def _recompute_blocks(
    r: RecomputationView, currency: str, note_id: str, bid: Callable[[str], str]
) -> list[Block]:
    payments_ok = sum(1 for p in r.payments if p.status == "succeeded")
    title = (
        f"*System recomputation of `{escape(r.invoice_id)}`* — period {day(r.period_start)} to "
        f"{day(r.period_end)}, recomputed now from the ledger and the billing rules"
    )
    totals = [
        f"*Billed*\n{amount(r.billed_total, currency)}",
        f"*Should have billed*\n{amount(r.expected_total, currency)}",
        f"*Paid*\n{amount(r.paid_total, currency)} ({_count(payments_ok, 'successful payment')})",
        f"*Already credited*\n{amount(r.credited_total, currency)}",
        f"*Overpaid*\n{amount(r.overpaid, currency)}",
        f"*Still owed back*\n{amount(r.outstanding, currency)}",
    ]
    return [
        section(bid("recompute"), title),
        fields(bid("totals"), totals),
        section(bid("lines"), _diff_text(r, currency, note_id)),
        section(bid("payments"), _payments_text(r.payments, currency, note_id)),
    ]


def _diff_row(d: LineDiffView) -> str:
    what = d.billed_description or d.expected_description or d.kind
    what = clip(what, MAX_DESCRIPTION)
    if d.billed_description is None:
        return f"• {d.kind} _{what}_: missing from the bill, rules say {fmt(d.expected)}"
    if d.expected_description is None:
        return f"• {d.kind} _{what}_: billed {fmt(d.billed)}, the rules have no such line"
    return f"• {d.kind} _{what}_: billed {fmt(d.billed)}, rules {fmt(d.expected)} ({signed(d.difference)})"


def _diff_text(r: RecomputationView, currency: str, note_id: str) -> str:
    if not r.should_exist:
        lead = "*Lines:* the rules produce no invoice for this period, so every charge on it is extra."
    elif not r.line_diffs:
        lead = "*Lines:* every line matches the rules; the difference is in the payments."
    else:
        lead = f"*Lines that differ* (amounts in {currency})"
    rows = bounded_rows([_diff_row(d) for d in r.line_diffs], max_rows=DIFF_ROWS, max_chars=DIFF_CHARS)
    return _with_more(lead, rows.rows, rows.left_out, note_id)


def _payments_text(payments: Sequence[PaymentView], currency: str, note_id: str) -> str:
    if not payments:
        return "*Payments:* none recorded on this invoice."
    rows = bounded_rows(
        [
            f"• `{escape(p.id)}` {amount(p.amount, currency)} {escape(p.status)} on {day(p.attempted_at)}"
            for p in payments
        ],
        max_rows=PAYMENT_ROWS,
        max_chars=PAYMENT_CHARS,
    )
    return _with_more("*Payments*", rows.rows, rows.left_out, note_id)


def _with_more(lead: str, rows: list[str], left_out: int, note_id: str) -> str:
    lines = [lead, *rows]
    if left_out:
        lines.append(more_line(left_out, show_command(note_id)))
    return "\n".join(lines)


def _trail_text(calls: Sequence[ToolCallView], note_id: str) -> str:
    steps = [f"{clip(c.tool, 40)}({clip(c.summary, 40)}){'' if c.ok else ' ✗'}" for c in calls]
    # Rows are joined with " → " rather than newlines: budget the extra characters.
    shown = bounded_rows(steps, max_rows=TRAIL_CALLS, max_chars=TRAIL_CHARS - 2 * len(steps))
    text = f"*Agent's tool trail* ({_count(len(calls), 'call')}): " + (" → ".join(shown.rows) or "none")
    if shown.left_out:
        text += " " + more_line(shown.left_out, show_command(note_id))
    return text


def _note_text(note: CardNote, currency: str) -> str:
    return (
        f"*Credit note {escape(note.id)}*: {amount(note.amount, currency)} on `{escape(note.invoice_id)}`\n"
        f"*Reason:* {clip(note.reason, MAX_REASON)}\n"
        f"*{approvals_line(note)}* · expires {slack_time(note.expires_at)}"
    )


def _decision_row(d: DecisionView) -> str:
    verb = ":white_check_mark: approved" if d.decision == "approve" else ":no_entry_sign: rejected"
    when = f" at {slack_time(d.at)}" if d.at else ""
    via = f" {escape(d.via)}" if d.via else ""  # a CLI vote says so: it bypassed Slack's signed identity
    note = f": {clip(d.comment, MAX_COMMENT)}" if d.comment else ""
    return f"{user(d.user_id)} {verb}{when}{via}{note}"


def _decisions_text(decisions: Sequence[DecisionView]) -> str:
    rows = bounded_rows(
        [_decision_row(d) for d in decisions], max_rows=DECISION_ROWS, max_chars=DECISION_CHARS
    )
    lines = ["*Decisions*", *rows.rows]
    if rows.left_out:
        lines.append(f"_…and {rows.left_out} more_")
    return "\n".join(lines)


def _outcome_text(note: CardNote, decisions: Sequence[DecisionView], currency: str) -> str:
    approvers = [user(d.user_id) for d in decisions if d.decision == "approve"]
    by = " and ".join(approvers) if approvers else "nobody"
    if note.status == "issued":
        credited = f"{amount(note.amount, currency)} credited on `{escape(note.invoice_id)}`"
        return f":white_check_mark: *Issued*: {credited}, approved by {by}.{_in_stripe(note)}"
    if note.status == "approved" and note.stripe_error:
        return (
            f":warning: *Approved* by {by}, not issued yet: {clip(note.stripe_error, MAX_REASON)}. "
            "BillSleuth tries again on its next sweep, with the same idempotency key, so Stripe never "
            "credits it twice."
        )
    if note.status == "approved" and note.held_by_budget:
        return (
            f":double_vertical_bar: *Approved* by {by}, and held: issuing it today would pass the daily "
            "credit limit. It is issued on its own once the limit has room (the next UTC day, or a raised "
            "limit); cancel it if it should never be issued."
        )
    if note.status == "approved" and note.issue_refused is not None:
        return (
            f":warning: *Approved* by {by}, but not issued: {clip(note.issue_refused, MAX_REASON)}. "
            "A person should look at the case; cancel the note if it should never be issued."
        )
    if note.status == "approved":
        return f":hourglass_flowing_sand: *Approved* by {by}; issuing now."
    if note.status == "rejected":
        rejecter = next((d for d in reversed(decisions) if d.decision == "reject"), None)
        if rejecter is None:
            return ":no_entry_sign: *Rejected*. No credit will be issued."
        reason = clip(rejecter.comment, MAX_COMMENT) or "no reason given"
        return f":no_entry_sign: *Rejected* by {user(rejecter.user_id)}: {reason}. No credit will be issued."
    if note.status == "cancelled":
        who = user(note.cancelled_by) if note.cancelled_by else "BillSleuth"
        why = clip(note.cancel_reason, MAX_COMMENT) or "no reason given"
        return f":no_entry_sign: Cancelled by {who}: {why}. No credit will be issued."
    deadline = slack_time(note.expires_at)
    return f":alarm_clock: *Expired*: nobody decided before {deadline}. No credit will be issued."


def _in_stripe(note: CardNote) -> str:
    if not note.stripe_credit_note_id:
        return ""
    name = escape(note.stripe_credit_note_id)
    linked = f"<{note.stripe_url}|{name}>" if note.stripe_url else f"`{name}`"
    return f" Stripe credit note {linked}."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"
