"""Events API callbacks as Slack sends them: mentions (and their edits), reactions, channel messages, App
Home opened."""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from bot.slack_testing.payloads.workspace import DEMO, Workspace, new_event_id, new_ts, next_number


def app_mention(
    text: str,
    *,
    user: str,
    channel: str,
    ts: str | None = None,
    thread_ts: str | None = None,
    event_id: str | None = None,
    subtype: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """An `app_mention` event_callback. `text` is the raw message text: write the mention as `<@BOTID>`
    (see `mention_text`). Give `thread_ts` when the mention was typed inside a thread, and `subtype` for
    a message of another kind that mentions the app: `thread_broadcast` (a thread reply also sent to the
    channel; give `thread_ts`), `file_share` (a message with a file attached)."""
    ts = ts or new_ts()
    event: dict[str, Any] = {
        "client_msg_id": secrets.token_hex(16),
        "type": "app_mention",
        "text": text,
        "user": user,
        "ts": ts,
        "team": workspace.team_id,
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if subtype:
        event["subtype"] = subtype
    if subtype == "file_share":
        event["upload"] = False
        event["files"] = [{"id": f"F{next_number():08d}", "name": "invoice.pdf", "filetype": "pdf"}]
    return event_callback(event, event_id=event_id, workspace=workspace)


def edited_mention(original: Mapping[str, Any], text: str, *, at: str | None = None) -> dict[str, Any]:
    """What Slack sends when the author edits a message that mentions the app: the `app_mention` again,
    as a new event (its own event_id), on the same message (the same `ts`), with the new text and an
    `edited` field naming who edited it and when."""
    edited_at = at or new_ts()
    event = {
        **dict(original["event"]),
        "text": text,
        "edited": {"user": original["event"]["user"], "ts": edited_at},
        "event_ts": edited_at,
    }
    return {**dict(original), "event": event, "event_id": new_event_id(), "event_time": int(float(edited_at))}


def event_callback(
    event: Mapping[str, Any], *, event_id: str | None = None, workspace: Workspace = DEMO
) -> dict[str, Any]:
    """The Events API envelope around `event` (any type: app_mention, reaction_added, message, …)."""
    channel = event.get("channel") or (event.get("item") or {}).get("channel") or ""
    org = {"enterprise_id": workspace.enterprise_id} if workspace.enterprise_id else {}
    return {
        "token": "unused-verification-token",
        "team_id": workspace.team_id,
        **org,
        "api_app_id": workspace.api_app_id,
        "event": dict(event),
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(float(event.get("event_ts") or time.time())),
        "authorizations": [
            {
                "enterprise_id": workspace.enterprise_id,
                "team_id": workspace.team_id,
                "user_id": workspace.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": workspace.enterprise_install,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{_event_type_token(str(event.get('type')))}-{workspace.team_id}-{channel}",
    }


def _event_type_token(event_type: str) -> str:
    """The opaque middle of Slack's event_context: base64url of `{"et":"<type>"}`, unpadded."""
    raw = json.dumps({"et": event_type}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def reaction_added(
    reaction: str, *, user: str, channel: str, item_ts: str, workspace: Workspace = DEMO
) -> dict[str, Any]:
    """Someone added an emoji reaction to a message."""
    ts = new_ts()
    event = {
        "type": "reaction_added",
        "user": user,
        "reaction": reaction,
        "item": {"type": "message", "channel": channel, "ts": item_ts},
        "item_user": user,
        "event_ts": ts,
    }
    return event_callback(event, workspace=workspace)


def channel_message(
    text: str,
    *,
    user: str | None,
    channel: str,
    subtype: str | None = None,
    bot_id: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """A `message` event in a channel (`message.channels`): a person's, or with `bot_id` a bot's."""
    ts = new_ts()
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": ts,
        "team": workspace.team_id,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "channel",
    }
    if user:
        event["user"] = user
    if subtype:
        event["subtype"] = subtype
    if bot_id:
        event["bot_id"] = bot_id
    return event_callback(event, workspace=workspace)


def mention_text(words: str, workspace: Workspace = DEMO) -> str:
    """`@BillSleuth C-0007 …` as Slack delivers it: `<@U0BILLSLTH> C-0007 …`."""
    return f"<@{workspace.bot_user_id}> {words}"


def app_home_opened(*, user: str, workspace: Workspace = DEMO) -> dict[str, Any]:
    ts = new_ts()
    return {
        "token": "unused-verification-token",
        "team_id": workspace.team_id,
        "api_app_id": workspace.api_app_id,
        "event": {
            "type": "app_home_opened",
            "user": user,
            "channel": "D0HOME",
            "tab": "home",
            "event_ts": ts,
        },
        "type": "event_callback",
        "event_id": new_event_id(),
        "event_time": int(float(ts)),
    }
