""" "Held": an approved note the daily credit limit keeps from being issued right now.

One meaning everywhere — the evidence card, App Home, `list` and the sweep all ask
`held_by_daily_limit`. An approved note is held when its case still waits for it, it fits a whole day's
limit, and issuing it now would pass today's (UTC) limit in its currency. So:

- a waiting note that today's room would take is not held: it is on its way out (the bot's next sweep
  issues it), it offers no Cancel, and the hold limit never cancels it as "held";
- a note larger than a whole day's limit is never held: issuing refuses it for good and its case
  escalates (refused at issue, which waits for a person, not for room).

A read: nothing is locked or recorded; issuing checks again under the daily budget's lock.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from approvals.config import ApprovalSettings
from approvals.limits import issued_today
from approvals.models import NoteStatus
from approvals.policy import utc_now


class NoteAmount(Protocol):
    """What the decision needs of a note: a CreditNoteView or a row with these columns."""

    @property
    def status(self) -> str: ...

    @property
    def amount(self) -> Decimal: ...

    @property
    def currency(self) -> str: ...


def fits_a_day(amount: Decimal, currency: str, settings: ApprovalSettings) -> bool:
    """Whether `amount` can be issued on some day at all: a note larger than its currency's daily limit
    by itself would wait forever, so the hard stop escalates it instead of holding it."""
    return amount <= settings.daily_limit_for(currency)


async def passes_todays_limit(
    conn: AsyncConnection, amount: Decimal, currency: str, settings: ApprovalSettings, now: datetime
) -> bool:
    """Whether issuing `amount` now would take today's credit in `currency` past its daily limit."""
    return await issued_today(conn, now, currency) + amount > settings.daily_limit_for(currency)


async def held_by_daily_limit(
    conn: AsyncConnection,
    note: NoteAmount,
    *,
    case_waits: bool,
    settings: ApprovalSettings,
    now: datetime | None = None,
) -> bool:
    """Whether the daily credit limit holds this note now. `case_waits`: its case still waits for the
    note (an approved note whose case escalated was refused at issue, which is not a hold)."""
    if note.status != NoteStatus.APPROVED or not case_waits:
        return False
    if not fits_a_day(note.amount, note.currency, settings):
        return False
    return await passes_todays_limit(conn, note.amount, note.currency, settings, now or utc_now())
