"""Issuing in Stripe (BILLSLEUTH_BILLING_SYSTEM=stripe): the Stripe credit note an approved note becomes.

Money that moves outside us moves once (DESIGN §4). Issuing calls this under its locks (the daily budget's,
the invoice's, the note's), after every one of its own checks and before it marks the note issued, so:

- a crash or an error before Stripe created anything leaves the note approved and nothing in Stripe;
- a crash after Stripe created the credit note but before the note committed as issued leaves the note
  approved, and the next try finds Stripe's credit note by its metadata (`billsleuth_credit_note`) before
  anything else, and adopts it instead of creating another; within one try, the SDK's own retries and a
  repeat of the create carry the same Idempotency-Key (derived from the note), which Stripe answers with
  the credit note it already made;
- no second issuer can interleave: the note's row stays locked from the check to the commit.

Holding the locks across Stripe's answers serialises issuing behind the budget lock for a second or two;
issuing is rare and one at a time is what the daily limit wants anyway.

Before creating, Stripe previews the same parameters; unless the preview credits exactly the note's amount
in its currency, issuing refuses (STRIPE_PREVIEW_DIFFERS) and the case escalates naming both amounts.
Stripe failing or out of reach is STRIPE_UNAVAILABLE: the note stays approved, the error goes on the note
(the card shows it), and the sweep tries again with the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import outbox
from approvals.models import IssueRefused, NoteStatus, Rule
from engine import schema as t
from engine.money import fmt_amount, minor_unit
from engine.stripe_api import StripeNotConfigured, stripe_client

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection
    from stripe import CreditNote, Invoice, StripeClient

STRIPE_SOURCE = "stripe"  # the ledger source of rows that came from Stripe (their ids are Stripe's)
METADATA_NOTE, METADATA_CASE = "billsleuth_credit_note", "billsleuth_case"
# The outbox change a failed try writes: the note's status did not change, so its card must be redrawn anyway.
STRIPE_FAILED = "credit_note.stripe_failed"
MEMO_LIMIT = 5000  # Stripe's limit on a text parameter
# Where the paid part goes, by BILLSLEUTH_CREDIT_METHOD: the create parameter that carries it.
METHOD_PARAMETER = {
    "refund": "refund_amount",
    "customer_balance": "credit_amount",
    "out_of_band": "out_of_band_amount",
}


@dataclass(frozen=True)
class StripeCreditNote:
    id: str
    livemode: bool
    adopted: bool  # found in Stripe by its metadata: an earlier try created it


def idempotency_key(note: Row[Any]) -> str:
    """Stable across every try for this note as approved (its id and the hash its approvals are bound to)."""
    return f"billsleuth-credit-note-{note.id}-{note.args_hash[:32]}"


def in_minor_units(amount: Decimal, currency: str) -> int:
    """Stripe's integer amount: cents for USD, yen for JPY. Drafting made sure the amount is expressible."""
    scaled = amount.scaleb(minor_unit(currency))
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{amount} {currency} is not a whole number of minor units")
    return int(scaled)


def from_minor_units(amount: int, currency: str) -> Decimal:
    return Decimal(amount).scaleb(-minor_unit(currency))


async def create_in_stripe(
    conn: AsyncConnection, note: Row[Any], credit_method: str, client: StripeClient | None = None
) -> StripeCreditNote:
    """The Stripe credit note for this approved note: the one an earlier try made, or a new one after a
    preview that matches to the cent. Raises IssueRefused (see the module's docstring)."""
    await _check_stripe_invoice(conn, note)
    import stripe

    try:
        client = client or stripe_client()
        earlier = await _created_earlier(client, note)
        if earlier is not None:
            return earlier
        invoice = await client.v1.invoices.retrieve_async(note.invoice_id)
        params = credit_note_params(note, invoice, credit_method)
        await _check_preview(client, note, params)
        created = await client.v1.credit_notes.create_async(
            params,  # type: ignore[arg-type]
            {"idempotency_key": idempotency_key(note)},
        )
    except (stripe.StripeError, StripeNotConfigured) as error:
        raise IssueRefused(Rule.STRIPE_UNAVAILABLE, _stripe_error_text(error)) from error
    return StripeCreditNote(created.id, bool(created.livemode), adopted=False)


