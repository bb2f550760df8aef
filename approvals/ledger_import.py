"""`ledger import`: a `billsleuth-ledger/1` input loaded in one transaction, and put on record.

engine.ledger_load checks and upserts; this module owns the transaction around it: nothing is written
when any record is bad (LedgerRejected, with every problem up to the first fifty), a dry run rolls back
after counting, and a real import appends one `ledger.imported` activity row (counts, SHA-256) before
it commits. An import and a reseed take the same lock: they never interleave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from engine.db import driver_connection
from engine.ledger_load import MAX_ERRORS, InputFile, LoadResult, load

# Held by `seed` too (scenarios.seed): the ledger is rebuilt or loaded by one process at a time.
LEDGER_LOCK = "billsleuth.seed"


class LedgerRejected(ValueError):
    """The input has bad records; nothing was written."""

    def __init__(self, errors: list[str], count: int) -> None:
        more = count - len(errors)
        lines = [*errors, *([f"… and {more} more"] if more > 0 else [])]
        super().__init__("\n".join(lines))
        self.errors = errors
        self.count = count
        self.lines = lines


@dataclass
class ImportReport:
    counts: dict[str, dict[str, int]]
    sha256: str
    files: list[dict[str, Any]]
    dry_run: bool
    records: int
    notes: list[dict[str, Any]] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "sha256": self.sha256,
            "files": self.files,
            "records": self.records,
            "counts": self.counts,
            "notes": self.notes,
        }


async def lock_ledger(conn: AsyncConnection) -> None:
    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtext(LEDGER_LOCK))))


def _report(result: LoadResult, dry_run: bool) -> ImportReport:
    counts = {kind: c.as_dict() for kind, c in result.counts.items()}
    return ImportReport(counts, result.sha256, result.files, dry_run, result.records)


async def import_ledger(
    engine: AsyncEngine, files: list[InputFile], *, actor: str, dry_run: bool = False
) -> ImportReport:
    """Load `files` (checked whole first); raises LedgerRejected, writing nothing, on any bad record."""
    async with engine.connect() as conn:
        transaction = await conn.begin()
        try:
            await lock_ledger(conn)
            result = await load(await driver_connection(conn), files)
            if not result.ok:
                raise LedgerRejected(result.errors[:MAX_ERRORS], result.error_count)
            report = _report(result, dry_run)
            if dry_run:
                await transaction.rollback()
                return report
            details = {"sha256": report.sha256, "files": report.files, "counts": report.counts}
            await activity.record(
                conn, activity.USER, actor, "ledger.imported", "ledger", report.sha256, details
            )
            await transaction.commit()
            return report
        except BaseException:
            if transaction.is_active:
                await transaction.rollback()
            raise
