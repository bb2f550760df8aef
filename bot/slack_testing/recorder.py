"""A recording Slack Web API server on 127.0.0.1, for `billsleuth demo` and the tests.

It answers the methods BillSleuth uses the way Slack does (bearer or form token, form or JSON bodies,
`ok`/`error` bodies, HTTP 429 with Retry-After when rate limited), keeps every channel's messages so that
chat.update really changes what was posted, refuses blocks Slack would refuse, expires trigger_ids
after 3 seconds, and records every call for the tests to query. It also serves Socket Mode: the
app-level token opens a WebSocket on which `socket_send` delivers envelopes and collects their acks.
Point SLACK_API_URL at `recorder.api_url`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from bot.cards.limits import SLACK_BLOCKS_JSON_LIMIT, block_problems, blocks_json_size, view_problems
from bot.config import SlackSettings
from bot.slack_testing.payloads import DEMO, Workspace, socket_mode_type

TRIGGER_TTL_SECONDS = 3.0
JSON_FIELDS = ("blocks", "attachments", "view", "metadata")
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class SlackError(Exception):
    """An error answer: `{"ok": false, "error": …}` with this HTTP status."""

    def __init__(self, error: str, status: int = 200, **extra: Any) -> None:
        super().__init__(error)
        self.error, self.status, self.extra = error, status, extra


@dataclass(frozen=True)
class RecordedCall:
    method: str
    args: dict[str, Any]  # the parsed body and query, JSON-encoded form fields (blocks, view) decoded
    token: str | None
    at: datetime
    http_status: int
    response: dict[str, Any]
    peer: str = ""  # the caller's end of the TCP connection: a client keeping connections alive reuses one

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        return self.response.get("error")


@dataclass
class StoredMessage:
    channel: str
    ts: str
    text: str
    user: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    bot_id: str | None = None
    team: str = DEMO.team_id
    updates: int = 0  # how many chat.update calls changed it

    def to_slack(self) -> dict[str, Any]:
        """The message object as Slack's API returns it."""
        data: dict[str, Any] = {"type": "message", "user": self.user, "text": self.text, "ts": self.ts}
        data["team"] = self.team
        if self.bot_id:
            data["bot_id"] = self.bot_id
        if self.blocks:
            data["blocks"] = self.blocks
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if self.updates:
            data["edited"] = {"user": self.user, "ts": self.ts}
        return data


@dataclass(frozen=True)
class EphemeralMessage:
    channel: str
    user: str  # who sees it
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    message_ts: str


@dataclass
class StoredView:
    id: str
    view: dict[str, Any]  # as views.* returned it
    user: str | None  # the Home tab's owner (views.publish); None for modals


@dataclass
class _Failure:
    error: str
    status: int
    retry_after: int | None


def _peer(request: web.Request) -> str:
    address = request.transport.get_extra_info("peername") if request.transport else None
    return f"{address[0]}:{address[1]}" if address else ""


