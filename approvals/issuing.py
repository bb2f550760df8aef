"""Issuing: the moment money actually leaves, so every limit is checked once more, under locks.

Order of locks (the same everywhere, so issuers never deadlock): the daily budget's advisory lock, then
the invoice row, then the note row. Drafting takes only the invoice row; deciding only the note row.

The note's row is read once, under those locks; what issuing leaves (the issued note, or the note as it
found it) is handed back as a view, so a resumed case settles on it without reading the note again.

With the stored policy's billing system `stripe`, the Stripe credit note is created under the same locks,
after every check and before the note is marked issued (approvals/stripe_issuing.py says why that order).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity, stripe_issuing
from approvals.config import STRIPE, ApprovalSettings
from approvals.decisions import current_approvals
from approvals.limits import (
    OwedUnknown,
    credited_total,
    issued_today,
    lock_daily_budget,
    lock_invoice,
    owed_on_invoice,
    paid_total,
    utc_day,
)
from approvals.models import (
    OPEN_NOTES,
    CreditNoteView,
    Decision,
    IssueOutcome,
    IssueRefused,
    NoteStatus,
    Rule,
    Vote,
)
from approvals.policy import note_args_hash, utc_now
from approvals.queries import note_row_in, to_view, votes_in
from engine import schema as t
from engine.logcontext import bind
from engine.money import fmt, fmt_amount

HARD_STOP = "budget.hard_stop"


class _OtherInvoice(Exception):
    """The locked row names another invoice than the one locked before it: lock that one instead."""

    def __init__(self, invoice_id: str) -> None:
        super().__init__(invoice_id)
        self.invoice_id = invoice_id


async def issue(
    engine: AsyncEngine, credit_note_id: str, settings: ApprovalSettings, *, now: datetime | None = None
) -> IssueOutcome:
    """Issue an approved note. Issuing an issued note again is a no-op (changed=False).

    Raises IssueRefused(rule, message) when a rule says no: not approved, approvals not bound to the
    note as it stands, credits beyond what was paid, or the daily budget's hard stop (recorded as the
    incident "budget.hard_stop"). UnknownCreditNote (a LookupError) for an unknown id.
    """
    outcome, _ = await _issuing(engine, credit_note_id, settings, now, invoice_id=None, approved_only=False)
    assert outcome is not None  # only `approved_only` hands back a note it did not try to issue
    return outcome


async def issue_if_approved(
    engine: AsyncEngine,
    credit_note_id: str,
    settings: ApprovalSettings,
    *,
    invoice_id: str | None = None,
    now: datetime | None = None,
) -> CreditNoteView:
    """The note as issuing leaves it: issued (or reopened) when it was approved, else as it is, with no
    refusal recorded for a note that is not approved. Every check and lock is `issue`'s; the row is read
    once, under the locks. `invoice_id`: the note's invoice as the caller knows it (a note never moves
    to another invoice), so the row need not be read first to learn which invoice to lock.

    Raises IssueRefused as `issue` does, its `note` the view of the note it refused to issue."""
    _, note = await _issuing(engine, credit_note_id, settings, now, invoice_id=invoice_id, approved_only=True)
    return note


async def _issuing(
    engine: AsyncEngine,
    credit_note_id: str,
    settings: ApprovalSettings,
    now: datetime | None,
    *,
    invoice_id: str | None,
    approved_only: bool,
) -> tuple[IssueOutcome | None, CreditNoteView]:
    with bind(credit_note_id=credit_note_id):
        now = now or utc_now()
        try:
            while True:  # again only when the invoice locked was not the note's
                try:
                    async with engine.begin() as conn:
                        return await _issue(conn, credit_note_id, invoice_id, settings, now, approved_only)
                except _OtherInvoice as other:
                    invoice_id = other.invoice_id
        except IssueRefused as refusal:
            if refusal.rule == Rule.STRIPE_UNAVAILABLE:  # the note waits, approved, for the next try
                await stripe_issuing.record_error(engine, credit_note_id, refusal.message)
                if refusal.note is not None:
                    refusal.note = replace(refusal.note, stripe_error=refusal.message)
            action = HARD_STOP if refusal.rule == Rule.DAILY_CREDIT_LIMIT else "credit_note.issue_refused"
            await activity.record_refusal(
                engine,
                activity.SYSTEM,
                activity.BILLSLEUTH,
                action,
                "credit_note",
                credit_note_id,
                rule=refusal.rule,
                message=refusal.message,
                details=refusal.details,
            )
            raise


async def _locked_note(
    conn: AsyncConnection, credit_note_id: str, invoice_id: str | None
) -> tuple[Row[Any], list[Vote]]:
    """The note's row and votes, under the budget's lock, its invoice row's and its own, in that order."""
    await lock_daily_budget(conn)
    if invoice_id is None:
        invoice_id = (await note_row_in(conn, credit_note_id)).invoice_id
    await lock_invoice(conn, invoice_id)
    note = await note_row_in(conn, credit_note_id, lock=True)
    if note.invoice_id != invoice_id:
        raise _OtherInvoice(note.invoice_id)
    return note, await votes_in(conn, note.id)


