"""Signed requests as Slack sends them, for `billsleuth demo` and the tests.

The field structure follows the payloads in slackapi/bolt-python's scenario tests (events, block_actions,
view_submission, slash commands, message shortcuts); the values are our own. Events API callbacks are
sent as JSON; interactive payloads as a form with one `payload` field holding JSON; slash commands as a
plain form.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import itertools
import json
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from bot.cards.ids import INVESTIGATE_SHORTCUT_CALLBACK_ID, SLASH_COMMAND

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
RETRY_NUM_HEADER = "X-Slack-Retry-Num"
RETRY_REASON_HEADER = "X-Slack-Retry-Reason"

_sequence = itertools.count(1)


@dataclass(frozen=True)
class Workspace:
    """The ids every payload shares; the recording server answers auth.test with the same ones."""

    team_id: str = "T0BILLSLTH"
    team_domain: str = "billsleuth-demo"
    api_app_id: str = "A0BILLSLTH"
    bot_user_id: str = "U0BILLSLTH"
    bot_id: str = "B0BILLSLTH"
    enterprise_id: str | None = None  # the Enterprise Grid org the workspace belongs to, if any
    enterprise_install: bool = False  # installed org-wide (every workspace of the org), not on one


DEMO = Workspace()


# ---- signing ----------------------------------------------------------------------------------------------


def signature(body: str | bytes, secret: str, timestamp: int | str) -> str:
    """Slack's v0 signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`, keyed by the secret."""
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(timestamp).encode() + b":" + raw
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sign(body: str | bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack adds to every request: signature and request timestamp (default: now)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {SIGNATURE_HEADER: signature(body, secret, ts), TIMESTAMP_HEADER: str(ts)}


# ---- encoding ---------------------------------------------------------------------------------------------

INTERACTIVE_TYPES = frozenset(
    {"block_actions", "view_submission", "view_closed", "message_action", "shortcut", "block_suggestion"}
)


def encode(payload: Mapping[str, Any]) -> tuple[str, str]:
    """(body, content type) the way Slack sends this kind of payload."""
    kind = payload.get("type")
    if kind in ("event_callback", "url_verification"):
        return json.dumps(payload), "application/json"
    if kind in INTERACTIVE_TYPES:
        return urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    if "command" in payload:  # slash commands are a flat form
        return urlencode({k: str(v) for k, v in payload.items()}), "application/x-www-form-urlencoded"
    raise ValueError(f"not a payload shape Slack sends: type {kind!r}")


def socket_mode_type(payload: Mapping[str, Any]) -> str:
    """The Socket Mode envelope type that carries this payload."""
    if payload.get("type") == "event_callback":
        return "events_api"
    if "command" in payload:
        return "slash_commands"
    return "interactive"


# ---- ids --------------------------------------------------------------------------------------------------


def new_event_id() -> str:
    return f"Ev{next(_sequence):08d}{secrets.token_hex(3).upper()}"


def new_trigger_id() -> str:
    """Opaque to Slack apps; ours start with the issue time in ms so the recorder can expire them (3 s)."""
    return f"{int(time.time() * 1000)}.{next(_sequence)}.{secrets.token_hex(10)}"


def new_ts() -> str:
    now = time.time()
    return f"{int(now)}.{int((now % 1) * 1_000_000):06d}"


def fake_response_url(team_id: str) -> str:
    return f"https://hooks.slack.com/actions/{team_id}/{next(_sequence)}/{secrets.token_urlsafe(18)}"


def _user(user_id: str, ws: Workspace) -> dict[str, str]:
    name = user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": ws.team_id}


def _team(ws: Workspace) -> dict[str, str]:
    team = {"id": ws.team_id, "domain": ws.team_domain}
    return {**team, "enterprise_id": ws.enterprise_id} if ws.enterprise_id else team


def _enterprise(ws: Workspace) -> dict[str, str] | None:
    return {"id": ws.enterprise_id, "name": ws.enterprise_id.lower()} if ws.enterprise_id else None


# ---- Events API -------------------------------------------------------------------------------------------


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
        event["files"] = [{"id": f"F{next(_sequence):08d}", "name": "invoice.pdf", "filetype": "pdf"}]
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


# ---- interactivity ----------------------------------------------------------------------------------------


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
        "user": _user(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": _team(workspace),
        "enterprise": _enterprise(workspace),
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
        "user": _user(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": trigger_id or new_trigger_id(),
        "team": _team(workspace),
        "enterprise": _enterprise(workspace),
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
    vid = view_id or str(view.get("id") or f"V{next(_sequence):08d}")
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
        "team": _team(workspace),
        "user": _user(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "trigger_id": new_trigger_id(),
        "view": submitted,
        "response_urls": [],
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": _enterprise(workspace),
    }


def view_closed(view: Mapping[str, Any], *, user: str, workspace: Workspace = DEMO) -> dict[str, Any]:
    """A modal closed with its Cancel button or ×, sent when the view asked for it (`notify_on_close`)."""
    closed = {
        "id": str(view.get("id") or f"V{next(_sequence):08d}"),
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
        "team": _team(workspace),
        "user": _user(user, workspace),
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "view": closed,
        "is_cleared": False,
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": _enterprise(workspace),
    }


def block_suggestion(
    *, user: str, action_id: str, block_id: str, value: str, workspace: Workspace = DEMO
) -> dict[str, Any]:
    """An external select asking for its options as the user types `value` (an options load request)."""
    return {
        "type": "block_suggestion",
        "user": _user(user, workspace),
        "container": {"type": "view", "view_id": f"V{next(_sequence):08d}"},
        "api_app_id": workspace.api_app_id,
        "token": "unused-verification-token",
        "action_id": action_id,
        "block_id": block_id,
        "value": value,
        "team": _team(workspace),
        "enterprise": _enterprise(workspace),
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
        "team": _team(workspace),
        "user": {"id": user, "name": user.lower()},
        "channel": {"id": channel, "name": f"channel-{channel.lower()}"},
        "is_enterprise_install": workspace.enterprise_install,
        "enterprise": _enterprise(workspace),
        "callback_id": callback_id,
        "trigger_id": new_trigger_id(),
        "message_ts": message["ts"],
        "message": {"type": "message", "team": workspace.team_id, **dict(message)},
        "response_url": response_url or fake_response_url(workspace.team_id),
    }


# ---- Slack Connect ----------------------------------------------------------------------------------------


def in_shared_channel(payload: Mapping[str, Any], *, user_team: str) -> dict[str, Any]:
    """`payload` as Slack sends it when its actor acts in a Slack Connect channel (one shared with other
    organisations) and belongs to `user_team` (a workspace `T…`, or an Enterprise Grid org `E…`). The
    envelope stays the installed workspace's (its team_id and authorizations); the actor's own team is
    where Slack names it: for events `is_ext_shared_channel: true` and the event's `user_team`,
    `source_team`, `team` and `user_profile.team` (as in Slack's message and app_mention events of shared
    channels); for interactive payloads `user.team_id`."""
    shared = copy.deepcopy(dict(payload))
    event = shared.get("event")
    if shared.get("type") == "event_callback" and isinstance(event, dict):
        shared["is_ext_shared_channel"] = True
        name = str(event.get("user") or "someone").lower()
        event.update(user_team=user_team, source_team=user_team, team=user_team)
        event["user_profile"] = {"name": name, "real_name": name, "display_name": name, "team": user_team}
    elif isinstance(shared.get("user"), dict):
        shared["user"] = {**shared["user"], "team_id": user_team}
    else:
        raise ValueError("Slack Connect shapes are for events and interactive payloads")
    return shared
