"""What every screen reads of a credit note and its customer: the note's view model,
the votes, the customer of an invoice. Shared by the approver's view, the case messages and App Home."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals.config import is_slack_user_id
from approvals.models import CreditNoteView as Note
from approvals.models import Vote
from bot.cards.models import CardNote, CustomerView, DecisionView
from engine import schema
from engine.db import reading

_EVIDENCE_REF = re.compile(r"\s*\[E\d+\]")


class CardUnavailable(LookupError):
    """The card cannot be drawn (its invoice or customer is gone from the ledger)."""


# ---- small mappings ---------------------------------------------------------------------------------------


def note_model(
    note: Note,
    *,
    held_by_budget: bool = False,
    issue_refused: str | None = None,
    ledger_changed: str | None = None,
) -> CardNote:
    return CardNote(
        id=note.id,
        invoice_id=note.invoice_id,
        amount=note.amount,
        reason=note.reason,
        status=note.status,
        approvals=note.approvals,
        needed=note.needed,
        # Drafting always sets it; an old row without one reads as expiring when it was made.
        expires_at=note.expires_at or note.created_at,
        held_by_budget=held_by_budget,
        issue_refused=issue_refused,
        ledger_changed=ledger_changed,
        # The sweep cancels as BillSleuth itself, not as a person the card could mention.
        cancelled_by=note.cancelled_by if is_slack_user_id(note.cancelled_by or "") else None,
        cancel_reason=note.cancel_reason or "",
        stripe_credit_note_id=note.stripe_credit_note_id,
        stripe_url=note.stripe_url,
        stripe_error=note.stripe_error if note.status == "approved" else None,
    )


def decision_views(votes: Sequence[Vote]) -> list[DecisionView]:
    return [DecisionView(v.approver, v.decision, v.comment, v.decided_at, v.via) for v in votes]  # type: ignore[arg-type]


def args_summary(args: Mapping[str, Any] | None) -> str:
    """Tool arguments in short: {"invoice_id": "INV-0007-05"} → "INV-0007-05"."""
    return ", ".join(str(v) for v in (args or {}).values())


def without_evidence_refs(text: str) -> str:
    """The write-up's `[E12]` evidence references mean nothing in Slack; the card shows the evidence."""
    return _EVIDENCE_REF.sub("", text).strip()


# ---- reading ----------------------------------------------------------------------------------------------


async def customer_view(engine: AsyncEngine, customer_id: str) -> CustomerView:
    c = schema.customers.c
    async with reading(engine) as conn:
        row = (await conn.execute(select(c.id, c.name, c.currency).where(c.id == customer_id))).first()
    if row is None:
        raise CardUnavailable(f"no customer {customer_id!r} in the ledger")
    return CustomerView(row.id, row.name, row.currency)


async def customer_exists(engine: AsyncEngine, customer_id: str) -> bool:
    c = schema.customers.c
    async with reading(engine) as conn:
        return (await conn.execute(select(c.id).where(c.id == customer_id))).first() is not None


async def customer_of_invoice(engine: AsyncEngine, invoice_id: str) -> CustomerView:
    async with reading(engine) as conn:
        return await customer_of_invoice_in(conn, invoice_id)


# The invoice's currency, not the customer's: a note and its amounts are in the invoice's. Built once: a
# card draw runs it (building a statement costs about as much CPU as running it).
_CUSTOMER_OF_INVOICE = (
    select(schema.customers.c.id, schema.customers.c.name, schema.invoices.c.currency)
    .join_from(schema.invoices, schema.customers, schema.invoices.c.customer_id == schema.customers.c.id)
    .where(schema.invoices.c.id == bindparam("invoice_id"))
)


async def customer_of_invoice_in(conn: AsyncConnection, invoice_id: str) -> CustomerView:
    row = (await conn.execute(_CUSTOMER_OF_INVOICE, {"invoice_id": invoice_id})).first()
    if row is None:
        raise CardUnavailable(f"no invoice {invoice_id!r} in the ledger")
    return CustomerView(row.id, row.name, row.currency)
