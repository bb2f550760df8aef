"""The `/billsleuth` slash command."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import SLASH_COMMAND
from bot.listeners.commands.billsleuth import billsleuth_command


def register(app: AsyncApp) -> None:
    app.command(SLASH_COMMAND)(billsleuth_command)
