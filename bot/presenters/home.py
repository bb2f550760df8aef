"""App Home's read model: for approvers, the notes waiting for a decision, the approved ones never issued
(held by the daily limit, refused at issue, or about to leave) and today's room under that limit; for
everyone, their own open cases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases.service import CaseService
from agent.graph.state import SETTLED, CaseStatus
from approvals import queries
from approvals.config import ApprovalSettings
from approvals.holds import held_by_daily_limit
from approvals.limits import issued_today, utc_day
from approvals.models import CreditNoteView as Note
from approvals.models import NoteStatus
from bot.cards.models import CaseSummaryView, CreditLeftView, CustomerView, HomeView, PendingNoteView
from bot.presenters.notes import note_model
from engine import schema
from engine.db import reading

# A requester's case needs nobody once it is explained or its note is settled.
DONE_FOR_THE_REQUESTER = (CaseStatus.EXPLAINED, *SETTLED)


async def home(service: CaseService, user_id: str, is_approver: bool) -> HomeView:
    engine = service.engine
    open_cases = await open_cases_of(engine, user_id)
    if not is_approver:
        return HomeView(user_id, is_approver, (), open_cases)
    pending = await _note_views(engine, [(n, None) for n in await queries.list_pending(engine)])
    held = await _note_views(engine, await unissued_notes(engine, service.approval_settings))
    currencies = {v.customer.currency for v in (*pending, *held)}
    credit_left = await _credit_left(engine, service.approval_settings, currencies)
    return HomeView(user_id, is_approver, pending, open_cases, held, credit_left)


async def _note_views(
    engine: AsyncEngine, notes: Sequence[tuple[Note, Unissued | None]]
) -> list[PendingNoteView]:
    customers = await _customers_of_invoices(engine, [n.invoice_id for n, _ in notes])
    return [
        PendingNoteView(
            note_model(
                n,
                held_by_budget=why is not None and why.held,
                issue_refused=why.refused if why is not None else None,
            ),
            n.case_id or "—",
            customers[n.invoice_id],
            n.revision,
        )
        for n, why in notes
        if n.invoice_id in customers
    ]


@dataclass(frozen=True)
class Unissued:
    """Why an approved note was not issued yet: refused at issue (`refused`, why), held by the daily limit
    (`held`, approvals.holds), or neither: today's room takes it and the next sweep issues it."""

    refused: str | None
    held: bool


async def unissued_notes(engine: AsyncEngine, settings: ApprovalSettings) -> list[tuple[Note, Unissued]]:
    """Approved notes never issued whose cases wait (for room under the daily limit, or for the sweep that
    issues them) or escalated (refused at issue: they wait for a person). Oldest first."""
    notes, cases = schema.credit_notes.c, schema.cases.c
    async with reading(engine) as conn:
        rows = (
            await conn.execute(
                select(notes.id, cases.status, cases.escalation_reason)
                .join_from(schema.credit_notes, schema.cases, notes.case_id == cases.id)
                .where(
                    notes.status == NoteStatus.APPROVED,
                    cases.status.in_([CaseStatus.AWAITING_APPROVAL, CaseStatus.ESCALATED]),
                )
                .order_by(notes.created_at, notes.id)
            )
        ).all()
        found = []
        for note_id, status, reason in rows:
            note = await queries.view_in(conn, note_id)
            waits = status == CaseStatus.AWAITING_APPROVAL
            held = await held_by_daily_limit(conn, note, case_waits=waits, settings=settings)
            refused = None if waits else (reason or "issuing it was refused")
            found.append((note, Unissued(refused, held)))
        return found


async def _credit_left(
    engine: AsyncEngine, settings: ApprovalSettings, currencies: set[str]
) -> list[CreditLeftView]:
    """Today's room per currency: those of the notes shown, those issued in today, those with a limit."""
    notes = schema.credit_notes.c
    now = datetime.now(UTC)
    start, end = utc_day(now)
    async with reading(engine) as conn:
        issued = await conn.execute(
            select(notes.currency).distinct().where(notes.issued_at >= start, notes.issued_at < end)
        )
        shown = sorted(
            currencies | {c for c in issued.scalars() if c} | dict(settings.currency_daily_limits).keys()
        )
        return [
            CreditLeftView(code, settings.daily_limit_for(code), await issued_today(conn, now, code))
            for code in shown
        ]


async def open_cases_of(engine: AsyncEngine, user_id: str) -> list[CaseSummaryView]:
    """The user's cases that still need someone: not explained and not settled, newest first."""
    cases = schema.cases.c
    latest_note = queries.latest_note_of_case(schema.credit_notes.c.id)
    async with reading(engine) as conn:
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
    async with reading(engine) as conn:
        rows = await conn.execute(
            select(inv.id, cust.id, cust.name, inv.currency)  # the invoice's, as the note's card shows
            .join_from(schema.invoices, schema.customers, inv.customer_id == cust.id)
            .where(inv.id.in_(list(invoice_ids)))
        )
        return {r[0]: CustomerView(r[1], r[2], r[3]) for r in rows}
