"""A recording Slack Web API server on 127.0.0.1, for `billsleuth demo` and the tests.

It answers the methods BillSleuth uses the way Slack does (bearer or form token, form or JSON bodies,
`ok`/`error` bodies, HTTP 429 with Retry-After when rate limited; the methods themselves and what they
keep are web_api.py's), and records every call for the tests to query. It also serves Socket Mode: the
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from bot.config import SlackSettings
from bot.slack_testing.payloads import DEMO, Workspace, socket_mode_type
from bot.slack_testing.slack_objects import RecordedCall
from bot.slack_testing.web_api import SlackError, SlackWebApi, dm_channel

JSON_FIELDS = ("blocks", "attachments", "view", "metadata")
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
__all__ = ["SlackRecorder", "dm_channel"]  # dm_channel: where tests look for it


@dataclass
class _Failure:
    error: str
    status: int
    retry_after: int | None


def _peer(request: web.Request) -> str:
    address = request.transport.get_extra_info("peername") if request.transport else None
    return f"{address[0]}:{address[1]}" if address else ""


class SlackRecorder(SlackWebApi):
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
        super().__init__(
            workspace=workspace, check_triggers=check_triggers, assistant_status=assistant_status
        )
        self.bot_token = bot_token or f"xoxb-{secrets.token_hex(6)}-{secrets.token_hex(12)}"
        self.app_token = app_token or f"xapp-1-{workspace.api_app_id}-{secrets.token_hex(12)}"
        self._calls: list[RecordedCall] = []
        self._failures: dict[str, deque[_Failure]] = defaultdict(deque)
        self._changed = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._runner: web.AppRunner | None = None

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

    # ---- what the tests ask (of what Slack holds: web_api.py) --------------------------------------------

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

    # ---- arranging a scene (post_user_message: web_api.py) ---------------------------------------------

    def open_connections(self) -> int:
        """Client connections open now, each with any request still being answered on it. 0 once a
        stopped process's sockets are closed and every request it had sent was answered (or dropped):
        from then on, what it told Slack is all recorded."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

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
            handler = self.methods.get(method)
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