async def _issue(
    conn: AsyncConnection,
    credit_note_id: str,
    invoice_id: str | None,
    settings: ApprovalSettings,
    now: datetime,
    approved_only: bool,
) -> tuple[IssueOutcome | None, CreditNoteView]:
    note, votes = await _locked_note(conn, credit_note_id, invoice_id)
    view = to_view(note, votes)
    if note.status == NoteStatus.ISSUED:
        again = f"{note.id} was already issued; nothing changed"
        return IssueOutcome(note.id, NoteStatus.ISSUED, note.amount, False, again), view
    if note.status != NoteStatus.APPROVED:
        if approved_only:
            return None, view
        raise IssueRefused(
            Rule.NOT_APPROVED, f"{note.id} is {note.status}; only an approved note can be issued"
        )
    try:
        return await _issue_approved(conn, note, votes, view, settings, now)
    except IssueRefused as refusal:
        refusal.note = view
        raise


async def _issue_approved(
    conn: AsyncConnection,
    note: Row[Any],
    votes: list[Vote],
    view: CreditNoteView,
    settings: ApprovalSettings,
    now: datetime,
) -> tuple[IssueOutcome, CreditNoteView]:
    _check_bound_to_approvals(note, votes)
    _check_approved_in_time(note, votes)
    if len(current_approvals(votes, settings)) < note.needed:
        return await _reopen(conn, note, votes, view, settings, now)
    await _check_room_on_invoice(conn, note)
    await _check_still_owed(conn, note)
    await _check_daily_budget(conn, note.amount, note.currency, settings, now)
    in_stripe = None
    if settings.billing_system == STRIPE:
        in_stripe = await stripe_issuing.create_in_stripe(conn, note, settings.credit_method)
    stripe_id, livemode = (in_stripe.id, in_stripe.livemode) if in_stripe else (None, None)
    await conn.execute(
        update(t.credit_notes)
        .where(t.credit_notes.c.id == note.id, t.credit_notes.c.status == NoteStatus.APPROVED)
        .values(
            status=NoteStatus.ISSUED,
            issued_at=now,
            stripe_credit_note_id=stripe_id,
            stripe_livemode=livemode,
            stripe_error=None,
        )
    )
    details = {"invoice_id": note.invoice_id, "amount": note.amount, "case_id": note.case_id}
    if in_stripe is not None:
        details |= {"stripe_credit_note_id": in_stripe.id, "credit_method": settings.credit_method}
        details |= {"found_in_stripe": in_stripe.adopted}
    await activity.record(
        conn, activity.SYSTEM, activity.BILLSLEUTH, "credit_note.issued", "credit_note", note.id, details
    )
    issued = f"{note.id} issued: {fmt_amount(note.amount, note.currency)} on {note.invoice_id}"
    if in_stripe is not None:
        issued += f" as Stripe credit note {in_stripe.id}"
    outcome = IssueOutcome(note.id, NoteStatus.ISSUED, note.amount, True, issued)
    after = replace(
        view,
        status=NoteStatus.ISSUED,
        issued_at=now,
        stripe_credit_note_id=stripe_id,
        stripe_livemode=bool(livemode),
        stripe_error=None,
    )
    return outcome, after


def _check_bound_to_approvals(note: Row[Any], votes: list[Vote]) -> None:
    """The approvals must be for exactly these arguments: recompute the hash from the row as it is."""
    current = note_args_hash(note)
    approvals = [v for v in votes if v.decision == Decision.APPROVE]
    if current != note.args_hash or any(v.args_hash != current for v in approvals):
        raise IssueRefused(
            Rule.ARGS_MISMATCH,
            f"{note.id} no longer matches what was approved (invoice, amount, reason or case)",
            {"args_hash": current, "approved_hashes": sorted({v.args_hash for v in approvals})},
        )
    if len(approvals) < note.needed:
        raise IssueRefused(
            Rule.NOT_ENOUGH_APPROVALS,
            f"{note.id} has {len(approvals)} of the {note.needed} approvals it needs",
        )


