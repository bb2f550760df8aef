"""The staging tables of a ledger import: one temporary table per ledger table (its columns, how many
decimals an amount was written with, and the input line it came from), filled by COPY a batch at a time
so that memory stays flat whatever the input's size. They go with the transaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.interchange import COLUMNS
from engine.interchange_records import Parsed

if TYPE_CHECKING:
    import psycopg

BATCH_ROWS = 5_000  # rows a staging table collects before they go by COPY

# Parents before children: the order rows are upserted in (foreign keys).
TABLE_ORDER = (
    "plans",
    "coupons",
    "tax_rates",
    "customers",
    "subscriptions",
    "subscription_items",
    "subscription_events",
    "invoices",
    "invoice_lines",
    "payments",
    "credit_notes",
    "refunds",
)
KEY = {table: ("code" if table == "tax_rates" else "id") for table in TABLE_ORDER}
STAGED_ONLY = frozenset({"places"})  # staged for the checks, not a ledger column


def stage(table: str) -> str:
    return f"ledger_stage_{table}"


def effective(table: str, columns: str) -> str:
    """The rows as they will stand: staged ones over the ledger's."""
    return (
        f"(SELECT {columns} FROM {stage(table)} UNION ALL SELECT {columns} FROM {table} t "
        f"WHERE NOT EXISTS (SELECT 1 FROM {stage(table)} s WHERE s.id = t.id))"
    )


# COPY's text format: a tab between values, \N for null, and these characters written as escapes.
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: object) -> str:
    """One value as COPY text (escaped): what psycopg would send for it."""
    if isinstance(value, bool):
        return "t" if value else "f"
    if not isinstance(value, str):
        value = json.dumps(value) if isinstance(value, dict | list) else str(value)
    return value.translate(_ESCAPES)


def copy_line(row: tuple[object, ...]) -> str:
    """One row as a line of COPY text. The readers give most values as text already; a value needs
    escaping only when it holds a backslash, a tab, a newline or a carriage return, which is rare: the
    joined line shows whether any does (one backslash per null and a tab between values is all a plain
    row has), and only then is each value escaped. A value that is not text yet (a flag, a count, a figure
    a check worked out, in the rarer record types) sends the row the same careful way."""
    try:
        line = "\t".join(["\\N" if value is None else value for value in row])  # type: ignore[misc]
    except TypeError:
        return "\t".join(["\\N" if value is None else copy_text(value) for value in row]) + "\n"
    if (
        line.count("\\") != row.count(None)
        or line.count("\t") != len(row) - 1
        or "\n" in line
        or "\r" in line
    ):
        line = "\t".join(["\\N" if value is None else copy_text(value) for value in row])
    return line + "\n"


class Stager:
    """Rows for each staging table as lines of COPY text, sent a batch at a time. Adding is plain Python
    (a few hundred thousand rows for a large ledger); only a full batch waits on the database."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.buffers: dict[str, list[str]] = {table: [] for table in [*TABLE_ORDER, "bad"]}
        self.staged: dict[str, int] = dict.fromkeys(TABLE_ORDER, 0)
        self.full: set[str] = set()

    def add(self, table: str, row: tuple[object, ...]) -> None:
        buffer = self.buffers[table]
        buffer.append(copy_line(row))
        if len(buffer) >= BATCH_ROWS:
            self.full.add(table)

    def add_record(self, parsed: Parsed, file_no: int, number: int) -> None:
        """A checked record's rows (COPY text already, engine.interchange_records), each with the input
        line it came from."""
        where = (str(file_no), str(number))
        for table, rows in parsed.rows.items():
            for row in rows:
                self.add(table, row + where)

    async def flush_full(self) -> None:
        while self.full:
            await self.flush(self.full.pop())

    async def flush(self, table: str) -> None:
        lines, self.buffers[table] = self.buffers[table], []
        if not lines:
            return
        columns = ("type", "id") if table == "bad" else (*COLUMNS[table], "_file", "_line")
        statement = f"COPY {stage(table)} ({', '.join(columns)}) FROM STDIN"
        async with self.conn.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[arg-type]
            await copy.write("".join(lines).encode())
        if table != "bad":
            self.staged[table] += len(lines)

    async def flush_all(self) -> None:
        self.full.clear()
        for table in self.buffers:
            await self.flush(table)


async def create_staging(conn: psycopg.AsyncConnection[Any]) -> None:
    for table in TABLE_ORDER:
        columns = ", ".join(c for c in COLUMNS[table] if c not in STAGED_ONLY)
        await conn.execute(f"DROP TABLE IF EXISTS {stage(table)}")
        await conn.execute(
            f"CREATE TEMP TABLE {stage(table)} ON COMMIT DROP AS SELECT {columns} FROM {table} WITH NO DATA"
        )
        added = ["places integer"] if "places" in COLUMNS[table] else []
        added += ["_file integer", "_line integer"]
        await conn.execute(f"ALTER TABLE {stage(table)} " + ", ".join(f"ADD COLUMN {c}" for c in added))
    await conn.execute("DROP TABLE IF EXISTS ledger_stage_bad")
    await conn.execute("CREATE TEMP TABLE ledger_stage_bad (type text, id text) ON COMMIT DROP")
    await conn.execute("DROP TABLE IF EXISTS ledger_touched")
    await conn.execute("CREATE TEMP TABLE ledger_touched (invoice_id text, what text) ON COMMIT DROP")
