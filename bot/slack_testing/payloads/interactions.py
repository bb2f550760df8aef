"""Interactive payloads as Slack sends them: clicks on a message's or a view's elements, modal submissions
and closes, external select suggestions, slash commands and message shortcuts."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

from bot.cards.ids import INVESTIGATE_SHORTCUT_CALLBACK_ID, SLASH_COMMAND
from bot.slack_testing.payloads.workspace import (
    DEMO,
    Workspace,
    enterprise_object,
    fake_response_url,
    new_trigger_id,
    new_ts,
    next_number,
    team_object,
    user_object,
)


def block_actions(
    *,
    user: str,
    action: Mapping[str, Any],
    block_id: str,
    channel: str,
    message: Mapping[str, Any],
    trigger_id: str | None = None,
    response_url: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """A click on an element of a message. `action` is the element as it is in the message's blocks
    (type, action_id, value, text); `message` is the message as Slack shows it (ts, text, blocks…)."""
    clicked = {**dict(action), "block_id": block_id, "action_ts": new_ts()}
    container = {"type": "message", "message_ts": message["ts"], "channel_id": channel, "is_ephemeral": False}
    if message.get("thread_ts"):
        container["thread_ts"] = message["thread_ts"]
    return {
        "type": "block_actions",
        "user": user_object(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": team_object(workspace),
        "enterprise": enterprise_object(workspace),
        "is_enterprise_install": workspace.enterprise_install,
        "channel": {"id": channel, "name": f"channel-{channel.lower()}"},
        "message": dict(message),
        "state": {"values": {}},
        "response_url": response_url or fake_response_url(workspace.team_id),
        "actions": [clicked],
    }


def view_block_actions(
    *,
    user: str,
    action: Mapping[str, Any],
    block_id: str,
    view: Mapping[str, Any],
    trigger_id: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """A click on an element of a view (App Home or a modal): no channel, no message, no response_url."""
    clicked = {**dict(action), "block_id": block_id, "action_ts": new_ts()}
    view_id = str(view.get("id") or "V0HOME")
    return {
        "type": "block_actions",
        "user": user_object(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": trigger_id or new_trigger_id(),
        "team": team_object(workspace),
        "enterprise": enterprise_object(workspace),
        "is_enterprise_install": workspace.enterprise_install,
        "view": {**dict(view), "id": view_id},
        "actions": [clicked],
    }


def find_element(
    blocks: Iterable[Mapping[str, Any]], action_id: str, value: str | None = None
) -> tuple[str, dict]:
    """(block_id, element) of the first interactive element with this action_id (and value)."""
    for block in blocks:
        for element in block.get("elements") or ([block["accessory"]] if block.get("accessory") else []):
            if element.get("action_id") == action_id and (value is None or element.get("value") == value):
                return str(block.get("block_id", "")), dict(element)
    raise LookupError(f"no element with action_id {action_id!r}" + (f" and value {value!r}" if value else ""))


def click(
    message: Mapping[str, Any],
    *,
    user: str,
    channel: str,
    action_id: str,
    value: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """A click on a button of a message as it was posted (e.g. one the recording server holds)."""
    block_id, element = find_element(message.get("blocks") or [], action_id, value)
    return block_actions(
        user=user, action=element, block_id=block_id, channel=channel, message=message, workspace=workspace
    )


def view_submission(
    view: Mapping[str, Any],
    *,
    user: str,
    values: Mapping[str, Mapping[str, str]],
    view_id: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """The submission of a modal. `view` is the view as opened (callback_id, private_metadata, blocks);
    `values` maps block_id → action_id → the text typed into that plain-text input."""
    state = {
        block: {action: {"type": "plain_text_input", "value": text} for action, text in inputs.items()}
        for block, inputs in values.items()
    }
    vid = view_id or str(view.get("id") or f"V{next_number():08d}")
    submitted = {
        "id": vid,
        "team_id": workspace.team_id,
        "type": "modal",
        "blocks": list(view.get("blocks") or []),
        "private_metadata": view.get("private_metadata", ""),
        "callback_id": view.get("callback_id", ""),
        "state": {"values": state},
        "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
        "title": view.get("title"),
        "clear_on_close": False,
        "notify_on_close": False,
        "close": view.get("close"),
        "submit": view.get("submit"),
        "previous_view_id": None,
        "root_view_id": vid,
        "app_id": workspace.api_app_id,
        "external_id": "",
        "app_installed_team_id": workspace.team_id,
        "bot_id": workspace.bot_id,
    }
    return {
        "type": "view_submission",
        "team": team_object(workspace),
        "user": user_object(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "trigger_id": new_trigger_id(),
        "view": submitted,
        "response_urls": [],
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": enterprise_object(workspace),
    }


def view_closed(view: Mapping[str, Any], *, user: str, workspace: Workspace = DEMO) -> dict[str, Any]:
    """A modal closed with its Cancel button or ×, sent when the view asked for it (`notify_on_close`)."""
    closed = {
        "id": str(view.get("id") or f"V{next_number():08d}"),
        "team_id": workspace.team_id,
        "type": "modal",
        "blocks": list(view.get("blocks") or []),
        "private_metadata": view.get("private_metadata", ""),
        "callback_id": view.get("callback_id", ""),
        "state": {"values": {}},
        "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
        "title": view.get("title"),
        "clear_on_close": False,
        "notify_on_close": True,
        "close": view.get("close"),
        "submit": view.get("submit"),
        "app_id": workspace.api_app_id,
        "bot_id": workspace.bot_id,
    }
    return {
        "type": "view_closed",
        "team": team_object(workspace),
        "user": user_object(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "view": closed,
        "is_cleared": False,
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": enterprise_object(workspace),
    }


def block_suggestion(
    *, user: str, action_id: str, block_id: str, value: str, workspace: Workspace = DEMO
) -> dict[str, Any]:
    """An external select asking for its options as the user types `value` (an options load request)."""
    return {
        "type": "block_suggestion",
        "user": user_object(user, workspace),
        "container": {"type": "view", "view_id": f"V{next_number():08d}"},
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "action_id": action_id,
        "block_id": block_id,
        "value": value,
        "team": team_object(workspace),
        "enterprise": enterprise_object(workspace),
        "is_enterprise_install": workspace.enterprise_install,
    }


def slash_command(
    text: str,
    *,
    user: str,
    channel: str,
    command: str = SLASH_COMMAND,
    response_url: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, str]:
    """A slash command (sent as a flat form): `/billsleuth show CN-0001` is text `show CN-0001`."""
    return {
        "token": "unused-verification-token",
        "team_id": workspace.team_id,
        "team_domain": workspace.team_domain,
        "channel_id": channel,
        "channel_name": f"channel-{channel.lower()}",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": workspace.api_app_id,
        **({"enterprise_id": workspace.enterprise_id} if workspace.enterprise_id else {}),
        "is_enterprise_install": "true" if workspace.enterprise_install else "false",
        "response_url": response_url or fake_response_url(workspace.team_id),
        "trigger_id": new_trigger_id(),
    }


def message_action(
    message: Mapping[str, Any],
    *,
    user: str,
    channel: str,
    callback_id: str = INVESTIGATE_SHORTCUT_CALLBACK_ID,
    response_url: str | None = None,
    workspace: Workspace = DEMO,
) -> dict[str, Any]:
    """A message shortcut ("Investigate billing") run on `message` (needs its ts, text and user)."""
    return {
        "type": "message_action",
        "token": "unused-verification-token",
        "action_ts": new_ts(),
        "team": team_object(workspace),
        "user": {"id": user, "name": user.lower()},
        "channel": {"id": channel, "name": f"channel-{channel.lower()}"},
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": enterprise_object(workspace),
        "callback_id": callback_id,
        "trigger_id": new_trigger_id(),
        "message_ts": message["ts"],
        "message": {"type": "message", "team": workspace.team_id, **dict(message)},
        "response_url": response_url or fake_response_url(workspace.team_id),
    }
