"""App Home's read model: the notes waiting for a decision (for approvers) and the user's own open cases."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases import CaseService
from agent.state import SETTLED, CaseStatus
from approvals import queries
from bot.cards.models import CaseSummaryView, CustomerView, HomeView, PendingNoteView
from bot.presenters.notes import card_revision, note_model
from engine import schema

# A requester's case needs nobody once it is explained or its note is settled.
DONE_FOR_THE_REQUESTER = (CaseStatus.EXPLAINED, *SETTLED)


async def home(service: CaseService, user_id: str, is_approver: bool) -> HomeView:
    engine = service.engine
    pending: list[PendingNoteView] = []
    if is_approver:
        notes = await queries.list_pending(engine)
        customers = await _customers_of_invoices(engine, [n.invoice_id for n in notes])
        pending = [
            PendingNoteView(note_model(n), n.case_id or "—", customers[n.invoice_id], card_revision(n))
            for n in notes
            if n.invoice_id in customers
        ]
    return HomeView(user_id, is_approver, pending, await open_cases_of(engine, user_id))


async def open_cases_of(engine: AsyncEngine, user_id: str) -> list[CaseSummaryView]:
    """The user's cases that still need someone: not explained and not settled, newest first."""
    cases, notes = schema.cases.c, schema.credit_notes.c
    latest_note = (
        select(notes.id)
        .where(notes.case_id == cases.id)
        .order_by(notes.created_at.desc(), notes.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(cases.id, cases.customer_id, cases.status, cases.created_at, cases.question, latest_note)
            .where(cases.requester == user_id, cases.status.not_in(DONE_FOR_THE_REQUESTER))
            .order_by(cases.created_at.desc(), cases.id.desc())
        )
        return [
            CaseSummaryView(
                r[0], r[1] or "?", r[2], r[3], r[4], r[5]
            )  # (id, customer, status, at, words, note)
            for r in rows
        ]


async def _customers_of_invoices(engine: AsyncEngine, invoice_ids: Sequence[str]) -> dict[str, CustomerView]:
    if not invoice_ids:
        return {}
    inv, cust = schema.invoices.c, schema.customers.c
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(inv.id, cust.id, cust.name, inv.currency)  # the invoice's, as the note's card shows
            .join_from(schema.invoices, schema.customers, inv.customer_id == cust.id)
            .where(inv.id.in_(list(invoice_ids)))
        )
        return {r[0]: CustomerView(r[1], r[2], r[3]) for r in rows}
