"""What the server runs beside the listeners: at start, recover what a stop interrupted; every few minutes,
the sweep (overdue drafts, held notes, settled cases, stale ones). One bot process does each round; the
others skip it."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from approvals import queries
from bot.flows.show import redraw_behind, settle_card, show_case_result
from bot.runtime import BotRuntime
from engine import locks

log = logging.getLogger(__name__)

RECOVERY_RETRIES = (0.5, 1.0, 2.0, 4.0)  # seconds between start-up rounds for cases still locked


async def recover_interrupted(runtime: BotRuntime, *, idle_for: timedelta | None = None) -> list[str]:
    """Finish the investigations a stop interrupted (queued or investigating), deliver decisions not yet
    applied, and show their results in their threads. One bot process does it; the others skip it.

    At start-up (`idle_for` None) every unfinished case is taken up, and those still locked are tried
    again for a few seconds: a killed process's database sessions may hold their case locks a moment
    after it died. The periodic sweep passes `idle_for` and takes up only cases left idle that long."""
    recovered = await _recover_once(runtime, idle_for)
    for delay in RECOVERY_RETRIES if idle_for is None else ():
        if not await runtime.service.unfinished_cases():
            break
        await asyncio.sleep(delay)
        recovered += await _recover_once(runtime, None)
    if recovered:
        log.info("recovered %d interrupted case(s): %s", len(recovered), ", ".join(recovered))
    redrawn = await redraw_behind(runtime)
    if redrawn:
        log.info("redrew %d case(s) Slack was behind on: %s", len(redrawn), ", ".join(redrawn))
    return recovered


async def _recover_once(runtime: BotRuntime, idle_for: timedelta | None) -> list[str]:
    async with runtime.locks.leading(locks.RECOVER) as leader:
        if not leader:
            return []
        recovered = await runtime.service.recover(idle_for=idle_for)
    for case_id in recovered:
        try:
            await show_case_result(runtime, await runtime.service.show_case(case_id))
        except Exception:
            log.exception("could not show the recovered case %s in Slack", case_id)
    return recovered


async def sweep(runtime: BotRuntime) -> list[str]:
    """The periodic sweep: expire overdue drafts (their cases rewrite the reply), resume the cases whose
    notes were settled meanwhile (an approved note the daily credit limit held back is issued once there is
    room) and cancel notes held too long; then redraw their cards and post the customer replies. Returns
    the expired notes."""
    swept = await runtime.service.sweep()
    touched = [*swept.expired, *swept.cancelled]
    for case_id in swept.settled:
        note = await queries.credit_note_for_case(runtime.engine, case_id)
        if note is not None and note.id not in touched:
            touched.append(note.id)
    for credit_note_id in touched:
        try:
            await settle_card(runtime, credit_note_id)
        except Exception:
            log.exception("could not update the card of %s after the sweep", credit_note_id)
    pruned = await runtime.service.prune_finished()
    if pruned:
        log.info("deleted the checkpoints of %d finished case(s)", len(pruned))
    return swept.expired
