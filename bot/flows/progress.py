"""While a case is investigated, the thread shows it: as the thread's own status line ("is investigating
C-0007…", assistant.threads.setStatus) where the workspace lets the app set one — it clears itself when the
result is posted — or else as the live "investigating…" message: a short step list, updated in place
while the graph runs, which the result then replaces.

The graph calls `on_progress(event)` synchronously from inside its run, so that callback only records the
step and makes sure one flusher task is scheduled; it never waits and never raises. The flusher sends at
most one chat.update per `interval` seconds with the latest steps, and only when the workspace-wide pacer
has a permit (chat.update is Tier 3; many cases at once would otherwise crowd out their own results).
`finish()` stops it without cutting a request in half — a cancelled request could still land after the
final card and overwrite it — so the message's last word is always the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import store
from bot.cards import progress_message
from bot.cards.models import ProgressStep, ProgressView
from bot.presenters.cases import progress_step
from bot.runtime import BotRuntime, Pacer

log = logging.getLogger(__name__)

LOADING_MESSAGES = [
    "reading the ledger…",
    "recomputing the invoices…",
    "checking the findings against the ledger…",
    "writing the reply…",
]
# Errors that say this app may not set thread statuses at all here (not just in this one thread).
STATUS_UNSUPPORTED = frozenset(
    {"unknown_method", "missing_scope", "not_allowed_token_type", "method_deprecated", "feature_not_enabled"}
)


class ThreadStatus:
    """The thread's status line stands for the progress: nothing to update (Slack rotates the loading
    messages), no message of its own (the result is posted as a new reply, which clears the status)."""

    ts: str | None = None

    def __init__(self) -> None:
        self.steps: list[ProgressStep] = []

    def on_progress(self, event: Mapping[str, Any]) -> None:
        """Steps are not shown one by one in a status line."""

    async def finish(self) -> int:
        return 1


async def start_progress(
    runtime: BotRuntime,
    *,
    case_id: str,
    channel: str,
    thread_ts: str | None,
    customer_id: str,
    requester: str,
) -> LiveProgress | ThreadStatus:
    """Show that the case is being investigated: the thread's status where Slack allows it, else a new
    progress message in the thread (recorded as the case's message, where its result is drawn). A Web API
    error posting that message is raised (the bot is not in the channel, say)."""
    if thread_ts and await _set_thread_status(runtime, channel, thread_ts, customer_id):
        return ThreadStatus()
    view = ProgressView(case_id, customer_id, requester)
    posted = await runtime.client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, **progress_message(view).as_kwargs()
    )
    ts = str(posted["ts"])
    await store.record_message(runtime.engine, case_id, channel, ts, thread_ts or ts)
    return LiveProgress(
        runtime.client,
        pacer=runtime.progress_pacer,
        channel=channel,
        ts=ts,
        case_id=case_id,
        customer_id=customer_id,
        requested_by=requester,
        interval=runtime.progress_interval,
    )


async def _set_thread_status(runtime: BotRuntime, channel: str, thread_ts: str, customer_id: str) -> bool:
    if runtime.thread_status_works is False:
        return False
    try:
        await runtime.client.assistant_threads_setStatus(
            channel_id=channel,
            thread_ts=thread_ts,
            status=f"is investigating {customer_id}…",
            loading_messages=LOADING_MESSAGES,
        )
    except SlackApiError as error:
        code = str(error.response.get("error"))
        if code in STATUS_UNSUPPORTED:
            runtime.thread_status_works = False  # asked once per process, not once per case
            log.info("thread statuses are not available here (%s); progress messages it is", code)
        return False
    runtime.thread_status_works = True
    return True


class LiveProgress:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        pacer: Pacer | None = None,
        channel: str,
        ts: str,
        case_id: str,
        customer_id: str,
        requested_by: str,
        interval: float = 1.0,
    ) -> None:
        self.client = client
        self.channel, self.ts = channel, ts
        self.case_id, self.customer_id, self.requested_by = case_id, customer_id, requested_by
        self.interval = interval
        self.pacer = pacer or Pacer(None)
        self.steps: list[ProgressStep] = []
        self.revision = 0  # the posted message is revision 0
        self.updates_sent = 0
        self._sent_steps = 0
        self._last_sent = asyncio.get_running_loop().time()
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    def first_view(self) -> ProgressView:
        return ProgressView(self.case_id, self.customer_id, self.requested_by, (), "running", 0)

    def on_progress(self, event: Mapping[str, Any]) -> None:
        """The graph's progress callback: record, schedule, return at once; never raise into the graph."""
        try:
            step = progress_step(event)
            if step is None or self._closed:
                return
            self.steps.append(step)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.get_running_loop().create_task(
                    self._flush(), name=f"progress {self.case_id}"
                )
            else:
                self._wake.set()
        except Exception:  # a progress line is never worth failing an investigation for
            log.exception("progress callback failed for %s", self.case_id)

    async def finish(self) -> int:
        """Stop updating (an update already on its way is let through); the next free revision."""
        self._closed = True
        self._wake.set()
        if self._flusher is not None:
            with contextlib.suppress(Exception):
                await self._flusher
        return self.revision + 1

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed and self._sent_steps < len(self.steps):
            wait = self._last_sent + self.interval - loop.time()
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                continue  # re-check: closed, or simply time to send
            if not self.pacer.try_take():  # the workspace-wide budget is spent: fold into a later one
                self._last_sent = loop.time()
                continue
            await self._send()

    async def _send(self) -> None:
        steps = list(self.steps)
        self.revision += 1
        view = ProgressView(
            self.case_id, self.customer_id, self.requested_by, steps, "running", self.revision
        )
        try:
            await self.client.chat_update(
                channel=self.channel, ts=self.ts, **progress_message(view).as_kwargs()
            )
            self.updates_sent += 1
        except Exception:  # a missed progress update is cosmetic; the result update still comes
            log.warning("progress update for %s failed", self.case_id, exc_info=True)
        self._sent_steps = len(steps)
        self._last_sent = asyncio.get_running_loop().time()
