"""The Bolt app: BillSleuth's AsyncApp subclass with every listener and the workspace check, its Web API
client (retries, one keep-alive session), and the count of listeners still running that `settled` waits for.

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

import functools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
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

from bot.config import SlackConfigError, SlackSettings
from bot.flows import stripe_webhook
from bot.identity import foreign_actor, foreign_reason, record_foreign
from bot.listeners import register_listeners
from bot.runtime import RUNTIME_KEY, BackgroundWork, BotRuntime
from engine.logcontext import bind

log = logging.getLogger(__name__)

RegisterListeners = Callable[[AsyncApp], None]


class BillSleuthApp(AsyncApp):
    """Bolt's AsyncApp plus what our listeners and runners share: the settings and the background work."""

    def __init__(self, settings: SlackSettings, background: BackgroundWork, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.background = background
        # POST /stripe/webhook's handler (body, Stripe-Signature) → HTTP status; build_app binds it.
        self.stripe_webhook: Callable[[bytes, str | None], Awaitable[int]] | None = None
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
    app.stripe_webhook = functools.partial(stripe_webhook.receive, runtime.engine)
    runtime.bind(app.client)
    return app
