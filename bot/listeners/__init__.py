"""Slack listeners, laid out like Slack's Bolt starter template: one package per kind of request, each with
a `register(app)`. Listeners only ack, read the signed payload, and hand slow work to the runtime."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.listeners import actions, commands, events, fallback, shortcuts, views


def register_listeners(app: AsyncApp) -> None:
    events.register(app)
    actions.register(app)
    commands.register(app)
    shortcuts.register(app)
    views.register(app)
    fallback.register(app)  # last: it takes only what the listeners above left