def _check_approved_in_time(note: Row[Any], votes: list[Vote]) -> None:
    """Every approval that carries the note was counted before the note expired."""
    late = [
        v
        for v in votes
        if v.decision == Decision.APPROVE and note.expires_at and v.decided_at > note.expires_at
    ]
    if late:
        raise IssueRefused(
            Rule.EXPIRED,
            f"{note.id} was approved by {', '.join(v.approver for v in late)} after it expired "
            f"({note.expires_at.isoformat()}); draft it again",
        )


async def _reopen(
    conn: AsyncConnection,
    note: Row[Any],
    votes: list[Vote],
    view: CreditNoteView,
    settings: ApprovalSettings,
    now: datetime,
) -> tuple[IssueOutcome, CreditNoteView]:
    """Approved by someone no longer on the approver list: the note goes back to waiting for a current
    approver (with a fresh approval window) instead of moving money on a departed person's word."""
    removed = sorted({v.approver for v in votes if v.decision == Decision.APPROVE} - settings.approvers)
    expires_at = now + settings.approval_ttl
    await conn.execute(
        update(t.credit_notes)
        .where(t.credit_notes.c.id == note.id, t.credit_notes.c.status == NoteStatus.APPROVED)
        .values(status=NoteStatus.DRAFT, decided_at=None, expires_at=expires_at)
    )
    await activity.record(
        conn,
        activity.SYSTEM,
        activity.BILLSLEUTH,
        "credit_note.reopened",
        "credit_note",
        note.id,
        {"no_longer_approvers": removed, "needed": note.needed, "expires_at": expires_at},
    )
    message = (
        f"{note.id} was approved by {', '.join(removed)}, no longer on the approver list; it waits for a "
        "current approver"
    )
    reopened = replace(view, status=NoteStatus.DRAFT, decided_at=None, expires_at=expires_at)
    return IssueOutcome(note.id, NoteStatus.DRAFT, note.amount, True, message), reopened


async def _check_room_on_invoice(conn: AsyncConnection, note: Row[Any]) -> None:
    """issued + this ≤ paid: another note may have been issued on this invoice since approval."""
    paid = await paid_total(conn, note.invoice_id)
    issued = await credited_total(conn, note.invoice_id, [NoteStatus.ISSUED])
    if issued + note.amount > paid:
        raise IssueRefused(
            Rule.PAID_TOTAL,
            f"issuing {fmt(note.amount)} on top of {fmt(issued)} already issued on {note.invoice_id} "
            f"exceeds the {fmt(paid)} the customer paid",
            {"paid": paid, "issued": issued, "amount": note.amount},
        )


async def _check_still_owed(conn: AsyncConnection, note: Row[Any]) -> None:
    """What the ledger says is still owed back on the invoice now, this note aside, must cover it: a
    payment refunded or another note issued since approval means the approved amount is no longer owed."""
    try:
        owed = await owed_on_invoice(conn, note.invoice_id, pending=OPEN_NOTES, excluding_case=note.case_id)
    except OwedUnknown as error:
        raise IssueRefused(Rule.OVERCHARGE_UNVERIFIED, str(error)) from None
    if note.amount > owed.amount:
        raise IssueRefused(
            Rule.OVERCHARGE_CHANGED,
            f"{note.id} credits {fmt(note.amount)} but {owed.explain()}",
            {"owed": owed.amount, "paid": owed.paid, "due": owed.due, "issued": owed.issued},
        )


async def _check_daily_budget(
    conn: AsyncConnection, amount: Decimal, currency: str, settings: ApprovalSettings, now: datetime
) -> None:
    """The limit holds per currency: only credit issued today in the note's currency counts."""
    start, _ = utc_day(now)
    spent = await issued_today(conn, now, currency)
    limit = settings.daily_limit_for(currency)
    if spent + amount > limit:
        raise IssueRefused(
            Rule.DAILY_CREDIT_LIMIT,
            f"hard stop: {fmt_amount(spent, currency)} issued today (UTC) plus "
            f"{fmt_amount(amount, currency)} exceeds the daily credit limit of {fmt_amount(limit, currency)}",
            {
                "day": start.date(),
                "currency": currency,
                "issued_today": spent,
                "amount": amount,
                "limit": limit,
            },
        )
