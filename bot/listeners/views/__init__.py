"""Modal submissions: the reason of a reject or a cancel, an approver's question (Request changes), the
requester's answer (Resubmit), and the investigate-billing confirmation."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import CANCEL_MODAL_CALLBACK_ID, INVESTIGATE_MODAL_CALLBACK_ID, REJECT_MODAL_CALLBACK_ID
from bot.cards.ids import REQUEST_CHANGES_MODAL_CALLBACK_ID, RESUBMIT_MODAL_CALLBACK_ID
from bot.listeners.views.answer_submitted import answer_submitted
from bot.listeners.views.investigate_submitted import investigate_submitted
from bot.listeners.views.reason_submitted import reason_submitted


def register(app: AsyncApp) -> None:
    app.view(REJECT_MODAL_CALLBACK_ID)(reason_submitted)
    app.view(CANCEL_MODAL_CALLBACK_ID)(reason_submitted)
    app.view(REQUEST_CHANGES_MODAL_CALLBACK_ID)(reason_submitted)
    app.view(RESUBMIT_MODAL_CALLBACK_ID)(answer_submitted)
    app.view(INVESTIGATE_MODAL_CALLBACK_ID)(investigate_submitted)
