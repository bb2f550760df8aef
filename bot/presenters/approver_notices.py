"""The read model of an approver notice: the note, its customer, who can still vote, and who decided."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.config import is_slack_user_id
from approvals.models import CreditNoteView as Note
from bot.cards.models import ApproverNoticeView
from bot.presenters.notes import customer_of_invoice


async def approver_notice_view(
    engine: AsyncEngine, note: Note, *, waiting_for: tuple[str, ...], card_link: str | None
) -> ApproverNoticeView:
    ended_by = note.rejected_by or note.cancelled_by
    return ApproverNoticeView(
        credit_note_id=note.id,
        amount=note.amount,
        customer=await customer_of_invoice(engine, note.invoice_id),
        invoice_id=note.invoice_id,
        case_id=note.case_id or "—",
        approvals=note.approvals,
        needed=note.needed,
        expires_at=note.expires_at or note.created_at,
        card_link=card_link,
        waiting_for=waiting_for,
        status=note.status,
        approved_by=note.approvers,
        # The sweep ends notes as BillSleuth itself, not as a person a message could mention.
        ended_by=ended_by if is_slack_user_id(ended_by or "") else None,
        reason=note.reject_reason or note.cancel_reason or "",
    )
