"""The Web API methods BillSleuth uses, answered as Slack answers them over what a workspace holds: the
channels' messages and threads, ephemerals, views and thread statuses. chat.update really changes what was
posted, blocks Slack would refuse are refused, a trigger_id is good once and for 3 seconds. No HTTP here:
the recording server (recorder.py) reads the calls, records them and hands them to these methods.
"""

from __future__ import annotations

import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from bot.cards.limits import SLACK_BLOCKS_JSON_LIMIT, block_problems, blocks_json_size, view_problems
from bot.slack_testing.payloads import Workspace
from bot.slack_testing.slack_objects import EphemeralMessage, StoredMessage, StoredView

TRIGGER_TTL_SECONDS = 3.0

Method = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class SlackError(Exception):
    """An error answer: `{"ok": false, "error": …}` with this HTTP status."""

    def __init__(self, error: str, status: int = 200, **extra: Any) -> None:
        super().__init__(error)
        self.error, self.status, self.extra = error, status, extra


class SlackWebApi:
    """A workspace's messages, views and statuses, and the Web API methods over them (`methods`)."""

    def __init__(self, *, workspace: Workspace, check_triggers: bool, assistant_status: bool) -> None:
        """`assistant_status`: serve assistant.threads.setStatus (a workspace where the app may show a
        thread's status); without it the method is unknown, as for an app not set up for it."""
        self.workspace = workspace
        self.check_triggers = check_triggers
        self.port = 0  # where the server listens, once it does: Socket Mode's URL names it
        self._messages: dict[str, list[StoredMessage]] = defaultdict(list)
        # (channel, ts) → the message with that ts and the replies in its thread, oldest first: a busy
        # benchmark asks for threads after every call it records, so they are not searched for.
        self._threads: dict[tuple[str, str], list[StoredMessage]] = defaultdict(list)
        self._ephemerals: list[EphemeralMessage] = []
        self._views: dict[str, StoredView] = {}
        self._statuses: dict[tuple[str, str], str] = {}  # (channel, thread_ts) → the status shown now
        self._used_triggers: set[str] = set()
        self._last_ts_us = 0
        self.methods: dict[str, Method] = {
            "api.test": self._api_test,
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.getPermalink": self._chat_get_permalink,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "conversations.replies": self._conversations_replies,
            "conversations.history": self._conversations_history,
            "apps.connections.open": self._apps_connections_open,
        }
        if assistant_status:
            self.methods["assistant.threads.setStatus"] = self._assistant_threads_set_status

    # ---- what the tests ask -----------------------------------------------------------------------------

    def messages(self, channel: str | None = None) -> list[StoredMessage]:
        """Messages (bot's and seeded users'), oldest first."""
        if channel is not None:
            return list(self._messages.get(channel, []))
        return sorted((m for ms in self._messages.values() for m in ms), key=lambda m: float(m.ts))

    def message(self, channel: str, ts: str) -> StoredMessage:
        for stored in self._messages.get(channel, []):
            if stored.ts == ts:
                return stored
        raise LookupError(f"no message {ts} in {channel}")

    def thread(self, channel: str, thread_ts: str) -> list[StoredMessage]:
        """The thread's parent (when stored) and its replies, oldest first."""
        return list(self._threads.get((channel, thread_ts), []))

    def replies(self, channel: str, thread_ts: str) -> list[StoredMessage]:
        return [m for m in self.thread(channel, thread_ts) if m.ts != thread_ts]

    def last_in_thread(self, channel: str, thread_ts: str) -> StoredMessage | None:
        replies = self.replies(channel, thread_ts)
        return replies[-1] if replies else None

    def thread_status(self, channel: str, thread_ts: str) -> str:
        """The status a thread shows now ("" when none: never set, cleared, or the app replied since)."""
        return self._statuses.get((channel, thread_ts), "")

    def ephemerals(self, user: str | None = None) -> list[EphemeralMessage]:
        return [e for e in self._ephemerals if user is None or e.user == user]

    def views(self, kind: str | None = None) -> list[StoredView]:
        return [v for v in self._views.values() if kind is None or v.view.get("type") == kind]

    def home(self, user: str) -> dict[str, Any] | None:
        """The Home tab last published for this user."""
        for stored in reversed(list(self._views.values())):
            if stored.user == user and stored.view.get("type") == "home":
                return stored.view
        return None

    # ---- arranging a scene ------------------------------------------------------------------------------

    def _store(self, stored: StoredMessage) -> None:
        """Keep a message, in its channel and in its thread (a message's ts and thread_ts never change)."""
        self._messages[stored.channel].append(stored)
        for key in dict.fromkeys(k for k in (stored.ts, stored.thread_ts) if k):
            self._threads[(stored.channel, key)].append(stored)

    def post_user_message(
        self, channel: str, text: str, *, user: str, thread_ts: str | None = None
    ) -> StoredMessage:
        """A message a person typed (e.g. the @mention that starts a case), so threads have a parent."""
        stored = StoredMessage(
            channel, self._next_ts(), text, user, thread_ts=thread_ts, team=self.workspace.team_id
        )
        self._store(stored)
        return stored

    def _next_ts(self) -> str:
        # Slack's ts is seconds.microseconds and strictly increases within a channel.
        self._last_ts_us = max(int(time.time() * 1_000_000), self._last_ts_us + 1)
        return f"{self._last_ts_us // 1_000_000}.{self._last_ts_us % 1_000_000:06d}"

    # ---- methods ----------------------------------------------------------------------------------------

    async def _api_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "args": args}

    async def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        return {
            "ok": True,
            "url": f"https://{ws.team_domain}.slack.com/",
            "team": "BillSleuth Demo",
            "user": "billsleuth",
            "team_id": ws.team_id,
            "user_id": ws.bot_user_id,
            "bot_id": ws.bot_id,
            "app_id": ws.api_app_id,
            **({"enterprise_id": ws.enterprise_id} if ws.enterprise_id else {}),
            "is_enterprise_install": ws.enterprise_install,
        }

    async def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        # As Slack does, a user id as the channel posts in the app's DM with that user (a D… channel).
        channel = dm_channel(_required(args, "channel", "channel_not_found"))
        text, blocks = _message_content(args)
        ws = self.workspace
        stored = StoredMessage(
            channel,
            self._next_ts(),
            text,
            ws.bot_user_id,
            blocks,
            thread_ts=str(args["thread_ts"]) if args.get("thread_ts") else None,
            bot_id=ws.bot_id,
            team=ws.team_id,
        )
        self._store(stored)
        if stored.thread_ts:  # as in Slack, the app's reply in a thread clears the status it showed there
            self._statuses.pop((channel, stored.thread_ts), None)
        return {"ok": True, "channel": channel, "ts": stored.ts, "message": stored.to_slack()}

    async def _assistant_threads_set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel_id", "channel_not_found")
        thread_ts = _required(args, "thread_ts", "invalid_thread_ts")
        self._statuses[(channel, thread_ts)] = str(args.get("status") or "")
        return {"ok": True}

    async def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel", "channel_not_found")
        ts = _required(args, "ts", "message_not_found")
        try:
            stored = self.message(channel, ts)
        except LookupError:
            raise SlackError("message_not_found") from None
        if stored.user != self.workspace.bot_user_id:
            raise SlackError("cant_update_message")
        text, blocks = _message_content(args)
        if "text" in args:
            stored.text = text
        if "blocks" in args:
            stored.blocks = blocks
        stored.updates += 1
        return {"ok": True, "channel": channel, "ts": ts, "text": stored.text, "message": stored.to_slack()}

    async def _chat_get_permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel", "channel_not_found")
        ts = _required(args, "message_ts", "message_not_found")
        try:
            self.message(channel, ts)
        except LookupError:
            raise SlackError("message_not_found") from None
        link = f"https://{self.workspace.team_domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    async def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel", "channel_not_found")
        user = _required(args, "user", "user_not_in_channel")
        text, blocks = _message_content(args)
        thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        ephemeral = EphemeralMessage(channel, user, text, blocks, thread_ts, self._next_ts())
        self._ephemerals.append(ephemeral)
        return {"ok": True, "message_ts": ephemeral.message_ts}

    async def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        trigger_id = _required(args, "trigger_id", "invalid_arguments")
        self._use_trigger(trigger_id)
        view = _view_arg(args, "modal")
        return {"ok": True, "view": self._store_view(view, user=None).view}

    async def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = args.get("view_id")
        stored = self._views.get(str(view_id)) if view_id else self._by_external_id(args.get("external_id"))
        if stored is None:
            raise SlackError("not_found")
        if args.get("hash") and args["hash"] != stored.view["hash"]:
            raise SlackError("hash_conflict")
        view = _view_arg(args, str(stored.view["type"]))
        return {"ok": True, "view": self._store_view(view, user=stored.user, view_id=stored.id).view}

    async def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        user = _required(args, "user_id", "invalid_arguments")
        view = _view_arg(args, "home")
        current = next((v for v in self._views.values() if v.user == user), None)
        stored = self._store_view(view, user=user, view_id=current.id if current else None)
        return {"ok": True, "view": stored.view}

    async def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel", "channel_not_found")
        ts = _required(args, "ts", "thread_not_found")
        thread = self.thread(channel, ts)
        if not thread:
            raise SlackError("thread_not_found")
        return {
            "ok": True,
            "messages": [m.to_slack() for m in thread],
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    async def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = _required(args, "channel", "channel_not_found")
        top = [m for m in self._messages.get(channel, []) if m.thread_ts in (None, m.ts)]
        return {
            "ok": True,
            "messages": [m.to_slack() for m in reversed(top)],
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    async def _apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(8)
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket-mode?ticket={ticket}"}

    # ---- helpers ----------------------------------------------------------------------------------------

    def _use_trigger(self, trigger_id: str) -> None:
        if trigger_id in self._used_triggers:
            raise SlackError("exchanged_trigger_id")
        if self.check_triggers and trigger_age(trigger_id) > TRIGGER_TTL_SECONDS:
            raise SlackError("expired_trigger_id")
        self._used_triggers.add(trigger_id)

    def _by_external_id(self, external_id: Any) -> StoredView | None:
        if not external_id:
            return None
        return next((v for v in self._views.values() if v.view.get("external_id") == external_id), None)

    def _store_view(
        self, view: dict[str, Any], *, user: str | None, view_id: str | None = None
    ) -> StoredView:
        vid = view_id or f"V{secrets.token_hex(5).upper()}"
        ws = self.workspace
        full = {
            "id": vid,
            "team_id": ws.team_id,
            "type": view["type"],
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "title": view.get("title"),
            "close": view.get("close"),
            "submit": view.get("submit"),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "previous_view_id": None,
            "root_view_id": vid,
            "app_id": ws.api_app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": ws.team_id,
            "bot_id": ws.bot_id,
        }
        stored = StoredView(vid, full, user)
        self._views[vid] = stored
        return stored


def trigger_age(trigger_id: str) -> float:
    """Seconds since one of our trigger_ids was issued (they start with the time in ms); 0 for others."""
    issued_ms = trigger_id.split(".", 1)[0]
    if not issued_ms.isdigit() or len(issued_ms) < 12:
        return 0.0
    return time.time() - int(issued_ms) / 1000


def dm_channel(channel: str) -> str:
    """Where a message to `channel` lands: a user id (U…, W…) means the app's DM with that user."""
    return "D" + channel[1:] if channel[:1] in ("U", "W") else channel


def _required(args: Mapping[str, Any], name: str, error: str) -> str:
    value = args.get(name)
    if not value:
        raise SlackError(error)
    return str(value)


def _message_content(args: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    text = str(args.get("text") or "")
    blocks = args.get("blocks") or []
    if not text and not blocks:
        raise SlackError("no_text")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) and b.get("type") for b in blocks):
        raise SlackError("invalid_blocks_format")
    if blocks_json_size(blocks) > SLACK_BLOCKS_JSON_LIMIT:
        raise SlackError("msg_blocks_too_long")
    problems = block_problems(blocks, "message") + _model_problems(blocks)
    if problems:
        raise SlackError("invalid_blocks", errors=problems)
    return text, blocks


def _model_problems(blocks: list[dict[str, Any]]) -> list[str]:
    """What slack_sdk's own block models refuse (unknown types, fields over their limits)."""
    problems: list[str] = []
    for index, raw in enumerate(blocks):
        try:
            parsed = Block.parse(raw)
            if parsed is None:
                problems.append(f"block {index}: unknown type {raw.get('type')!r}")
            else:
                parsed.to_dict()
        except (SlackObjectFormationError, KeyError, TypeError) as error:
            problems.append(f"block {index}: {error}")
    return problems


def _view_arg(args: Mapping[str, Any], kind: str) -> dict[str, Any]:
    view = args.get("view")
    if not isinstance(view, dict):
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing view"]})
    if view.get("type") != kind:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] view must be {kind}"]}
        )
    problems = view_problems(view) + _model_problems(list(view.get("blocks") or []))
    if problems:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]}
        )
    return view
