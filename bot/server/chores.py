"""The chores that run beside the listeners (bot/flows/chores.py and friends say what each does; this says
when): start-up recovery, the periodic expiry sweep, the outbox's delivery, the daily findings digest and
the activity log's seals. Stopped before the background work is drained."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bot.flows.chores import recover_interrupted, sweep
from bot.flows.digest import (
    DEFAULT_DAILY_CHECK_SECONDS,
    RETRY_AFTER_FAILURE_SECONDS,
    daily_findings_digest,
)
from bot.flows.outbox import DEFAULT_POLL_SECONDS, watch_outbox
from bot.flows.seals import seal_when_due
from bot.flows.stripe_webhook import poll_events
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_INTERVAL = 300.0  # seconds between sweeps for overdue drafts, held notes, stale cases
# A case queued or investigating untouched this long lost its process (a crash the start-up recovery of
# another process did not see): the sweep takes it up. Far longer than any queue or run takes.
STALE_CASE = timedelta(minutes=10)
# How often the bot looks whether a seal of the activity log is due (daily, or after a policy change).
DEFAULT_SEAL_CHECK_SECONDS = 60.0


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
    # How often to read Stripe's events API (None: never; Socket Mode, which has no webhook endpoint).
    stripe_poll: float | None = None
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
        if self.stripe_poll:
            self._run(self._stripe_events(self.stripe_poll), name="Stripe events")

    async def _stripe_events(self, every: float) -> None:
        while True:
            try:
                await poll_events(self.runtime.engine)
            except Exception:
                log.exception("reading Stripe's events failed; trying again in %ss", every)
            await asyncio.sleep(every)

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
