"""Running the whole bot: the runtime on a database (`open_runtime`), the app built on it, the chores beside
it, served until the block ends (`running_bot`: tests, the demo, the benchmark) or until a signal
(`run_bot`: `billsleuth bot`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from agent import language
from agent.cases.service import BOT_START, case_service
from agent.database import ensure_ready
from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.access import OPEN_TO_EVERYONE, SET_SUPPORT
from bot.config import SlackSettings
from bot.flows.digest import DEFAULT_DAILY_CHECK_SECONDS
from bot.flows.outbox import DEFAULT_POLL_SECONDS
from bot.flows.stripe_webhook import POLL_SECONDS as STRIPE_POLL_SECONDS
from bot.runtime import (
    DEFAULT_MAX_INVESTIGATIONS,
    DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_PROGRESS_RATE,
    BotRuntime,
)
from bot.server.app import BillSleuthApp, build_app, keep_alive
from bot.server.chores import DEFAULT_EXPIRY_INTERVAL, Chores
from bot.server.transport import HttpServer, run_http, run_socket_mode, start_http, stop_on_signals

log = logging.getLogger(__name__)

Mode = Literal["http", "socket"]


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
        # Socket Mode has no webhook endpoint: it reads Stripe's events API instead.
        stripe_poll = None if mode == "http" else STRIPE_POLL_SECONDS
        chores = Chores(runtime, recover, expiry_interval, outbox_poll, stripe_poll=stripe_poll)
        async with keep_alive(app.client), stop_on_signals(stop) as stopping:
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


async def prepare_database(database_url: str) -> None:
    """The schema and the checkpoint tables current before the bot serves: upgraded on the embedded
    server (one process at a time), checked on an external DATABASE_URL, where only `billsleuth db
    upgrade` changes them; raises SchemaNotReady when they are not."""
    await ensure_ready(database_url)
