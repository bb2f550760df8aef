"""The running bot: one CaseService, the Slack settings, and the rules for doing slow work.

Public API (what `billsleuth bot`, the demo and the latency benchmark build on):

    async with running_bot(database_url, slack_settings, host="127.0.0.1", port=0, ...) as bot:
        bot.url        # http://127.0.0.1:PORT/slack/events — POST signed payloads here
        bot.app        # the Bolt AsyncApp (BillSleuthApp) with every listener registered
        bot.runtime    # BotRuntime: .service (CaseService), .client (AsyncWebClient), .background, …
        await bot.settled()   # wait until all work started by requests so far has finished

    await run_bot(database_url, slack_settings, mode="http" | "socket", port=…)   # until SIGINT/SIGTERM

`database_url` is libpq's (`postgresql://…`); the schema and the checkpoint tables must be current
(`prepare_database` does both, safely when several bots start at once). Listeners find the runtime in
Bolt's context (`runtime_of(context)`), put there by a global middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import aiohttp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases import BOT_START, CaseService, case_service
from agent.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.app import (
    BackgroundWork,
    BillSleuthApp,
    HttpServer,
    create_app,
    keep_alive,
    run_http,
    run_socket_mode,
    start_http,
)
from bot.config import SlackConfigError, SlackSettings
from bot.identity import Installation, InstallationCache, foreign_reason, record_foreign
from bot.progress import Pacer
from engine import schema

log = logging.getLogger(__name__)

DEFAULT_MAX_INVESTIGATIONS = 4
DEFAULT_PROGRESS_INTERVAL = 1.0  # seconds between live progress updates (chat.update is Tier 3)
DEFAULT_EXPIRY_INTERVAL = 300.0  # seconds between sweeps for overdue drafts
# A case queued or investigating untouched this long lost its process (a crash the start-up recovery of
# another process did not see): the sweep takes it up. Far longer than any queue or run takes.
STALE_CASE = timedelta(minutes=10)
# Progress updates of all cases together, per second: chat.update is Tier 3 (about 50 a minute), and the
# cards and results must not queue behind cosmetic step lists. Results are never paced.
DEFAULT_PROGRESS_RATE = 0.6
LOCAL_LOCK_STRIPES = 64
MAX_LOCK_HOLDERS = 4  # with the case locks' 6 (agent.cases), 10 of the pool's 15 connections at most
RUNTIME_KEY = "billsleuth_runtime"

Mode = Literal["http", "socket"]


@dataclass(frozen=True)
class CaseRequest:
    """A complaint to investigate, as Slack handed it to us."""

    customer_id: str
    words: str  # the customer's words
    requester: str  # the Slack user who asked
    channel: str
    thread_ts: str | None  # the thread the case goes into; None: the case's own message starts one


CLAIMED, EVENT_SEEN, MESSAGE_SEEN = "claimed", "event_seen", "message_seen"


@dataclass(frozen=True)
class Claim:
    outcome: str  # CLAIMED: this process opens the case; EVENT_SEEN: a redelivery; MESSAGE_SEEN: an edit
    case_id: str | None  # the case opened for the event (CLAIMED, or a redelivery of a claimed one)


class BotRuntime:
    """What every listener and flow shares. Built by `open_runtime`, bound to its app by `build_app`."""

    def __init__(
        self,
        service: CaseService,
        slack: SlackSettings,
        *,
        max_investigations: int = DEFAULT_MAX_INVESTIGATIONS,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
        progress_rate: float | None = DEFAULT_PROGRESS_RATE,
    ) -> None:
        if max_investigations < 1:
            raise ValueError("max_investigations must be at least 1")
        self.service = service
        self.slack = slack
        self.investigations = asyncio.Semaphore(max_investigations)  # bounded concurrent graph runs
        self.progress_interval = progress_interval
        self.progress_pacer = Pacer(progress_rate)
        self._local_locks = tuple(asyncio.Lock() for _ in range(LOCAL_LOCK_STRIPES))
        self._lock_holders = asyncio.Semaphore(MAX_LOCK_HOLDERS)
        self._app: BillSleuthApp | None = None
        self._installation = InstallationCache()

    # ---- what the flows reach for ----

    @property
    def app(self) -> BillSleuthApp:
        if self._app is None:
            raise RuntimeError("the runtime is not bound to an app yet: call build_app(runtime)")
        return self._app

    @property
    def client(self) -> AsyncWebClient:
        return self.app.client

    @property
    def background(self) -> BackgroundWork:
        return self.app.background

    @property
    def engine(self) -> Any:
        return self.service.engine

    @property
    def approval_settings(self) -> ApprovalSettings:
        return self.service.approval_settings

    def is_approver(self, user_id: str) -> bool:
        return user_id in self.approval_settings.approvers

    @property
    def support_members(self) -> frozenset[str]:
        """BILLSLEUTH_SUPPORT: the one place that says who support is (the stored policy, once it is)."""
        return self.approval_settings.support

    def may_read(self, user_id: str) -> bool:
        """Credit notes (show, list, App Home) are for approvers and support; nobody else."""
        return self.is_approver(user_id) or user_id in self.support_members

    def may_open_cases(self, user_id: str) -> bool:
        """Anyone opens a case while BILLSLEUTH_SUPPORT is empty; once set, only support and approvers."""
        return not self.support_members or self.may_read(user_id)

    async def installation(self) -> Installation:
        """The workspace, org, app and bot user the token belongs to (auth.test, asked once)."""
        return await self._installation.get(self.client)

    async def refuse_bots_on_the_allowlist(self) -> None:
        """At start: this app's own bot user may not be on BILLSLEUTH_APPROVERS (or support)."""
        try:
            own = (await self.installation()).bot_user_id
        except (SlackApiError, aiohttp.ClientError, OSError) as error:
            # A token Slack refuses fails every request anyway (`billsleuth doctor` says why); each
            # payload asks auth.test again before any listener runs, so nothing goes unchecked.
            log.warning(
                "auth.test failed at start (%s); the allowlist is checked on the first request", error
            )
            return
        for variable, people in (
            ("BILLSLEUTH_APPROVERS", self.approval_settings.approvers),
            ("BILLSLEUTH_SUPPORT", self.support_members),
        ):
            if own is not None and own in people:
                raise SlackConfigError(
                    f"{variable}: {own} is this app's own bot user; only people belong here"
                )

    def start(self, work: Awaitable[Any], *, name: str) -> None:
        """Run slow work off the ack path; held, logged on failure, drained at shutdown."""
        self.background.start(work, name=name)  # type: ignore[arg-type]

    # ---- exactly once, across processes ----

    async def claim(self, key: str, case_id: str | None = None) -> bool:
        """True for the one caller (in any bot process) that records `key` first; False for the rest.

        Slack event ids are claimed this way (a retried or twice-delivered event runs once), and so are
        one-off posts such as a case's customer reply."""
        async with self.engine.begin() as conn:
            return await _claim_in(conn, key, case_id)

    async def claim_case(self, event_key: str, message_key: str, request: CaseRequest) -> Claim:
        """Claim a Slack event and the message it is about, and record its case (queued), in one
        transaction: a claimed mention always has its case, whatever stops the process next.

        The event claim makes a retried or twice-delivered event run once; the message claim makes an
        edited mention (a new event on the same message) open no second case."""
        events = schema.slack_events
        async with self.engine.begin() as conn:
            if not await _claim_in(conn, event_key):
                linked = await conn.execute(select(events.c.case_id).where(events.c.event_id == event_key))
                return Claim(EVENT_SEEN, linked.scalar())
            if not await _claim_in(conn, message_key):
                return Claim(MESSAGE_SEEN, None)  # the event's claim is kept: its retries stay silent
            case_id = await self.register_case(conn, request)
            await conn.execute(update(events).where(events.c.event_id == event_key).values(case_id=case_id))
        return Claim(CLAIMED, case_id)

    async def register_case(self, conn: AsyncConnection, request: CaseRequest) -> str:
        return await self.service.register_case(
            conn,
            request.words,
            requester=request.requester,
            customer_id=request.customer_id,
            channel=request.channel,
            thread_ts=request.thread_ts,
        )

    async def new_case(self, request: CaseRequest) -> str:
        """Record a case nobody claimed an event for (the shortcut's modal, the slash command), queued."""
        async with self.engine.begin() as conn:
            return await self.register_case(conn, request)

    async def record_message(self, case_id: str, channel: str, ts: str, thread_ts: str | None = None) -> None:
        """Where the case's card lives (and its thread, when the card started it), so that decisions
        and recovery (from any process) update it."""
        cases = schema.cases
        where = {"channel": channel, "message_ts": ts}
        if thread_ts is not None:
            where["thread_ts"] = thread_ts
        async with self.engine.begin() as conn:
            await conn.execute(update(cases).where(cases.c.id == case_id).values(**where))

    @asynccontextmanager
    async def locked(self, key: str) -> AsyncIterator[AsyncConnection]:
        """A Postgres advisory lock held for the block (transaction-scoped: it cannot leak). Yields the
        lock's connection: reads done on it cost no second checkout.

        Waiters in this process queue on a local lock first, so twenty clicks on one card hold one pooled
        connection between them, not twenty; and at most MAX_LOCK_HOLDERS hold one at a time, because a
        holder may check out a second connection (an audit row, the card's location) and the pool must
        never be all holders waiting for one."""
        stripe = self._local_locks[hash(key) % len(self._local_locks)]
        async with stripe, self._lock_holders, self.engine.begin() as conn:
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})
            yield conn

    @asynccontextmanager
    async def leading(self, key: str) -> AsyncIterator[bool]:
        """True when this process got the lock (the others skip the work instead of waiting)."""
        async with self.engine.begin() as conn:
            got = await conn.execute(text("SELECT pg_try_advisory_xact_lock(hashtext(:key))"), {"key": key})
            yield bool(got.scalar_one())


