"""Serving the Bolt app: over HTTP (an aiohttp site: POST the events path, GET the health check) or over
Socket Mode, until a stop event or SIGINT/SIGTERM, then a clean shutdown that drains the background work."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from bot.config import SlackConfigError
from bot.runtime import DRAIN_TIMEOUT_SECONDS
from bot.server.app import BillSleuthApp

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
STRIPE_WEBHOOK_PATH = "/stripe/webhook"


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

    async def stripe_webhook(request: web.Request) -> web.Response:
        handler = getattr(app, "stripe_webhook", None)
        if handler is None:
            raise web.HTTPNotFound()
        return web.Response(
            status=await handler(await request.read(), request.headers.get("Stripe-Signature"))
        )

    web_app = web.Application()
    web_app.add_routes(
        [web.post(path, events), web.get(HEALTH_PATH, health), web.post(STRIPE_WEBHOOK_PATH, stripe_webhook)]
    )
    return web_app


async def start_http(
    app: AsyncApp,
    *,
    host: str = "0.0.0.0",
    port: int = 3000,
    path: str = EVENTS_PATH,
    reuse_port: bool = False,
) -> HttpServer:
    """Serve the app on host:port (port 0 picks a free one); return once it accepts connections.
    `reuse_port`: SO_REUSEPORT, so other bot processes may listen on the same port."""
    runner = web.AppRunner(build_web_app(app, path), handle_signals=False, shutdown_timeout=10.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
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
    port = app.settings.port if port is None else port
    server = await start_http(app, host=host, port=port, reuse_port=app.settings.reuse_port)
    log.info("BillSleuth is listening on %s", server.url)
    if on_ready is not None:
        on_ready(server)
    try:
        await wait_for_stop(stop)
    finally:
        await server.stop()
        await app.background.drain(drain_timeout)


# ---- Socket Mode ----------------------------------------------------------------------------------------


async def start_socket_mode(app: BillSleuthApp) -> AsyncSocketModeHandler:
    """Open the Socket Mode connection (apps.connections.open with the app token, then a WebSocket)."""
    app.settings.require("socket")
    handler = AsyncSocketModeHandler(app, app_token=app.settings.app_token.get_secret_value())
    await handler.connect_async()
    return handler


async def run_socket_mode(
    app: BillSleuthApp, *, stop: asyncio.Event | None = None, drain_timeout: float = DRAIN_TIMEOUT_SECONDS
) -> None:
    """Stay connected until `stop` is set (or SIGINT/SIGTERM), then close the socket and drain."""
    handler = await start_socket_mode(app)
    log.info("BillSleuth is connected over Socket Mode")
    try:
        await wait_for_stop(stop)
    finally:
        await handler.close_async()
        await app.background.drain(drain_timeout)


async def wait_for_stop(stop: asyncio.Event | None) -> None:
    """Wait for `stop`; without one, for SIGINT or SIGTERM."""
    async with stop_on_signals(stop) as stopping:
        await stopping.wait()


@asynccontextmanager
async def stop_on_signals(stop: asyncio.Event | None) -> AsyncIterator[asyncio.Event]:
    """`stop` itself, or an event set by SIGINT/SIGTERM (handlers removed again afterwards)."""
    if stop is not None:
        yield stop
        return
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, event.set)
            installed.append(signum)
    try:
        yield event
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
