"""Acknowledge, with HTTP 200, every request no other listener takes.

Bolt answers a request no listener matches with 404 ("unhandled request"), and Slack counts that as a
failed delivery: events are retried (up to 3 times) and an app failing too many is disabled. Slack sends
more than we use: events the manifest subscribes to for other reasons (`message`, `reaction_added`, …), a
modal closed (`view_closed`), an options load (`block_suggestion`, answered `{"options": []}`), a
click on a link button.

Checked in slack_bolt 1.30's source (AsyncApp.async_dispatch): listeners are tried in the order they were
registered and the first that matches answers, so these catch-alls, registered last, take only what the
real listeners left; a global middleware runs before the listeners and cannot know whether one matched.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck

log = logging.getLogger(__name__)

ANYTHING = re.compile(".*")


def register(app: AsyncApp) -> None:
    """Call after every other `register`: a catch-all registered first would take every request."""
    app.event(ANYTHING)(ignore_event)  # Events API: Bolt acks these itself
    app.options(ANYTHING)(no_options)
    app.view_closed(ANYTHING)(acknowledge)
    app.view(ANYTHING)(acknowledge)
    app.action(ANYTHING)(acknowledge)
    app.shortcut(ANYTHING)(acknowledge)
    app.command(ANYTHING)(acknowledge)


async def ignore_event(event: dict[str, Any]) -> None:
    log.debug("ignoring a %s event", event.get("type"))


async def no_options(ack: AsyncAck) -> None:
    """An external select asked for options: none (`{"options": []}`), which Slack shows as no match."""
    await ack(options=[])


async def acknowledge(ack: AsyncAck, body: dict[str, Any]) -> None:
    log.debug("acknowledging an unhandled %s request", body.get("type"))
    await ack()
