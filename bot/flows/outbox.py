"""Every change reaches Slack, whoever made it: the bot, the CLI, the sweep, another bot process, psql.
Approvers are told of the notes waiting for them from here too (bot/flows/approver_notices.py).

Triggers write each change of a note or case to the `outbox` table in the transaction that made it, and
NOTIFY on commit (migration 0006). Here the bot drains it: woken by the notification, or by a poll when
notifications were missed (the listening connection dropped, the bot was down), it redraws each changed
case Slack is behind on, posts any customer reply owed, refreshes App Home, and only then deletes the
rows, in the transaction that locked them. Delivery is at least once and idempotent: a redraw of a state
Slack already shows does nothing, and a customer reply is claimed once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import psycopg

from agent.cases.opening import OPENED_FROM_CLI
from agent.graph.state import UNFINISHED
from approvals.ledger_import import LEDGER_CHANGED
from approvals.outbox import OUTBOX_CHANNEL
from approvals.stripe_issuing import STRIPE_FAILED
from bot import store
from bot.flows.approver_notices import remind_approvers, tell_approvers
from bot.flows.direct_messages import tell_finance_of_budget, tell_requester
from bot.flows.home import publish_home
from bot.flows.policy import announce_policy_changes
from bot.flows.show import redraw_if_behind
from bot.runtime import BotRuntime
from engine import locks
from engine.db import libpq_url_of

log = logging.getLogger(__name__)

BATCH = 100  # changes delivered per transaction
DEFAULT_POLL_SECONDS = 5.0  # the fallback when no notification comes
DEFAULT_SETTLE_SECONDS = 0.3  # after a notification, let a burst of changes land and be delivered as one
GIVE_UP_AFTER = timedelta(hours=1)  # a change Slack kept refusing this long is logged and dropped


async def deliver_changes(runtime: BotRuntime) -> list[str]:
    """Deliver everything the outbox holds now. Returns the cases redrawn or checked, in order."""
    delivered: list[str] = []
    while True:
        async with runtime.engine.begin() as conn:
            changes = await store.take_changes(conn, BATCH)
            if not changes:
                return delivered
            failed = await _deliver(runtime, changes)
            await store.forget_changes(conn, [c for c in changes if c.case_id not in failed or _stale(c)])
        delivered += [case_id for case_id in _cases_of(changes) if case_id not in failed]
        if len(changes) < BATCH or failed:
            return delivered  # what failed is tried again at the next wake-up, not in a tight loop


async def _deliver(runtime: BotRuntime, changes: list[store.Change]) -> set[str]:
    """Redraw the changed cases and refresh Home; returns the cases whose redraw failed."""
    failed: set[str] = set()
    for case_id in _cases_of([c for c in changes if c.change == OPENED_FROM_CLI]):
        try:
            await tell_requester(runtime, case_id)
        except Exception:
            log.exception("could not tell the requester of case %s; trying again later", case_id)
            failed.add(case_id)
    # The ledger changed under a note, or Stripe failed issuing it: its status did not change, so the drawn
    # state alone would not redraw it.
    ledger_changed = {c.case_id for c in changes if c.change in (LEDGER_CHANGED, STRIPE_FAILED)}
    for case_id in _cases_of(_showing_something(changes)):
        try:
            async with _delivering(runtime, case_id):
                await redraw_if_behind(runtime, case_id, force=case_id in ledger_changed)
                await tell_approvers(runtime, case_id)
        except Exception:
            log.exception("could not show a change of case %s in Slack; trying again later", case_id)
            failed.add(case_id)
    await _refresh_homes(runtime, _cases_of(changes))
    return failed


@asynccontextmanager
async def _delivering(runtime: BotRuntime, case_id: str) -> AsyncIterator[None]:
    """One process at a time delivers a case's changes. SKIP LOCKED hands one case's changes (approved,
    then issued) to two processes when both are awake; without this both would find the approvers'
    notices stale and update each one twice. The second waits, then finds them up to date. A plain
    advisory lock, not Locks.locked: the redraw takes the card's lock inside, and Locks' local stripes must
    not nest."""
    async with runtime.engine.begin() as conn:
        await locks.xact_lock(conn, locks.delivery(case_id))
        yield


async def _refresh_homes(runtime: BotRuntime, case_ids: Iterable[str]) -> None:
    """Every approver's Home (the notes waiting for them) and the requesters' (their open cases)."""
    requesters = await store.requesters_of(runtime.engine, list(case_ids))
    people = sorted(runtime.approval_settings.approvers | {r for r in requesters if not r.startswith("cli:")})
    for user_id in people:
        try:
            await publish_home(runtime, user_id)
        except Exception:
            log.exception("could not refresh the App Home of %s", user_id)


# A case queued or taken up shows nothing new on its card or to the approvers: the run that took it draws
# its progress and result, and how it ends (its status, its note) comes as a change of its own. App Home
# still shows the new status (its requester's open cases). A case opened from the CLI tells its requester
# (above) and has no card yet.
_NOTHING_TO_DRAW = frozenset({*(f"case.{status}" for status in UNFINISHED), OPENED_FROM_CLI})


def _showing_something(changes: list[store.Change]) -> list[store.Change]:
    """The changes with something to draw: a case whose changes here are all queued / investigating is
    left to the run that draws it (several mentions in a burst each cost a redraw check and a look for
    notices otherwise)."""
    return [c for c in changes if c.change not in _NOTHING_TO_DRAW]


def _cases_of(changes: list[store.Change]) -> list[str]:
    return list(dict.fromkeys(c.case_id for c in changes if c.case_id is not None))


def _stale(change: store.Change) -> bool:
    if datetime.now(UTC) - change.at < GIVE_UP_AFTER:
        return False
    log.error("giving up on showing change %s (%s) of case %s", change.id, change.change, change.case_id)
    return True


async def watch_outbox(
    runtime: BotRuntime, *, poll: float = DEFAULT_POLL_SECONDS, settle: float = DEFAULT_SETTLE_SECONDS
) -> None:
    """Deliver changes as they are committed, until cancelled. LISTENs on its own connection (outside
    the pool, which it would otherwise hold for good); when that fails it polls and reconnects."""
    conninfo = libpq_url_of(runtime.engine)
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listener:
                await listener.execute(f"LISTEN {OUTBOX_CHANNEL}")
                while True:
                    await _deliver_logged(runtime)  # first: whatever piled up while nobody listened
                    if await _notified(listener, poll):
                        await asyncio.sleep(settle)
        except psycopg.Error as error:
            log.warning("lost the outbox notifications (%s); polling until they are back", error)
            await _deliver_logged(runtime)
            await asyncio.sleep(poll)


async def _notified(listener: psycopg.AsyncConnection, timeout: float) -> bool:
    async for _ in listener.notifies(timeout=timeout, stop_after=1):
        return True
    return False


async def _deliver_logged(runtime: BotRuntime) -> None:
    """Deliver the outbox, then remind approvers whose notes are halfway to expiry, tell finance of
    model-budget thresholds crossed and announce policy changes; a failure is logged and tried again at the
    next wake-up, so the watch itself never dies of one."""
    try:
        await deliver_changes(runtime)
        await remind_approvers(runtime)
        await tell_finance_of_budget(runtime)
        await announce_policy_changes(runtime)
    except Exception:
        log.exception("could not deliver the outbox; trying again at the next change or poll")
