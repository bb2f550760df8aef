"""The live "investigating…" message: a short step list, updated in place while the graph runs.

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

from slack_sdk.web.async_client import AsyncWebClient

from bot.cards import progress_message
from bot.cards.models import ProgressStep, ProgressView
from bot.presenters.cases import progress_step
from bot.runtime import Pacer

log = logging.getLogger(__name__)


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
