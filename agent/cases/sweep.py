"""The bot's periodic chores on cases (bot.flows.chores): expire overdue drafts, settle the cases waiting
on a note decided meanwhile or released by the daily limit, and cancel what the hold limit ends.

Not to be confused with the auditor's findings sweep (agent.auditor.sweep)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from agent.cases.deciding import take_note_outcome
from agent.cases.runner import CaseRunner
from agent.cases.settling import held_too_long, settle_waiting_cases
from agent.graph.state import Resume
from approvals import cancelling, expiry
from approvals.models import Decision

# What a case hears when the sweep cancels its note, approved but never issued, for the hold limit.
HOLD_LIMIT_PASSED = Resume.by_system(Decision.CANCEL, "hold limit passed")


@dataclass(frozen=True)
class Sweep:
    expired: list[str]  # credit notes that ran out of time in this sweep
    settled: list[str]  # cases resumed because their note was settled (or released by the budget)
    cancelled: list[str] = field(default_factory=list)  # notes held by the daily limit for too long


async def expire_overdue(cases: CaseRunner, now: datetime | None = None) -> list[str]:
    """Mark overdue drafts expired and let their cases rewrite the customer reply. Held notes stay
    held: only the bot's sweep releases them, because only it redraws their cards."""
    expired = await expiry.expire_overdue(cases.engine, now)
    await settle_waiting_cases(cases, release_held=False)
    return expired


async def sweep(cases: CaseRunner, now: datetime | None = None) -> Sweep:
    """The bot's periodic chores: expire overdue drafts, resume every waiting case whose note was
    settled meanwhile or can now leave the daily limit's hold (see `settle_waiting_cases`), and cancel
    notes the daily limit has held longer than the hold limit."""
    expired = await expiry.expire_overdue(cases.engine, now)
    settled = await settle_waiting_cases(cases)
    settings = await cases.settings_in_force()
    held, refused = await held_too_long(cases, settings, now)
    cancelled = await cancelling.cancel_held_too_long(cases.engine, held, settings, now)
    if cancelled:  # their cases rewrite the customer reply
        settled += await settle_waiting_cases(cases, release_held=False)
    ended = await cancelling.cancel_held_too_long(cases.engine, list(refused), settings, now, refused=True)
    for note_id in ended:  # their cases escalated: rewritten in place, the reply promising nothing
        if await take_note_outcome(cases, refused[note_id], HOLD_LIMIT_PASSED):
            settled.append(refused[note_id])
    return Sweep(expired, settled, cancelled + ended)
