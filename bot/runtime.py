"""The context every flow receives: the CaseService, the Slack client, where slow work runs, and who may
do what. The server builds one per process (bot/server/) and puts it in Bolt's context, where listeners
find it with `runtime_of(context)`.

Nothing here wires Slack or runs chores; the bot's own SQL lives in bot/store.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases.service import CaseService
from approvals.config import ApprovalSettings
from bot.config import SlackConfigError, SlackSettings
from bot.identity import Installation, InstallationCache
from bot.store import Locks

log = logging.getLogger(__name__)

DEFAULT_MAX_INVESTIGATIONS = 4
DEFAULT_PROGRESS_INTERVAL = 1.0  # seconds between live progress updates (chat.update is Tier 3)
# Progress updates of all cases together, per second: chat.update is Tier 3 (about 50 a minute), and the
# cards and results must not queue behind cosmetic step lists. Results are never paced.
DEFAULT_PROGRESS_RATE = 0.6
DRAIN_TIMEOUT_SECONDS = 30.0
RUNTIME_KEY = "billsleuth_runtime"


class BackgroundWork:
    """Slow work a listener starts after its ack: held until done, failures logged, drained at exit.

    Bolt keeps no reference to the listener futures it starts, and asyncio holds tasks only weakly, so
    anything that must outlive the ack is started here (see bot/server/app.py's module docstring)."""

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


class Pacer:
    """At most `rate` permits a second, taken without waiting (None: no limit). A progress update that
    finds no permit is simply folded into the next one."""

    def __init__(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("a rate must be above zero (or None for no limit)")
        self.gap = 0.0 if rate is None else 1.0 / rate
        self._next = 0.0

    def try_take(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.gap
        return True


class BotRuntime:
    """What every listener and flow shares. The server builds it and binds it to its Slack client."""

    def __init__(
        self,
        service: CaseService,
        slack: SlackSettings,
        *,
        max_investigations: int = DEFAULT_MAX_INVESTIGATIONS,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
        progress_rate: float | None = DEFAULT_PROGRESS_RATE,
        background: BackgroundWork | None = None,
    ) -> None:
        if max_investigations < 1:
            raise ValueError("max_investigations must be at least 1")
        self.service = service
        self.slack = slack
        self.investigations = asyncio.Semaphore(max_investigations)  # bounded concurrent graph runs
        self.progress_interval = progress_interval
        self.progress_pacer = Pacer(progress_rate)
        self.background = background or BackgroundWork()
        self.locks = Locks(service.engine)
        self._client: AsyncWebClient | None = None
        self._installation = InstallationCache()
        # Whether assistant.threads.setStatus works for this app (None: not asked yet); see flows/progress.
        self.thread_status_works: bool | None = None

    def bind(self, client: AsyncWebClient) -> None:
        """The Web API client of the app this runtime serves (the server calls this once)."""
        self._client = client

    @property
    def client(self) -> AsyncWebClient:
        if self._client is None:
            raise RuntimeError("the runtime is not bound to a Slack client yet: build the app first")
        return self._client

    @property
    def engine(self) -> AsyncEngine:
        return self.service.engine

    @property
    def approval_settings(self) -> ApprovalSettings:
        return self.service.approval_settings

    def start(self, work: Coroutine[Any, Any, Any], *, name: str) -> None:
        """Run slow work off the ack path; held, logged on failure, drained at shutdown."""
        self.background.start(work, name=name)

    # ---- who may do what ----

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


def runtime_of(context: AsyncBoltContext | dict[str, Any]) -> BotRuntime:
    return context[RUNTIME_KEY]  # type: ignore[no-any-return]
