"""Buttons on the evidence card (in a channel or in App Home): Approve, Reject and Cancel."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import APPROVE_ACTION_ID, CANCEL_ACTION_ID, REJECT_ACTION_ID
from bot.listeners.actions.approve import approve_clicked
from bot.listeners.actions.cancel import cancel_clicked
from bot.listeners.actions.reject import reject_clicked


def register(app: AsyncApp) -> None:
    app.action(APPROVE_ACTION_ID)(approve_clicked)
    app.action(REJECT_ACTION_ID)(reject_clicked)
    app.action(CANCEL_ACTION_ID)(cancel_clicked)
