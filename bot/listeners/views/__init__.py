"""Modal submissions: the reject reason, and the investigate-billing confirmation."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import INVESTIGATE_MODAL_CALLBACK_ID, REJECT_MODAL_CALLBACK_ID
from bot.listeners.views.investigate_submitted import investigate_submitted
from bot.listeners.views.reject_reason import reject_reason_submitted


def register(app: AsyncApp) -> None:
    app.view(REJECT_MODAL_CALLBACK_ID)(reject_reason_submitted)
    app.view(INVESTIGATE_MODAL_CALLBACK_ID)(investigate_submitted)
