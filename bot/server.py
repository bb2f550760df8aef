"""The server: the one module that wires the bot — the Bolt app and its listeners, the runtime every flow
receives, the chores beside them (start-up recovery, the periodic sweep) — and serves it over HTTP
(aiohttp) or Socket Mode, with a clean shutdown.

Public API (what `billsleuth bot`, the demo and the latency benchmark build on):

    async with running_bot(database_url, slack_settings, host="127.0.0.1", port=0, ...) as bot:
        bot.url        # http://127.0.0.1:PORT/slack/events — POST signed payloads here
        bot.app        # the Bolt AsyncApp (BillSleuthApp) with every listener registered
        bot.runtime    # BotRuntime: .service (CaseService), .client (AsyncWebClient), .background, …
        await bot.settled()   # wait until all work started by requests so far has finished

    await run_bot(database_url, slack_settings, mode="http" | "socket", port=…)   # until SIGINT/SIGTERM

`database_url` is libpq's (`postgresql://…`); the schema and the checkpoint tables must be current
(`prepare_database` upgrades them on the embedded server, safely when several bots start at once, and
refuses a behind external database: only `billsleuth db upgrade` changes that one).


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
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.listener.asyncio_runner import AsyncioListenerRunner
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from agent import language
from agent.cases.service import BOT_START, case_service
from agent.database import ensure_ready
from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.access import OPEN_TO_EVERYONE, SET_SUPPORT
from bot.config import SlackConfigError, SlackSettings
from bot.flows.chores import recover_interrupted, sweep
from bot.flows.digest import (
    DEFAULT_DAILY_CHECK_SECONDS,
    RETRY_AFTER_FAILURE_SECONDS,
    daily_findings_digest,
)
from bot.flows.outbox import DEFAULT_POLL_SECONDS, watch_outbox
from bot.flows.seals import seal_when_due
from bot.identity import foreign_actor, foreign_reason, record_foreign
from bot.listeners import register_listeners
from bot.runtime import (
    DEFAULT_MAX_INVESTIGATIONS,
    DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_PROGRESS_RATE,
    DRAIN_TIMEOUT_SECONDS,
    RUNTIME_KEY,
    BackgroundWork,
    BotRuntime,
)
from engine.logcontext import bind

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
DEFAULT_EXPIRY_INTERVAL = 300.0  # seconds between sweeps for overdue drafts, held notes, stale cases
# A case queued or investigating untouched this long lost its process (a crash the start-up recovery of
# another process did not see): the sweep takes it up. Far longer than any queue or run takes.
STALE_CASE = timedelta(minutes=10)
# How often the bot looks whether a seal of the activity log is due (daily, or after a policy change).
DEFAULT_SEAL_CHECK_SECONDS = 60.0

Mode = Literal["http", "socket"]

RegisterListeners = Callable[[AsyncApp], None]


class BillSleuthApp(AsyncApp):
    """Bolt's AsyncApp plus what our listeners and runners share: the settings and the background work."""

    def __init__(self, settings: SlackSettings, background: BackgroundWork, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.background = background
        self._listening = _ListenersRunning(self.listener_runner)

    @property
    def busy(self) -> int:
        """Listeners still running (after their ack, too) plus background work: what `settled` waits for."""
        return self._listening.count + self.background.pending

    async def async_dispatch(self, req: AsyncBoltRequest) -> BoltResponse:
        # Every log line of this request, and of the work its listeners start, names it: the Events API's
        # event_id, else an interaction's trigger_id. Not a global middleware: Bolt's async next() only
        # flags that it was called, and the listeners run after the middleware has returned.
        with bind(event_id=req.body.get("event_id") or req.body.get("trigger_id")):
            return await super().async_dispatch(req)


class _ListenersRunning:
    """Counts the listener runs Bolt has started and not finished. Bolt answers the request as soon as the
    listener acks and keeps no handle on the rest of the listener (module docstring), so without this a
    listener still opening a modal after its ack would look like an idle app. Counted from the moment
    Bolt's runner is handed the request (before the ack) to its completion handler, which the runner calls
    exactly once for every run that is not a lazy function's (slack_bolt/listener/asyncio_runner.py)."""

    _KEY = "billsleuth_listener_counted"

    def __init__(self, runner: AsyncioListenerRunner) -> None:
        self.count = 0
        self._run = runner.run
        self._completed = runner.listener_completion_handler
        runner.run = self._counted_run  # type: ignore[method-assign]
        runner.listener_completion_handler = self  # type: ignore[assignment]

    async def _counted_run(self, request: AsyncBoltRequest, **kwargs: Any) -> BoltResponse | None:
        if request.lazy_only:
            return await self._run(request=request, **kwargs)
        self.count += 1
        request.context[self._KEY] = True
        try:
            return await self._run(request=request, **kwargs)
        except BaseException:
            self._done(request)  # failed before the listener was started (its ack, say)
            raise

    async def handle(self, request: AsyncBoltRequest, response: BoltResponse | None) -> None:
        try:
            await self._completed.handle(request=request, response=response)
        finally:
            self._done(request)

    def _done(self, request: AsyncBoltRequest) -> None:
        if request.context.pop(self._KEY, False):
            self.count -= 1


def create_web_client(settings: SlackSettings) -> AsyncWebClient:
    """The Web API client: SLACK_API_URL as its base, and retries on connection errors and HTTP 429."""
    return AsyncWebClient(
        token=settings.bot_token.get_secret_value(),
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
    if not settings.bot_token.get_secret_value():
        raise SlackConfigError("SLACK_BOT_TOKEN is not set")
    app = BillSleuthApp(
        settings,
        background or BackgroundWork(),
        name="billsleuth",
        client=create_web_client(settings),
        # An empty secret would make an HMAC anyone can compute; Socket Mode needs none, so an unknown
        # random one keeps HTTP requests failing verification until SLACK_SIGNING_SECRET is set.
        signing_secret=settings.signing_secret.get_secret_value() or secrets.token_hex(32),
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
        await _wait_for_stop(stop)
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
        await _wait_for_stop(stop)
    finally:
        await handler.close_async()
        await app.background.drain(drain_timeout)


async def _wait_for_stop(stop: asyncio.Event | None) -> None:
    """Wait for `stop`; without one, for SIGINT or SIGTERM."""
    async with _stop_on_signals(stop) as stopping:
        await stopping.wait()


@asynccontextmanager
async def open_runtime(
    database_url: str,
    slack: SlackSettings,
    *,
    configuration: Configuration | None = None,
    approval_settings: ApprovalSettings | None = None,
    max_investigations: int = DEFAULT_MAX_INVESTIGATIONS,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    progress_rate: float | None = DEFAULT_PROGRESS_RATE,
) -> AsyncIterator[BotRuntime]:
    """The CaseService on this database (engine, checkpointer pool, compiled graph) wrapped as a runtime.

    The bot's start writes its policy (`approval_settings`, default its environment's) to the database as
    the policy in force (audited when it changes), and every decision then follows the stored policy."""
    async with case_service(
        database_url, configuration, approval_settings, policy=BOT_START, actor="bot"
    ) as service:
        if not service.approval_settings.support:
            log.warning("%s; %s", OPEN_TO_EVERYONE, SET_SUPPORT)
        # The bot runs graphs from its first mention on: compile now, not in that mention's time; and load
        # the language model (about a second) beside the loop, not on it during the first mention.
        await service.graph.compiled()
        await asyncio.to_thread(language.warm_up)
        yield BotRuntime(
            service,
            slack,
            max_investigations=max_investigations,
            progress_interval=progress_interval,
            progress_rate=progress_rate,
        )


def build_app(runtime: BotRuntime) -> BillSleuthApp:
    """The Bolt app with every listener, bound to the runtime (listeners get it from their context)."""
    app = create_app(runtime.slack, register_listeners, background=runtime.background)

    async def provide_runtime(context: AsyncBoltContext, next_: Callable[[], Awaitable[None]]) -> None:
        context[RUNTIME_KEY] = runtime
        await next_()

    async def only_the_installed_workspace(
        context: AsyncBoltContext, body: dict[str, Any], next_: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        installation = await runtime.installation()
        why = foreign_reason(installation, body, context.team_id, context.enterprise_id)
        team = context.team_id
        if why is None and (outsider := foreign_actor(installation, body)) is not None:
            why, team = f"the actor's team {outsider} is not ours (Slack Connect)", outsider
        if why is None:
            await next_()
            return None
        log.warning("dropped a payload from outside the installed workspace: %s", why)
        await record_foreign(runtime.engine, body, context.user_id, why, team)
        return BoltResponse(status=200, body="")  # no retry, and no reply of any kind

    app.use(provide_runtime)
    app.use(only_the_installed_workspace)
    runtime.bind(app.client)
    return app


# ---- chores that run beside the listeners ----------------------------------------------------------------


@dataclass
class Chores:
    """Start-up recovery, the periodic expiry sweep and the outbox's delivery to Slack; stopped before the
    background work is drained."""

    runtime: BotRuntime
    recover: bool = True
    expiry_interval: float | None = DEFAULT_EXPIRY_INTERVAL
    outbox_poll: float | None = DEFAULT_POLL_SECONDS
    # How often to look whether the day's findings digest is due (None: never); it runs only with
    # BILLSLEUTH_SWEEP_CHANNEL set.
    digest_check: float | None = DEFAULT_DAILY_CHECK_SECONDS
    # How often to look whether a seal of the activity log is due (None: never).
    seal_check: float | None = DEFAULT_SEAL_CHECK_SECONDS
    _loops: list[asyncio.Task[None]] = field(default_factory=list, init=False)

    def start(self) -> None:
        if self.recover:
            self.runtime.start(recover_interrupted(self.runtime), name="recover interrupted cases")
        if self.outbox_poll:
            self._run(watch_outbox(self.runtime, poll=self.outbox_poll), name="outbox delivery")
        if self.expiry_interval:
            interval = self.expiry_interval

            async def sweep_forever() -> None:
                while True:  # a sweep at start too: drafts may have run out while the bot was down
                    try:
                        await sweep(self.runtime)
                        await recover_interrupted(self.runtime, idle_for=STALE_CASE)
                    except Exception:
                        log.exception("expiry sweep failed; trying again in %ss", interval)
                    await asyncio.sleep(interval)

            self._run(sweep_forever(), name="expiry sweep")
        if self.digest_check and self.runtime.slack.sweep_channel:
            self._run(self._daily_digest(self.digest_check), name="daily findings digest")
        if self.seal_check:
            self._run(self._seals(self.seal_check), name="activity log seals")

    async def _seals(self, every: float) -> None:
        # The first look one interval after start: a start that stored a changed policy is sealed then, and
        # a bot started only for a moment (a one-off) posts nothing.
        wait = every
        while True:
            await asyncio.sleep(wait)
            wait = every
            try:
                await seal_when_due(self.runtime)
            except Exception:
                wait = max(every, RETRY_AFTER_FAILURE_SECONDS)
                log.exception("posting the activity log's seal failed; trying again in %ss", wait)

    async def _daily_digest(self, every: float) -> None:
        while True:
            wait = every
            try:
                await daily_findings_digest(self.runtime)
            except Exception:
                wait = max(every, RETRY_AFTER_FAILURE_SECONDS)  # not a traceback a minute all day
                log.exception("the daily findings digest failed; trying again in %ss", wait)
            await asyncio.sleep(wait)

    def _run(self, loop: Coroutine[Any, Any, None], *, name: str) -> None:
        self._loops.append(asyncio.get_running_loop().create_task(loop, name=name))

    async def stop(self) -> None:
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops.clear()


# ---- running it -------------------------------------------------------------------------------------------


@dataclass
class RunningBot:
    app: BillSleuthApp
    runtime: BotRuntime
    server: HttpServer

    @property
    def url(self) -> str:
        return self.server.url

    async def settled(self, timeout: float = 10.0, quiet: float = 0.05) -> None:
        """Wait until no work started by requests is running — no listener, even one past its ack, and no
        background work — and none has started for `quiet` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        idle_since: float | None = None
        while True:
            now = loop.time()
            if self.app.busy:
                idle_since = None
            elif idle_since is None:
                idle_since = now
            elif now - idle_since >= quiet:
                return
            if now > deadline:
                raise TimeoutError(f"background work still running after {timeout:g}s")
            await asyncio.sleep(0.01)


@asynccontextmanager
async def running_bot(
    database_url: str,
    slack: SlackSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    configuration: Configuration | None = None,
    approval_settings: ApprovalSettings | None = None,
    max_investigations: int = DEFAULT_MAX_INVESTIGATIONS,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    progress_rate: float | None = DEFAULT_PROGRESS_RATE,
    recover: bool = True,
    expiry_interval: float | None = DEFAULT_EXPIRY_INTERVAL,
    outbox_poll: float | None = DEFAULT_POLL_SECONDS,
    digest_check: float | None = DEFAULT_DAILY_CHECK_SECONDS,
    seal_check: float | None = None,
    drain_timeout: float = 30.0,
) -> AsyncIterator[RunningBot]:
    """The whole bot in this process, serving HTTP on host:port (0: a free port) until the block ends.
    Seals are off unless `seal_check` says how often to look (`billsleuth bot` looks every minute): a test
    or the demo that wants one asks for it, and the others' Slack traffic stays theirs."""
    async with open_runtime(
        database_url,
        slack,
        configuration=configuration,
        approval_settings=approval_settings,
        max_investigations=max_investigations,
        progress_interval=progress_interval,
        progress_rate=progress_rate,
    ) as runtime:
        app = build_app(runtime)
        async with keep_alive(app.client):
            await runtime.refuse_bots_on_the_allowlist()
            server = await start_http(app, host=host, port=port)
            chores = Chores(runtime, recover, expiry_interval, outbox_poll, digest_check, seal_check)
            chores.start()
            try:
                yield RunningBot(app, runtime, server)
            finally:
                await chores.stop()
                await server.stop()
                await app.background.drain(drain_timeout)


async def run_bot(
    database_url: str,
    slack: SlackSettings,
    *,
    mode: Mode,
    host: str = "0.0.0.0",
    port: int | None = None,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """`billsleuth bot`: serve until `stop` is set or SIGINT/SIGTERM arrives, then shut down cleanly
    (stop taking requests, let running work finish, close the database pools)."""
    recover = options.pop("recover", True)
    expiry_interval = options.pop("expiry_interval", DEFAULT_EXPIRY_INTERVAL)
    outbox_poll = options.pop("outbox_poll", DEFAULT_POLL_SECONDS)
    async with open_runtime(database_url, slack, **options) as runtime:
        app = build_app(runtime)
        chores = Chores(runtime, recover, expiry_interval, outbox_poll)
        async with keep_alive(app.client), _stop_on_signals(stop) as stopping:
            await runtime.refuse_bots_on_the_allowlist()
            try:
                if mode == "http":

                    def ready(server: HttpServer) -> None:
                        chores.start()
                        if on_ready is not None:
                            on_ready(server.url)

                    await run_http(app, host=host, port=port, stop=stopping, on_ready=ready)
                else:
                    chores.start()
                    if on_ready is not None:
                        on_ready("socket mode")
                    await run_socket_mode(app, stop=stopping)
            finally:
                await chores.stop()


@asynccontextmanager
async def _stop_on_signals(stop: asyncio.Event | None) -> AsyncIterator[asyncio.Event]:
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


async def prepare_database(database_url: str) -> None:
    """The schema and the checkpoint tables current before the bot serves: upgraded on the embedded
    server (one process at a time), checked on an external DATABASE_URL, where only `billsleuth db
    upgrade` changes them; raises SchemaNotReady when they are not."""
    await ensure_ready(database_url)
