"""Drafting a credit note: code drafts, never a model, and a replayed request never drafts twice.

The request's identity is the idempotency key case:invoice:amount. The same key returns the same note
whatever has happened to it since (approved, issued, rejected, expired): "is there a draft on this
invoice?" is not enough, because after approval there is no draft and a replay would draft again.

Concurrency: twin requests serialise on the invoice row (SELECT … FOR UPDATE) and the key is re-read
after the lock is held; the key's primary key plus INSERT … ON CONFLICT DO NOTHING is the backstop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row, insert, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.config import ApprovalSettings
from approvals.limits import (
    OwedUnknown,
    credited_total,
    invoice_currency,
    lock_invoice,
    owed_on_invoice,
    paid_total,
)
from approvals.models import CREDITED_NOTES, OPEN_NOTES, CreditNoteView, DraftRefused, NoteStatus, Rule
from approvals.policy import (
    approvals_needed,
    args_hash,
    checked_amount,
    credit_reason,
    idempotency_key,
    require_decimal,
    utc_now,
)
from approvals.queries import to_view, view_in
from engine import schema as t
from engine.money import expressible, fmt, held_to_cents, minor_unit


class _KeyTakenMeanwhile(Exception):
    """A twin request claimed the key between our check and our insert; roll back and read its note."""


async def draft_credit_note(
    engine: AsyncEngine,
    *,
    case_id: str,
    invoice_id: str,
    amount: Decimal,
    root_cause: str,
    memo: str = "",
    settings: ApprovalSettings,
    now: datetime | None = None,
    round_: int = 1,
) -> tuple[CreditNoteView, bool]:
    """Draft (or find again) the credit note for this request → (note, created). `round_`: the case's
    round (2 and 3 after an approver requested changes), part of the idempotency key.

    Raises TypeError for a non-Decimal amount, DraftRefused(rule, message) when a rule says no (the
    refusal is recorded in activity_log; nothing else is written).
    """
    require_decimal(amount)  # a type mistake is the caller's bug, not a refusal to put on record
    try:
        request = _Request(case_id, invoice_id, amount, credit_reason(root_cause), root_cause, memo, round_)
        return await _draft(engine, request, settings, now or utc_now())
    except DraftRefused as refusal:
        await activity.record_refusal(
            engine,
            activity.SYSTEM,
            activity.BILLSLEUTH,
            "credit_note.draft_refused",
            "invoice",
            invoice_id,
            rule=refusal.rule,
            message=refusal.message,
            details={"case_id": case_id, "amount": str(amount), "root_cause": root_cause, **refusal.details},
        )
        raise


@dataclass(frozen=True)
class _Request:
    """A drafting request after its arguments passed the rules that need no database."""

    case_id: str
    invoice_id: str
    amount: Decimal
    reason: str
    root_cause: str
    memo: str
    round_: int = 1

    @property
    def key(self) -> str:
        return idempotency_key(self.case_id, self.invoice_id, self.amount, self.round_)


async def _draft(
    engine: AsyncEngine, raw: _Request, settings: ApprovalSettings, now: datetime
) -> tuple[CreditNoteView, bool]:
    request = replace(raw, amount=checked_amount(raw.amount))
    if not request.case_id.strip():
        raise DraftRefused(Rule.CASE_ID_REQUIRED, "a credit note is drafted for a case: case_id is blank")
    for _ in range(2):  # a second round only when a twin won the key race; it then just reads that note
        try:
            async with engine.begin() as conn:
                return await _draft_once(conn, request, settings, now)
        except _KeyTakenMeanwhile:
            continue
    raise RuntimeError(f"idempotency key {request.key!r} was claimed but its note could not be read")


async def _draft_once(
    conn: AsyncConnection, request: _Request, settings: ApprovalSettings, now: datetime
) -> tuple[CreditNoteView, bool]:
    existing = await _note_for_key(conn, request.key)
    if existing is None:
        if not await lock_invoice(conn, request.invoice_id):
            raise DraftRefused(Rule.INVOICE_EXISTS, f"there is no invoice {request.invoice_id}")
        existing = await _note_for_key(conn, request.key)  # a twin may have committed while we waited
    if existing is not None:
        return await _replayed(conn, existing, request.root_cause), False
    await _check_no_other_case_is_open(conn, request)
    currency = await invoice_currency(conn, request.invoice_id)
    _check_currency(request.amount, currency)
    await _check_room_on_invoice(conn, request.invoice_id, request.amount)
    await _check_still_owed(conn, request)
    note, drafted = await _insert_note(conn, request, currency, settings, now)
    if not await _claim_key(conn, request, note.id, now):
        raise _KeyTakenMeanwhile
    # Last before the commit: an activity row holds the log's head until then (approvals/activity.py).
    await activity.record(
        conn, activity.SYSTEM, activity.BILLSLEUTH, "credit_note.drafted", "credit_note", note.id, drafted
    )
    return to_view(note, []), True  # a new note has no votes yet


async def _note_for_key(conn: AsyncConnection, key: str) -> Row[Any] | None:
    query = select(t.credit_note_requests.c.credit_note_id).where(
        t.credit_note_requests.c.idempotency_key == key
    )
    return (await conn.execute(query)).first()


async def _replayed(conn: AsyncConnection, request: Row[Any], root_cause: str) -> CreditNoteView:
    note = await view_in(conn, request.credit_note_id)
    if note.root_cause != root_cause:
        # Stripe's rule: one key, one set of arguments. A different root cause is a different request.
        raise DraftRefused(
            Rule.IDEMPOTENCY_KEY_REUSED,
            f"{note.id} was drafted for this case, invoice and amount with root cause {note.root_cause}, "
            f"not {root_cause}",
        )
    return note


async def _check_no_other_case_is_open(conn: AsyncConnection, request: _Request) -> None:
    """One case at a time may be asking to credit an invoice; the caller holds the invoice lock.

    Two complaints about one overcharge open two cases, and each verifies the same outstanding amount: a
    second draft while the first is still undecided would credit the customer twice (a double charge is
    paid twice over, so the paid-total cap alone does not stop it). The second case goes to a human.
    """
    notes = t.credit_notes.c
    open_note = (
        await conn.execute(
            select(notes.id, notes.case_id, notes.status)
            .where(
                notes.invoice_id == request.invoice_id,
                notes.status.in_(OPEN_NOTES),
                notes.case_id.is_distinct_from(request.case_id),
            )
            .order_by(notes.id)
            .limit(1)
        )
    ).first()
    if open_note is not None:
        raise DraftRefused(
            Rule.OPEN_NOTE_ON_INVOICE,
            f"{open_note.id} on {request.invoice_id} is already {open_note.status} for case "
            f"{open_note.case_id}; settle it first",
        )


def _check_currency(amount: Decimal, currency: str) -> None:
    """The amount must be money in the invoice's currency as it stands: never rounded to fit it.

    A JPY overcharge with a fraction of a yen cannot be credited (rounding either way credits a different
    amount than the one verified), and a three-decimal currency cannot be held in the ledger's cents.
    """
    if not held_to_cents(currency):
        raise DraftRefused(
            Rule.CURRENCY_MINOR_UNIT,
            f"{currency} amounts have {minor_unit(currency)} decimals and the ledger holds 2: "
            f"a credit note in {currency} cannot be drafted",
            {"currency": currency},
        )
    if not expressible(amount, currency):
        raise DraftRefused(
            Rule.CURRENCY_MINOR_UNIT,
            f"{fmt(amount)} is not an amount in {currency}, which has {minor_unit(currency)} decimals; "
            "it is never rounded, a human must decide",
            {"currency": currency},
        )


async def _check_room_on_invoice(conn: AsyncConnection, invoice_id: str, amount: Decimal) -> None:
    """credited (approved + issued) + this ≤ paid; the caller holds the invoice lock."""
    paid = await paid_total(conn, invoice_id)
    credited = await credited_total(conn, invoice_id, CREDITED_NOTES)
    if credited + amount > paid:
        raise DraftRefused(
            Rule.PAID_TOTAL,
            f"credit {fmt(amount)} plus {fmt(credited)} already approved or issued on {invoice_id} "
            f"exceeds the {fmt(paid)} the customer paid",
        )


async def _check_still_owed(conn: AsyncConnection, request: _Request) -> None:
    """The amount the case verified must still be owed back now, re-derived from the ledger under the
    invoice lock: another case's note may have been issued on this invoice since that case verified."""
    amount = request.amount
    try:
        owed = await owed_on_invoice(
            conn, request.invoice_id, pending=OPEN_NOTES, excluding_case=request.case_id
        )
    except OwedUnknown as error:
        raise DraftRefused(Rule.OVERCHARGE_UNVERIFIED, str(error)) from None
    if amount > owed.amount:
        raise DraftRefused(
            Rule.OVERCHARGE_CHANGED,
            f"the verified {fmt(amount)} is no longer owed: {owed.explain()}",
            {"owed": owed.amount, "paid": owed.paid, "due": owed.due, "issued": owed.issued},
        )