class SlackRecorder:
    """Use as `async with SlackRecorder() as slack:`; then `SlackSettings` from `slack.settings(...)`."""

    def __init__(
        self,
        *,
        workspace: Workspace = DEMO,
        bot_token: str | None = None,
        app_token: str | None = None,
        check_triggers: bool = True,
        assistant_status: bool = False,
    ) -> None:
        """`assistant_status`: serve assistant.threads.setStatus (a workspace where the app may show a
        thread's status); without it the method is unknown, as for an app not set up for it."""
        self.workspace = workspace
        self.bot_token = bot_token or f"xoxb-{secrets.token_hex(6)}-{secrets.token_hex(12)}"
        self.app_token = app_token or f"xapp-1-{workspace.api_app_id}-{secrets.token_hex(12)}"
        self.check_triggers = check_triggers
        self._calls: list[RecordedCall] = []
        self._messages: dict[str, list[StoredMessage]] = defaultdict(list)
        # (channel, ts) → the message with that ts and the replies in its thread, oldest first: a busy
        # benchmark asks for threads after every call it records, so they are not searched for.
        self._threads: dict[tuple[str, str], list[StoredMessage]] = defaultdict(list)
        self._ephemerals: list[EphemeralMessage] = []
        self._views: dict[str, StoredView] = {}
        self._statuses: dict[tuple[str, str], str] = {}  # (channel, thread_ts) → the status shown now
        self._used_triggers: set[str] = set()
        self._failures: dict[str, deque[_Failure]] = defaultdict(deque)
        self._last_ts_us = 0
        self._changed = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
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
            self._methods["assistant.threads.setStatus"] = self._assistant_threads_set_status

    # ---- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> SlackRecorder:
        web_app = web.Application()
        web_app.add_routes(
            [
                web.route("*", "/api/{method}", self._handle_api),
                web.post("/hooks/{hook}", self._handle_hook),
                web.get("/socket-mode", self._handle_socket),
            ]
        )
        self._runner = web.AppRunner(web_app, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site.port
        return self

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"server stopping")
        for pending in self._acks.values():
            pending.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackRecorder:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """What SLACK_API_URL should be."""
        return f"{self.base_url}/api/"

    def settings(self, signing_secret: str = "", port: int = 0) -> SlackSettings:
        """Slack settings that point the app at this server, with its tokens."""
        return SlackSettings(
            bot_token=self.bot_token,
            app_token=self.app_token,
            signing_secret=signing_secret,
            api_url=self.api_url,
            port=port,
        )

    # ---- what the tests ask -----------------------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[RecordedCall]:
        return [c for c in self._calls if method is None or c.method == method]

    def last_call(self, method: str) -> RecordedCall:
        found = self.calls(method)
        if not found:
            raise LookupError(f"no {method} call was made")
        return found[-1]

    async def wait_for(
        self,
        method: str,
        count: int = 1,
        *,
        timeout: float = 5.0,
        where: Callable[[RecordedCall], bool] | None = None,
    ) -> list[RecordedCall]:
        """The calls of `method` (matching `where`) once there are at least `count`; TimeoutError if not."""

        def matching() -> list[RecordedCall]:
            return [c for c in self.calls(method) if where is None or where(c)]

        try:
            await self.wait_until(lambda: len(matching()) >= count, timeout=timeout)
        except TimeoutError:
            raise TimeoutError(
                f"waited {timeout:g}s for {count} {method} call(s); saw {len(matching())}"
            ) from None
        return matching()

    async def wait_until(self, condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
        """Return once `condition()` holds, re-checking only when a call was recorded (no busy polling)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"the condition did not hold within {timeout:g}s")
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):  # no task per wait, as wait_for would make
                    await changed.wait()

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

    def fail_next(
        self, method: str, error: str = "ratelimited", *, times: int = 1, retry_after: int = 1
    ) -> None:
        """Make the next `times` calls of `method` fail; `ratelimited` answers HTTP 429 with Retry-After."""
        status = 429 if error == "ratelimited" else 200
        for _ in range(times):
            self._failures[method].append(_Failure(error, status, retry_after if status == 429 else None))

    def response_url(self) -> str:
        """A response_url for payloads; what is POSTed to it is recorded as method `response_url`."""
        return f"{self.base_url}/hooks/{secrets.token_urlsafe(12)}"

    # ---- Socket Mode ------------------------------------------------------------------------------------

    @property
    def socket_connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets)

    async def wait_for_socket(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.socket_connected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Socket Mode connection within {timeout:g}s")
            await asyncio.sleep(0.02)

    async def socket_send(
        self, payload: Mapping[str, Any], *, timeout: float = 3.0, retry_attempt: int = 0
    ) -> dict[str, Any]:
        """Deliver a payload over Socket Mode and return the app's ack (TimeoutError after `timeout`)."""
        await self.wait_for_socket(timeout)
        ws = next(ws for ws in self._sockets if not ws.closed)
        envelope_id = str(uuid.uuid4())
        kind = socket_mode_type(payload)
        pending: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = pending
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": dict(payload),
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        try:
            await ws.send_str(json.dumps(envelope))
            return await asyncio.wait_for(pending, timeout)
        finally:
            self._acks.pop(envelope_id, None)

    async def _handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "billsleuth-recorder", "approximate_connection_time": 3600},
            "connection_info": {"app_id": self.workspace.api_app_id},
        }
        await ws.send_str(json.dumps(hello))
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    ack = json.loads(frame.data)
                    pending = self._acks.get(str(ack.get("envelope_id")))
                    if pending is not None and not pending.done():
                        pending.set_result(ack)
        finally:
            self._sockets.remove(ws)
        return ws

    # ---- HTTP plumbing ----------------------------------------------------------------------------------

    async def _handle_hook(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        self._record("response_url", {**body, "url": str(request.url)}, None, 200, {"ok": True})
        return web.Response(text="ok")

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = {}
        token: str | None = None
        try:
            args = await _read_args(request)
            token = _token(request, args)
            self._authorise(method, token)
            self._maybe_fail(method)
            handler = self._methods.get(method)
            if handler is None:
                raise SlackError("unknown_method", req_method=method)
            status, body = 200, await handler(args)
        except SlackError as failure:
            status, body = failure.status, {"ok": False, "error": failure.error, **failure.extra}
        headers = {"Retry-After": str(body.pop("retry_after"))} if "retry_after" in body else {}
        self._record(method, args, token, status, body, _peer(request))
        return web.json_response(body, status=status, headers=headers)

    def _record(
        self, method: str, args: dict[str, Any], token: str | None, status: int, body: dict, peer: str = ""
    ) -> None:
        self._calls.append(RecordedCall(method, args, token, datetime.now(UTC), status, body, peer))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _authorise(self, method: str, token: str | None) -> None:
        if not token:
            raise SlackError("not_authed")
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token == wanted:
            return
        if token in (self.app_token, self.bot_token):
            raise SlackError("not_allowed_token_type")
        raise SlackError("invalid_auth")

    def _maybe_fail(self, method: str) -> None:
        queue = self._failures.get(method)
        if queue:
            failure = queue.popleft()
            extra = {"retry_after": failure.retry_after} if failure.retry_after is not None else {}
            raise SlackError(failure.error, failure.status, **extra)

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
        if self.check_triggers and _trigger_age(trigger_id) > TRIGGER_TTL_SECONDS:
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


def _trigger_age(trigger_id: str) -> float:
    """Seconds since one of our trigger_ids was issued (they start with the time in ms); 0 for others."""
    issued_ms = trigger_id.split(".", 1)[0]
    if not issued_ms.isdigit() or len(issued_ms) < 12:
        return 0.0
    return time.time() - int(issued_ms) / 1000


async def _read_args(request: web.Request) -> dict[str, Any]:
    """Query parameters plus the body, JSON or form, as Slack accepts both."""
    args: dict[str, Any] = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            try:
                body = await request.json()
            except ValueError:
                raise SlackError("invalid_json") from None
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            args.update(body)
        elif request.content_type in FORM_TYPES:
            form = await request.post()
            args.update({key: str(value) for key, value in form.items()})
    for key in JSON_FIELDS:
        value = args.get(key)
        if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            try:
                args[key] = json.loads(value)
            except ValueError:
                raise SlackError(f"invalid_{key}") from None
    return args


def _token(request: web.Request, args: dict[str, Any]) -> str | None:
    authorization = request.headers.get("Authorization", "")
    if authorization.startswith("Bearer "):
        args.pop("token", None)
        return authorization.removeprefix("Bearer ").strip()
    token = args.pop("token", None)
    return str(token) if token else None


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
