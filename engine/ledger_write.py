"""Writing a checked ledger import: each table upserted by id from its staging table in one statement,
parents first, counting what was added, changed (a row whose columns differ) and left unchanged, and
noting in `ledger_touched (invoice_id, what)` the invoices that were there before and whose header,
lines, payments or credit notes changed (approvals.ledger_import re-derives their open notes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.interchange import COLUMNS, TABLE_OF
from engine.ledger_staging import KEY, STAGED_ONLY, TABLE_ORDER, effective, stage

if TYPE_CHECKING:
    import psycopg


@dataclass
class Counts:
    added: int = 0
    changed: int = 0
    unchanged: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"added": self.added, "changed": self.changed, "unchanged": self.unchanged}


def _upsert(table: str, returning: str) -> str:
    columns = [c for c in COLUMNS[table] if c not in STAGED_ONLY]
    key = KEY[table]
    others = [c for c in columns if c != key]
    names = ", ".join(columns)
    target = f"({', '.join(others)})"
    extra_cols, extra_vals, guard = "", "", ""
    if table == "credit_notes":  # the billing system's own notes; ours were refused by the checks
        extra_cols, extra_vals, guard = ", imported", ", true", " AND t.imported"
    return (
        f"INSERT INTO {table} AS t ({names}{extra_cols}) SELECT {names}{extra_vals} FROM {stage(table)} "
        f"ON CONFLICT ({key}) DO UPDATE SET {target} = ROW({', '.join('EXCLUDED.' + c for c in others)}) "
        f"WHERE ROW({', '.join('t.' + c for c in others)}) IS DISTINCT FROM "
        f"ROW({', '.join('EXCLUDED.' + c for c in others)}){guard} "
        f"RETURNING {returning}"
    )


# An invoice that was in the ledger before this import: staged and already there, or not staged at all
# (joins, not IN lists: see _unknown).
_PRE_EXISTING = (
    "LEFT JOIN ledger_stage_invoices si ON si.id = u.invoice_id "
    "LEFT JOIN ledger_existing e ON e.id = u.invoice_id WHERE si.id IS NULL OR e.id IS NOT NULL"
)


def _write(table: str) -> str:
    """Upsert one table; count added and changed rows; note the pre-existing invoices it touched."""
    if table == "invoices":
        returning, touch = "t.id AS invoice_id, (xmax = 0) AS added", "WHERE NOT added"
    elif table in ("invoice_lines", "payments", "credit_notes"):
        returning, touch = "t.invoice_id, (xmax = 0) AS added", _PRE_EXISTING
    elif table == "refunds":  # a refund touches its payment's invoice (payments are written by now)
        returning = "(SELECT p.invoice_id FROM payments p WHERE p.id = t.payment_id) AS invoice_id, "
        returning += "(xmax = 0) AS added"
        touch = _PRE_EXISTING
    else:
        returning, touch = "(xmax = 0) AS added", None
    touched = (
        f", touched AS (INSERT INTO ledger_touched SELECT u.invoice_id, '{table}' FROM up u {touch})"
        if touch
        else ""
    )
    return (
        f"WITH up AS ({_upsert(table, returning)}){touched} "
        "SELECT count(*) FILTER (WHERE added), count(*) FILTER (WHERE NOT added) FROM up"
    )


# Lines an imported invoice no longer has: its lines are the file's.
_REMOVE_LINES = (
    "WITH gone AS (DELETE FROM invoice_lines l USING ledger_stage_invoices s WHERE l.invoice_id = s.id "
    "AND NOT EXISTS (SELECT 1 FROM ledger_stage_invoice_lines n WHERE n.id = l.id) RETURNING l.invoice_id) "
    "INSERT INTO ledger_touched SELECT invoice_id, 'invoice_lines' FROM gone"
)
# Likewise a subscription's items are the file's.
_REMOVE_ITEMS = (
    "DELETE FROM subscription_items i USING ledger_stage_subscriptions s WHERE i.subscription_id = s.id "
    "AND NOT EXISTS (SELECT 1 FROM ledger_stage_subscription_items n WHERE n.id = i.id)"
)
_PARTS = ("invoice_lines", "subscription_items")  # counted with the record they belong to


async def write(conn: psycopg.AsyncConnection[Any], staged: dict[str, int]) -> dict[str, Counts]:
    """Upsert every staging table, parents first; counts per record type (an invoice counts as changed
    when its header or any of its lines did)."""
    await conn.execute("DROP TABLE IF EXISTS ledger_existing")
    await conn.execute(
        "CREATE TEMP TABLE ledger_existing ON COMMIT DROP AS "
        "SELECT s.id FROM ledger_stage_invoices s JOIN invoices i ON i.id = s.id"
    )
    await conn.execute("ANALYZE ledger_existing")
    # A credit note written without its currency is in its invoice's (as the insert trigger would fill it
    # in): staged so, a re-import compares equal.
    await conn.execute(
        "UPDATE ledger_stage_credit_notes s SET currency = i.currency FROM "
        + effective("invoices", "id, currency")
        + " i WHERE s.currency IS NULL AND i.id = s.invoice_id"
    )
    counts: dict[str, Counts] = {}
    for table in TABLE_ORDER:
        if table == "invoice_lines":
            await conn.execute(_REMOVE_LINES)
        if table == "subscription_items":
            await conn.execute(_REMOVE_ITEMS)
        added, changed = await (await conn.execute(_write(table))).fetchone()  # type: ignore[misc]
        if table not in _PARTS:
            counts[table] = Counts(added, changed, staged[table] - added - changed)
    invoices = counts["invoices"]
    row = await (
        await conn.execute(
            "SELECT count(DISTINCT invoice_id) FROM ledger_touched "
            "WHERE what IN ('invoices', 'invoice_lines') AND invoice_id IN (SELECT id FROM ledger_existing)"
        )
    ).fetchone()
    invoices.changed = row[0] if row else 0
    invoices.unchanged = staged["invoices"] - invoices.added - invoices.changed
    return {record_type: counts[table] for record_type, table in TABLE_OF.items()}
