"""`ledger import`: a `billsleuth-ledger` input loaded in one transaction, and put on record.

engine.ledger_load checks and upserts; this module owns the transaction around it: nothing is written
when any record is bad (LedgerRejected, with every problem up to the first fifty), a dry run rolls back
after counting, and a real import appends one `ledger.imported` activity row (counts, SHA-256) before
it commits. An import and a reseed take the same lock: they never interleave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity, outbox
from approvals.limits import OwedUnknown, lock_invoice, owed_on_invoice
from approvals.models import OPEN_NOTES, NoteStatus
from engine import locks
from engine.db import driver_connection
from engine.ledger_checks import MAX_ERRORS
from engine.ledger_load import InputFile, LoadResult, Progress, load
from engine.money import fmt

# The activity row for each BillSleuth note whose invoice, lines, payments or credit notes an import changed.
CHANGED_UNDER_NOTE = "ledger.changed_under_note"
# The outbox change that makes the bot redraw such a note's card (its status did not change).
LEDGER_CHANGED = "ledger.changed"

# BillSleuth's own notes, still open or issued, on an invoice the import changed (ledger_touched).
_NOTES_UNDER_CHANGE = text(
    "SELECT n.id, n.invoice_id, n.status, n.amount, n.case_id FROM credit_notes n "
    "WHERE NOT n.imported AND n.status IN ('draft', 'approved', 'issued') "
    "AND n.invoice_id IN (SELECT invoice_id FROM ledger_touched) ORDER BY n.invoice_id, n.id"
)


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
    await locks.xact_lock(conn, locks.LEDGER)  # held by `seed` too


def _report(result: LoadResult, dry_run: bool) -> ImportReport:
    counts = {kind: c.as_dict() for kind, c in result.counts.items()}
    return ImportReport(counts, result.sha256, result.files, dry_run, result.records)


async def rederive_notes(conn: AsyncConnection) -> list[dict[str, Any]]:
    """What is still owed back under each BillSleuth note on a changed invoice, re-derived from the
    ledger as the import leaves it (as issuing would: approvals.issuing's overcharge_changed check), under
    the invoice's lock. An open note it no longer covers will be refused at issue; an issued one stays
    issued (money that left), and the change is kept and put on record naming it."""
    notes = (await conn.execute(_NOTES_UNDER_CHANGE)).all()
    found: list[dict[str, Any]] = []
    for note in notes:
        await lock_invoice(conn, note.invoice_id)
        entry: dict[str, Any] = {
            "credit_note_id": note.id,
            "invoice_id": note.invoice_id,
            "case_id": note.case_id,
            "status": note.status,
            "amount": fmt(note.amount),
        }
        try:
            owed = await owed_on_invoice(
                conn, note.invoice_id, pending=OPEN_NOTES, excluding_case=note.case_id
            )
        except OwedUnknown as error:
            entry |= {"still_owed": None, "covered": False, "explain": str(error)}
        else:
            covered = note.status == NoteStatus.ISSUED or note.amount <= owed.amount
            entry |= {"still_owed": fmt(owed.amount), "covered": covered, "explain": owed.explain()}
        if note.status != NoteStatus.ISSUED and not entry["covered"]:
            entry["rule"] = "overcharge_changed"
        found.append(entry)
    return found


async def record_notes(conn: AsyncConnection, notes: list[dict[str, Any]], actor: str, sha256: str) -> None:
    """One activity row per note (after every invoice lock: the chain's head is locked last), and a change
    for the bot to redraw each open note's card, which says the ledger changed."""
    for note in notes:
        details = {**note, "sha256": sha256}
        await activity.record(
            conn, activity.USER, actor, CHANGED_UNDER_NOTE, "credit_note", note["credit_note_id"], details
        )
        if note["status"] != NoteStatus.ISSUED and note["case_id"]:
            await outbox.card_changed(conn, note["credit_note_id"], note["case_id"], LEDGER_CHANGED)


_LAST_CHANGE = text(
    "SELECT at, details FROM activity_log WHERE action = :action AND entity_type = 'credit_note' "
    "AND entity_id = :note ORDER BY id DESC LIMIT 1"
)


async def ledger_change(conn: AsyncConnection, credit_note_id: str) -> str | None:
    """What the card of an open note says when an import changed its invoice since it was drafted (the
    latest such import), or None."""
    row = (await conn.execute(_LAST_CHANGE, {"action": CHANGED_UNDER_NOTE, "note": credit_note_id})).first()
    if row is None:
        return None
    said = f"the ledger changed on {row.at:%Y-%m-%d} (ledger import): {row.details['explain']}"
    if not row.details.get("covered", True):
        said += "; this note is no longer covered, so issuing it will be refused"
    return said


async def import_ledger(
    engine: AsyncEngine,
    files: list[InputFile],
    *,
    actor: str,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Load `files` (checked whole first); raises LedgerRejected, writing nothing, on any bad record."""
    async with engine.connect() as conn:
        transaction = await conn.begin()
        try:
            await lock_ledger(conn)
            result = await load(await driver_connection(conn), files, progress)
            if not result.ok:
                raise LedgerRejected(result.errors[:MAX_ERRORS], result.error_count)
            report = _report(result, dry_run)
            report.notes = await rederive_notes(conn)
            if dry_run:
                await transaction.rollback()
                return report
            details = {"sha256": report.sha256, "files": report.files, "counts": report.counts}
            await activity.record(
                conn, activity.USER, actor, "ledger.imported", "ledger", report.sha256, details
            )
            await record_notes(conn, report.notes, actor, report.sha256)
            await transaction.commit()
            return report
        except BaseException:
            if transaction.is_active:
                await transaction.rollback()
            raise