def credit_note_params(note: Row[Any], invoice: Invoice, credit_method: str) -> dict[str, Any]:
    """The create (and preview) parameters: the whole amount on the note's invoice, the part the customer
    already paid sent back the policy's way, the reason, the memo and our ids in the metadata."""
    amount = in_minor_units(note.amount, note.currency)
    paid_left = (invoice.amount_paid or 0) - (invoice.post_payment_credit_notes_amount or 0)
    paid_part = max(0, min(amount, paid_left))
    metadata = {METADATA_NOTE: note.id, **({METADATA_CASE: note.case_id} if note.case_id else {})}
    params: dict[str, Any] = {
        "invoice": note.invoice_id,
        "amount": amount,
        "reason": note.reason,
        "metadata": metadata,
    }
    if note.memo:
        params["memo"] = note.memo[:MEMO_LIMIT]
    if paid_part:
        params[METHOD_PARAMETER[credit_method]] = paid_part
    return params


async def record_error(engine: AsyncEngine, credit_note_id: str, message: str) -> None:
    """The last Stripe error, on the note while it waits approved, and a change for the bot to redraw its
    card (which shows the error): the status did not change, so no trigger tells the bot."""
    notes = t.credit_notes.c
    async with engine.begin() as conn:
        case_id = (
            await conn.execute(
                update(t.credit_notes)
                .where(notes.id == credit_note_id, notes.status == NoteStatus.APPROVED)
                .values(stripe_error=message)
                .returning(notes.case_id)
            )
        ).scalar_one_or_none()
        if case_id is not None:
            await outbox.card_changed(conn, credit_note_id, case_id, STRIPE_FAILED)


async def _check_stripe_invoice(conn: AsyncConnection, note: Row[Any]) -> None:
    """Only an invoice that came from Stripe has a Stripe id to credit (a Stripe-sourced row's id is
    Stripe's own)."""
    source = (
        await conn.execute(select(t.invoices.c.source).where(t.invoices.c.id == note.invoice_id))
    ).scalar_one_or_none()
    if source != STRIPE_SOURCE:
        raise IssueRefused(
            Rule.NOT_A_STRIPE_INVOICE,
            f"{note.id} is on {note.invoice_id}, which did not come from Stripe (source {source or 'none'}); "
            "the billing system is stripe, so it cannot be issued there",
        )


async def _created_earlier(client: StripeClient, note: Row[Any]) -> StripeCreditNote | None:
    """The credit note an earlier try created for this note, found by its metadata on the invoice."""
    listed = await client.v1.credit_notes.list_async({"invoice": note.invoice_id, "limit": 100})
    async for found in listed.auto_paging_iter():
        # A StripeObject is no dict (stripe 15 dropped that): no .get(), but `in` and [] work.
        metadata = found.metadata
        if not metadata or METADATA_NOTE not in metadata or metadata[METADATA_NOTE] != note.id:
            continue
        if found.status == "void":
            raise IssueRefused(
                Rule.STRIPE_NOTE_VOIDED,
                f"Stripe holds credit note {found.id} for {note.id}, voided: a person should look before "
                "anything is credited again",
                {"stripe_credit_note_id": found.id},
            )
        return StripeCreditNote(found.id, bool(found.livemode), adopted=True)
    return None


async def _check_preview(client: StripeClient, note: Row[Any], params: dict[str, Any]) -> None:
    """Stripe's preview of these parameters must credit exactly the note's amount, in its currency."""
    import stripe

    try:
        preview: CreditNote = await client.v1.credit_notes.preview_async(params)  # type: ignore[arg-type]
    except stripe.InvalidRequestError as refused:
        raise IssueRefused(
            Rule.STRIPE_PREVIEW_DIFFERS,
            f"Stripe refuses to credit {fmt_amount(note.amount, note.currency)} on {note.invoice_id}: "
            f"{refused.user_message or refused}",
        ) from refused
    currency = (preview.currency or "").upper()
    if preview.total == params["amount"] and currency == note.currency.upper():
        return
    previewed = fmt_amount(
        from_minor_units(preview.total, currency or note.currency), currency or note.currency
    )
    raise IssueRefused(
        Rule.STRIPE_PREVIEW_DIFFERS,
        f"Stripe's preview credits {previewed} on {note.invoice_id}, but {note.id} is "
        f"{fmt_amount(note.amount, note.currency)}",
        {"stripe_total": preview.total, "stripe_currency": currency, "note_amount": note.amount},
    )


def _stripe_error_text(error: Exception) -> str:
    import stripe

    if isinstance(error, stripe.StripeError):
        status = f" (HTTP {error.http_status})" if error.http_status else ""
        return f"Stripe: {type(error).__name__}{status}: {error.user_message or error}"
    return str(error)
