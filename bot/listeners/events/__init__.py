"""Events API: `app_mention` (a new case) and `app_home_opened` (the Home tab)."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.listeners.events.app_home_opened import app_home_opened
from bot.listeners.events.app_mention import app_mention


def register(app: AsyncApp) -> None:
    app.event("app_mention")(app_mention)
    app.event("app_home_opened")(app_home_opened)
