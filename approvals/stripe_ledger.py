"""A Stripe sync, whole: the account read (engine.stripe_sync, in a thread: the SDK's calls block) and
written through `ledger import`'s own transaction (approvals.ledger_import: the same checks, the same
`ledger.imported` activity row, the same care for notes in flight), then the cursor moved on. The cursor
moves only after the import committed: a sync that fails is read again whole next time, and a re-read
changes nothing. `billsleuth stripe sync` and the bot's Stripe webhook both run it.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.ledger_import import ImportReport, import_ledger
from engine.db import driver_connection
from engine.ledger_load import InputFile
from engine.stripe_sync import fetch, read_state, write_cursor

if TYPE_CHECKING:
    import stripe


@dataclass
class StripeSync:
    report: ImportReport
    skipped: dict[str, int]

    def payload(self) -> dict[str, Any]:
        return {**self.report.payload(), "skipped": self.skipped}


async def sync_stripe(
    engine: AsyncEngine, client: stripe.StripeClient, *, actor: str, since: date | None = None
) -> StripeSync:
    """Read the account from where the last sync stopped (or `since`) and import it; LedgerRejected, with
    nothing written, if the loader refuses what the mapping made."""
    async with engine.connect() as conn:
        cursor, ledger = await read_state(await driver_connection(conn))
    fetched = await asyncio.to_thread(fetch, client, cursor, since, ledger)
    data = fetched.jsonl()
    report = await import_ledger(
        engine, [InputFile("stripe", lambda: io.BytesIO(data), len(data))], actor=actor
    )
    async with engine.begin() as conn:
        await write_cursor(await driver_connection(conn), fetched.cursor)
    return StripeSync(report, dict(sorted(fetched.skipped.items())))