async def _claim_in(conn: AsyncConnection, key: str, case_id: str | None = None) -> bool:
    events = schema.slack_events
    claim = (
        pg_insert(events)
        .values(event_id=key, case_id=case_id)
        .on_conflict_do_nothing(index_elements=[events.c.event_id])
        .returning(events.c.event_id)
    )
    return (await conn.execute(claim)).first() is not None


def runtime_of(context: AsyncBoltContext | dict[str, Any]) -> BotRuntime:
    return context[RUNTIME_KEY]  # type: ignore[no-any-return]


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
    """The CaseService on this database (engine, checkpointer pool, graph) wrapped as a runtime.

    The bot's start writes its policy (`approval_settings`, default its environment's) to the database as
    the policy in force (audited when it changes), and every decision then follows the stored policy."""
    async with case_service(
        database_url, configuration, approval_settings, policy=BOT_START, actor="bot"
    ) as service:
        yield BotRuntime(
            service,
            slack,
            max_investigations=max_investigations,
            progress_interval=progress_interval,
            progress_rate=progress_rate,
        )


def build_app(runtime: BotRuntime, background: BackgroundWork | None = None) -> BillSleuthApp:
    """The Bolt app with every listener, bound to the runtime (listeners get it from their context)."""
    from bot.listeners import register_listeners

    app = create_app(runtime.slack, register_listeners, background=background)

    async def provide_runtime(context: AsyncBoltContext, next_: Callable[[], Awaitable[None]]) -> None:
        context[RUNTIME_KEY] = runtime
        await next_()

    async def only_the_installed_workspace(
        context: AsyncBoltContext, body: dict[str, Any], next_: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        why = foreign_reason(await runtime.installation(), body, context.team_id, context.enterprise_id)
        if why is None:
            await next_()
            return None
        log.warning("dropped a payload from outside the installed workspace: %s", why)
        await record_foreign(runtime.engine, body, context.user_id, why, context.team_id)
        return BoltResponse(status=200, body="")  # no retry, and no reply of any kind

    app.use(provide_runtime)
    app.use(only_the_installed_workspace)
    runtime._app = app
    return app


# ---- chores that run beside the listeners ----------------------------------------------------------------


@dataclass
class Chores:
    """Start-up recovery and the periodic expiry sweep; stopped before the background work is drained."""

    runtime: BotRuntime
    recover: bool = True
    expiry_interval: float | None = DEFAULT_EXPIRY_INTERVAL
    _loop: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        from bot.decisions import expire_overdue_and_update
        from bot.investigations import recover_interrupted

        if self.recover:
            self.runtime.start(recover_interrupted(self.runtime), name="recover interrupted cases")
        if self.expiry_interval:
            interval = self.expiry_interval

            async def sweep_forever() -> None:
                while True:  # a sweep at start too: drafts may have run out while the bot was down
                    try:
                        await expire_overdue_and_update(self.runtime)
                        await recover_interrupted(self.runtime, idle_for=STALE_CASE)
                    except Exception:
                        log.exception("expiry sweep failed; trying again in %ss", interval)
                    await asyncio.sleep(interval)

            self._loop = asyncio.get_running_loop().create_task(sweep_forever(), name="expiry sweep")

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None


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
        """Wait until no work started by requests is running, and none has started for `quiet` seconds
        (a listener starts its background work a moment after the HTTP ack has gone out)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        idle_since: float | None = None
        while True:
            now = loop.time()
            if self.app.background.pending:
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
    drain_timeout: float = 30.0,
) -> AsyncIterator[RunningBot]:
    """The whole bot in this process, serving HTTP on host:port (0: a free port) until the block ends."""
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
            chores = Chores(runtime, recover, expiry_interval)
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
    async with open_runtime(database_url, slack, **options) as runtime:
        app = build_app(runtime)
        chores = Chores(runtime, recover, expiry_interval)
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
    """Upgrade the schema and the checkpoint tables, one bot at a time (two starting together would
    race on CREATE TABLE)."""
    import psycopg

    from agent.checkpoint import setup_checkpointer
    from engine import migrate

    # libpq takes postgres:// and postgresql:// alike, and ?host=/socket/dir as written.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(hashtext('billsleuth:prepare'))")
        try:
            await asyncio.to_thread(migrate.ensure_current, database_url)
            await setup_checkpointer(database_url)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext('billsleuth:prepare'))")
