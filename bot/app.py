"""The Slack app: Bolt's AsyncApp, served over HTTP (aiohttp) or Socket Mode, with a clean shutdown.

How slow work stays off the ack path (checked in slack_bolt 1.30's source,
slack_bolt/listener/asyncio_runner.py, AsyncioListenerRunner.run):

- With `process_before_response=False` (what `create_app` sets) the runner does not await the listener.
  For Events API listeners (`auto_acknowledgement`) it awaits `ack()` itself first; then it starts the
  listener with `asyncio.ensure_future(...)` and polls `ack.response` every 10 ms for up to the
  listener's `ack_timeout` (3 s). The HTTP response (or the Socket Mode envelope ack) goes out as soon
  as `ack()` has been awaited, while the rest of the listener keeps running on the loop.
  (`process_before_response=True` is the FaaS mode: it awaits the whole listener before responding.)
- Lazy listeners (`app.action(..., ack=..., lazy=[...])`) are started the same way, by
  AsyncioLazyListenerRunner with `asyncio.ensure_future`; in a long-lived process they add nothing over
  "await ack() first, then keep going".
- Bolt keeps no reference to those futures (`_f = asyncio.ensure_future(...)` is a local), and asyncio
  holds tasks only weakly, so nothing waits for them at shutdown. Listeners therefore `await ack()`
  first (opening a modal with the 3-second trigger_id also happens before anything slow), do quick
  Slack calls inline, and hand anything long (an investigation, resuming a paused graph) to
  `app.background.start(...)`, which holds the task, logs its failure, and is drained at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import SlackConfigError, SlackSettings

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
DRAIN_TIMEOUT_SECONDS = 30.0

RegisterListeners = Callable[[AsyncApp], None]


class BackgroundWork:
    """Slow work a listener starts after its ack: held until done, failures logged, drained at exit."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float = DRAIN_TIMEOUT_SECONDS) -> None:
        """Wait for running work; cancel whatever is still running after `timeout` seconds."""
        if not self._tasks:
            return
        _, still_running = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in still_running:
            log.warning("cancelling background work %s at shutdown", task.get_name())
            task.cancel()
        if still_running:
            await asyncio.gather(*still_running, return_exceptions=True)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work %s failed", task.get_name(), exc_info=task.exception())


class BillSleuthApp(AsyncApp):
    """Bolt's AsyncApp plus what our listeners and runners share: the settings and the background work."""

    def __init__(self, settings: SlackSettings, background: BackgroundWork, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.background = background


def create_web_client(settings: SlackSettings) -> AsyncWebClient:
    """The Web API client: SLACK_API_URL as its base, and retries on connection errors and HTTP 429."""
    return AsyncWebClient(
        token=settings.bot_token,
        base_url=settings.api_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            # Honours Retry-After; chat.postMessage is ~1/s per channel, chat.update is Tier 3.
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


@asynccontextmanager
async def keep_alive(client: AsyncWebClient) -> AsyncIterator[AsyncWebClient]:
    """One aiohttp session (pooled keep-alive connections) for all of the client's Web API calls while
    the block runs. Without it, slack_sdk opens a session — a new TCP connection and TLS handshake — for
    every call. Built inside the running loop, as aiohttp requires; closed at the end."""
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=client.timeout))
    client.session = session
    try:
        yield client
    finally:
        client.session = None
        await session.close()


def create_app(
    settings: SlackSettings,
    register_listeners: RegisterListeners | None = None,
    *,
    background: BackgroundWork | None = None,
) -> BillSleuthApp:
    """The Bolt app with signature verification on; `register_listeners(app)` adds the listeners."""
    if not settings.bot_token:
        raise SlackConfigError("SLACK_BOT_TOKEN is not set")
    app = BillSleuthApp(
        settings,
        background or BackgroundWork(),
        name="billsleuth",
        client=create_web_client(settings),
        # An empty secret would make an HMAC anyone can compute; Socket Mode needs none, so an unknown
        # random one keeps HTTP requests failing verification until SLACK_SIGNING_SECRET is set.
        signing_secret=settings.signing_secret or secrets.token_hex(32),
        request_verification_enabled=True,
        process_before_response=False,  # ack first, keep working after: see the module docstring
    )
    if register_listeners is not None:
        register_listeners(app)
    return app


# ---- HTTP mode ------------------------------------------------------------------------------------------


@dataclass
class HttpServer:
    """A running aiohttp site serving the Bolt app."""

    runner: web.AppRunner
    host: str
    port: int
    path: str

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}{self.path}"

    async def stop(self) -> None:
        """Stop accepting connections and let in-flight requests finish (aiohttp's graceful shutdown)."""
        await self.runner.cleanup()


def build_web_app(app: AsyncApp, path: str = EVENTS_PATH) -> web.Application:
    """An aiohttp application: POST `path` goes through Bolt (what Bolt's own aiohttp server does)."""

    async def events(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    web_app = web.Application()
    web_app.add_routes([web.post(path, events), web.get(HEALTH_PATH, health)])
    return web_app


async def start_http(
    app: AsyncApp, *, host: str = "0.0.0.0", port: int = 3000, path: str = EVENTS_PATH
) -> HttpServer:
    """Serve the app on host:port (port 0 picks a free one); return once it accepts connections."""
    runner = web.AppRunner(build_web_app(app, path), handle_signals=False, shutdown_timeout=10.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as error:
        await runner.cleanup()
        raise SlackConfigError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return HttpServer(runner=runner, host=host, port=site.port, path=path)


async def run_http(
    app: BillSleuthApp,
    *,
    host: str = "0.0.0.0",
    port: int | None = None,
    stop: asyncio.Event | None = None,
    drain_timeout: float = DRAIN_TIMEOUT_SECONDS,
    on_ready: Callable[[HttpServer], None] | None = None,
) -> None:
    """Serve over HTTP until `stop` is set (or SIGINT/SIGTERM), then shut down cleanly: stop accepting,
    let in-flight requests finish, drain the background work. `on_ready` hears where it listens."""
    app.settings.require("http")
    server = await start_http(app, host=host, port=app.settings.port if port is None else port)
    log.info("BillSleuth is listening on %s", server.url)
    if on_ready is not None:
        on_ready(server)
    try:
        await _wait_for_stop(stop)
    finally:
        await server.stop()
        await app.background.drain(drain_timeout)


# ---- Socket Mode ----------------------------------------------------------------------------------------


async def start_socket_mode(app: BillSleuthApp) -> AsyncSocketModeHandler:
    """Open the Socket Mode connection (apps.connections.open with the app token, then a WebSocket)."""
    app.settings.require("socket")
    handler = AsyncSocketModeHandler(app, app_token=app.settings.app_token)
    await handler.connect_async()
    return handler


async def run_socket_mode(
    app: BillSleuthApp, *, stop: asyncio.Event | None = None, drain_timeout: float = DRAIN_TIMEOUT_SECONDS
) -> None:
    """Stay connected until `stop` is set (or SIGINT/SIGTERM), then close the socket and drain."""
    handler = await start_socket_mode(app)
    log.info("BillSleuth is connected over Socket Mode")
    try:
        await _wait_for_stop(stop)
    finally:
        await handler.close_async()
        await app.background.drain(drain_timeout)


async def _wait_for_stop(stop: asyncio.Event | None) -> None:
    """Wait for `stop`; without one, for SIGINT or SIGTERM."""
    if stop is not None:
        await stop.wait()
        return
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        # Not available off the main thread or on Windows; Ctrl-C then ends the run as KeyboardInterrupt.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    try:
        await stop.wait()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
