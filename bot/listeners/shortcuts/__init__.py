"""The "Investigate billing" message shortcut."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import INVESTIGATE_SHORTCUT_CALLBACK_ID
from bot.listeners.shortcuts.investigate_billing import investigate_billing


def register(app: AsyncApp) -> None:
    app.shortcut(INVESTIGATE_SHORTCUT_CALLBACK_ID)(investigate_billing)