async def _insert_note(
    conn: AsyncConnection, request: _Request, currency: str, settings: ApprovalSettings, now: datetime
) -> tuple[Row[Any], dict[str, Any]]:
    """The note's row, and what its `credit_note.drafted` activity row says (the caller records it)."""
    number = (await conn.execute(text("SELECT nextval('credit_note_number')"))).scalar_one()
    note_id = f"CN-{number:04d}"
    needed = approvals_needed(request.amount, currency, settings)
    expires_at = now + settings.approval_ttl
    digest = args_hash(
        invoice_id=request.invoice_id,
        amount=request.amount,
        reason=request.reason,
        root_cause=request.root_cause,
        case_id=request.case_id,
    )
    inserted = await conn.execute(
        insert(t.credit_notes)
        .values(
            id=note_id,
            invoice_id=request.invoice_id,
            amount=request.amount,
            reason=request.reason,
            status=NoteStatus.DRAFT,
            root_cause=request.root_cause,
            memo=request.memo,
            case_id=request.case_id,
            args_hash=digest,
            needed=needed,
            created_at=now,
            expires_at=expires_at,
        )
        .returning(*t.credit_notes.c)
    )
    drafted = {
        "case_id": request.case_id,
        "invoice_id": request.invoice_id,
        "amount": request.amount,
        "reason": request.reason,
        "root_cause": request.root_cause,
        "needed": needed,
        "expires_at": expires_at,
        "idempotency_key": request.key,
        "args_hash": digest,
    }
    return inserted.one(), drafted


async def _claim_key(conn: AsyncConnection, request: _Request, note_id: str, now: datetime) -> bool:
    claim = (
        pg_insert(t.credit_note_requests)
        .values(idempotency_key=request.key, case_id=request.case_id, credit_note_id=note_id, created_at=now)
        .on_conflict_do_nothing(index_elements=[t.credit_note_requests.c.idempotency_key])
        .returning(t.credit_note_requests.c.idempotency_key)
    )
    return (await conn.execute(claim)).first() is not None
