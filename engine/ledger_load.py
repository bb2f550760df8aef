"""Loading a `billsleuth-ledger/1` input into the ledger: streamed, checked whole, then upserted by id.

Memory stays flat whatever the input's size: lines are read one at a time, each record's own checks run
in Python (engine.interchange) and its rows go to temporary staging tables by COPY, a batch at a time.
The checks that need other records (references, an invoice's currency for its payments, an id given
twice) then run in SQL over the staging tables and the ledger as it stands. Any problem: nothing is
written (the caller rolls back). Otherwise each table is upserted from its staging table in one statement,
parents first, counting what was added, changed (a row whose columns differ) and left unchanged.

Runs on a psycopg AsyncConnection in the caller's transaction (engine.db.driver_connection for a
SQLAlchemy one); the staging tables go with the transaction. After `load`, the temporary table
`ledger_touched (invoice_id, what)` names the invoices that were there before and whose header, lines,
payments or credit notes the input changed (approvals.ledger_import re-derives their open notes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engine.interchange import (
    COLUMNS,
    FORMAT_LINE,
    TABLE_OF,
    Invalid,
    Parsed,
    parse_header,
    parse_record,
    record_id,
)
from engine.money import ZERO_DECIMAL_CURRENCIES

if TYPE_CHECKING:
    import psycopg

MAX_ERRORS = 50  # shown; the rest are counted
BATCH_ROWS = 5_000  # rows a staging table collects before they go by COPY

# Parents before children: the order rows are upserted in (foreign keys).
TABLE_ORDER = (
    "plans",
    "coupons",
    "tax_rates",
    "customers",
    "subscriptions",
    "subscription_events",
    "invoices",
    "invoice_lines",
    "payments",
    "credit_notes",
)
KEY = {table: ("code" if table == "tax_rates" else "id") for table in TABLE_ORDER}
STAGED_ONLY = frozenset({"places"})  # staged for the checks, not a ledger column


def stage(table: str) -> str:
    return f"ledger_stage_{table}"


@dataclass(frozen=True)
class InputFile:
    """One input: its name as errors show it (`PATH`, `<stdin>`), how to open it (bytes), and its size
    where known (a progress bar's total)."""

    name: str
    open: Callable[[], IO[bytes]]
    size: int | None = None


Progress = Callable[[int, int], None]  # (kB read, kB in all)
PROGRESS_EVERY = 2_000  # lines between two progress reports


def input_files(path: str, stdin: IO[bytes]) -> list[InputFile]:
    """A file, every `*.jsonl` file of a directory (by name), or `-` for standard input."""
    if path == "-":
        return [InputFile("<stdin>", lambda: stdin)]
    where = Path(path)
    if where.is_dir():
        files = sorted(p for p in where.iterdir() if p.suffix == ".jsonl" and p.is_file())
        if not files:
            raise LedgerInputError(f"{path}: no .jsonl files in this directory")
        return [InputFile(str(p), _opener(p), p.stat().st_size) for p in files]
    if not where.is_file():
        raise LedgerInputError(f"{path}: no such file or directory")
    return [InputFile(str(where), _opener(where), where.stat().st_size)]


def _opener(path: Path) -> Callable[[], IO[bytes]]:
    return lambda: path.open("rb")


class LedgerInputError(ValueError):
    """The input cannot be read at all (no such file): one line."""


@dataclass
class Counts:
    added: int = 0
    changed: int = 0
    unchanged: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"added": self.added, "changed": self.changed, "unchanged": self.unchanged}


@dataclass
class LoadResult:
    """What an input held: its problems (the first MAX_ERRORS, `PATH:LINE: field: problem`) or what it
    changed, per record type; the SHA-256 of every byte read, and of each file."""

    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    counts: dict[str, Counts] = field(default_factory=dict)
    sha256: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)
    records: int = 0

    @property
    def ok(self) -> bool:
        return self.error_count == 0


class _Errors:
    """Problems in input order, the first MAX_ERRORS kept."""

    def __init__(self) -> None:
        self.kept: list[tuple[int, int, str]] = []
        self.count = 0

    def add(self, file_no: int, line: int, message: str, *, kept_anyway: bool = False) -> None:
        """kept_anyway: one of a check's first problems, which may come before ones already kept."""
        self.count += 1
        if kept_anyway or len(self.kept) < MAX_ERRORS:
            self.kept.append((file_no, line, message))


# ---- reading ----


Line = tuple[int, int, Any, "Invalid | None"]  # file number, line number, decoded JSON, or why not


def decoded_lines(
    files: list[InputFile], digests: list[Any], whole: Any, progress: Progress | None = None
) -> Iterator[Line]:
    """Every non-blank line of every file, decoded; hashing each byte as it goes by."""
    sizes = [f.size for f in files]
    total = sum(s for s in sizes if s is not None) // 1024 if None not in sizes else 0
    progress = progress if total else None  # stdin: no total to show progress against
    read = 0
    for file_no, source in enumerate(files):
        digest = hashlib.sha256()
        digests.append(digest)
        empty = True
        with source.open() as stream:
            for number, raw in enumerate(stream, start=1):
                digest.update(raw)
                whole.update(raw)
                read += len(raw)
                if progress is not None and number % PROGRESS_EVERY == 0:
                    progress(read // 1024, total)
                if not raw.strip():
                    continue
                empty = False
                try:
                    yield file_no, number, json.loads(raw.decode("utf-8")), None
                except UnicodeDecodeError:
                    yield file_no, number, None, Invalid("line", "is not UTF-8")
                except json.JSONDecodeError as error:
                    yield file_no, number, None, Invalid("line", f"is not JSON ({error.msg})")
        if empty:
            yield (
                file_no,
                1,
                None,
                Invalid("type", f"the file is empty; its first line must be {FORMAT_LINE}"),
            )
    if progress is not None:
        progress(total, total)


def records_of(lines: Iterable[Line], errors: _Errors) -> Iterator[tuple[int, int, Any, str | None]]:
    """Each record after its file's format line, with the file's source; a bad format line is reported
    and its file's records are read with no source (so their own problems are still found)."""
    current_file, source, seen_header = -1, None, False
    for file_no, number, record, problem in lines:
        if file_no != current_file:
            current_file, source, seen_header = file_no, None, False
        if problem is not None:
            errors.add(file_no, number, f"{problem.problem.field}: {problem.problem.message}")
            seen_header = True
            continue
        if not seen_header:
            seen_header = True
            try:
                source = parse_header(record)
            except Invalid as error:
                errors.add(file_no, number, f"{error.problem.field}: {error.problem.message}")
                if isinstance(record, dict) and record.get("type") != "format":
                    yield file_no, number, record, None  # the data line it is still gets its checks
            continue
        yield file_no, number, record, source


# ---- staging ----


class _Stager:
    """Rows for each staging table, sent by COPY a batch at a time."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.buffers: dict[str, list[tuple[Any, ...]]] = {table: [] for table in [*TABLE_ORDER, "bad"]}
        self.staged: dict[str, int] = dict.fromkeys(TABLE_ORDER, 0)

    async def add(self, table: str, row: tuple[Any, ...]) -> None:
        buffer = self.buffers[table]
        buffer.append(row)
        if len(buffer) >= BATCH_ROWS:
            await self.flush(table)

    async def flush(self, table: str) -> None:
        rows, self.buffers[table] = self.buffers[table], []
        if not rows:
            return
        columns = ("type", "id") if table == "bad" else (*COLUMNS[table], "_file", "_line")
        statement = f"COPY {stage(table)} ({', '.join(columns)}) FROM STDIN"
        async with self.conn.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[arg-type]
            for row in rows:
                await copy.write_row(row)
        if table != "bad":
            self.staged[table] += len(rows)

    async def flush_all(self) -> None:
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


async def _stage_record(stager: _Stager, parsed: Parsed, file_no: int, number: int) -> None:
    from psycopg.types.json import Jsonb

    for table, rows in parsed.rows.items():
        for row in rows:
            if table == "subscription_events":
                row = (*row[:4], Jsonb(row[4]), *row[5:])
            await stager.add(table, (*row, file_no, number))


# ---- the checks that need other records (SQL over staging and ledger) ----


def _unknown(record_type: str, value: str) -> str:
    """`value` is no id of a record type: not staged, not in the ledger, not named by a record refused
    for its own problem. Anti-joins (NOT EXISTS), never NOT IN: a NOT IN whose list outgrows work_mem is
    checked row by row against all of it, which at a million invoices never ends."""
    table = TABLE_OF[record_type]
    key = KEY[table]
    return (
        f"NOT EXISTS (SELECT 1 FROM {stage(table)} k WHERE k.{key} = {value}) "
        f"AND NOT EXISTS (SELECT 1 FROM {table} k WHERE k.{key} = {value}) "
        f"AND NOT EXISTS (SELECT 1 FROM ledger_stage_bad k WHERE k.type = '{record_type}' AND k.id = {value})"
    )


def _effective(table: str, columns: str) -> str:
    """The rows as they will stand: staged ones over the ledger's."""
    return (
        f"(SELECT {columns} FROM {stage(table)} UNION ALL SELECT {columns} FROM {table} t "
        f"WHERE NOT EXISTS (SELECT 1 FROM {stage(table)} s WHERE s.id = t.id))"
    )


def _reference(table: str, column: str, record_type: str, field_name: str | None = None) -> str:
    value = f"s.{column}"
    return (
        f"SELECT _file, _line, '{field_name or column}', format('no {record_type.replace('_', ' ')} %%L in "
        f"the input or the ledger', {value}) FROM {stage(table)} s WHERE {value} IS NOT NULL "
        f"AND {_unknown(record_type, value)}"
    )


def _duplicates(table: str) -> str:
    key = KEY[table]
    field_name = "format('lines[%%s].id', line_no - 1)" if table == "invoice_lines" else f"'{key}'"
    return (
        f"SELECT _file, _line, {field_name}, format('%%s is given twice (first at %%s:%%s)', {key}, "
        f"(%(files)s::text[])[first_file + 1], first_line) FROM (SELECT *, row_number() OVER w AS n, "
        f"first_value(_file) OVER w AS first_file, first_value(_line) OVER w AS first_line "
        f"FROM {stage(table)} WINDOW w AS (PARTITION BY {key} ORDER BY _file, _line)) d WHERE n > 1"
    )


_MINOR = "(CASE WHEN {c} = ANY(%(zero)s::text[]) THEN 0 ELSE 2 END)"


def _decimals(table: str) -> str:
    """A payment's or credit note's amount, written with its invoice's currency's decimals."""
    minor = _MINOR.format(c="i.currency")
    return (
        "SELECT s._file, s._line, 'amount', format('written with %%s decimals; %%s amounts have %%s', "
        f"s.places, i.currency, {minor}) FROM {stage(table)} s "
        f"JOIN {_effective('invoices', 'id, currency')} i ON i.id = s.invoice_id WHERE s.places <> {minor}"
    )


CHECKS: tuple[str, ...] = (
    *(_duplicates(table) for table in TABLE_ORDER),
    _reference("subscriptions", "customer_id", "customer"),
    _reference("subscriptions", "plan_id", "plan"),
    _reference("subscriptions", "coupon_id", "coupon"),
    _reference("subscription_events", "subscription_id", "subscription"),
    _reference("subscription_events", "payload->>'plan_id'", "plan", "payload.plan_id"),
    _reference("subscription_events", "payload->>'to_plan'", "plan", "payload.to_plan"),
    _reference("invoices", "customer_id", "customer"),
    _reference("invoices", "subscription_id", "subscription"),
    _reference("payments", "invoice_id", "invoice"),
    _reference("credit_notes", "invoice_id", "invoice"),
    # An invoice bills its subscription's customer, in that customer's currency.
    "SELECT s._file, s._line, 'subscription_id', format('%%L belongs to customer %%L, not %%L', "
    "s.subscription_id, sub.customer_id, s.customer_id) FROM ledger_stage_invoices s JOIN "
    + _effective("subscriptions", "id, customer_id")
    + " sub ON sub.id = s.subscription_id "
    # an unknown customer on either side is reported once, as itself: both must be there to compare
    + "JOIN "
    + _effective("customers", "id")
    + " mine ON mine.id = s.customer_id JOIN "
    + _effective("customers", "id")
    + " theirs ON theirs.id = sub.customer_id WHERE sub.customer_id <> s.customer_id",
    "SELECT s._file, s._line, 'currency', format('%%s is not the currency of customer %%L (%%s)', "
    "s.currency, c.id, c.currency) FROM ledger_stage_invoices s JOIN "
    + _effective("customers", "id, currency")
    + " c ON c.id = s.customer_id WHERE c.currency <> s.currency",
    _decimals("payments"),
    _decimals("credit_notes"),
    "SELECT s._file, s._line, 'currency', format('%%s is not the currency of invoice %%L (%%s)', "
    "s.currency, i.id, i.currency) FROM ledger_stage_credit_notes s JOIN "
    + _effective("invoices", "id, currency")
    + " i ON i.id = s.invoice_id WHERE s.currency IS NOT NULL AND s.currency <> i.currency",
    # A billing system's credit note never replaces one BillSleuth drafted.
    "SELECT s._file, s._line, 'id', format('%%L is a BillSleuth credit note; an imported one cannot replace "
    "it', s.id) FROM ledger_stage_credit_notes s JOIN credit_notes c ON c.id = s.id WHERE NOT c.imported",
)


async def run_checks(conn: psycopg.AsyncConnection[Any], names: list[str], errors: _Errors) -> None:
    params = {"files": names, "zero": sorted(ZERO_DECIMAL_CURRENCIES)}
    for check in CHECKS:
        query = (
            f"SELECT _file, _line, field, message, count(*) OVER () FROM ({check}) AS c(_file, _line, field, "
            f"message) ORDER BY _file, _line LIMIT {MAX_ERRORS}"
        )
        rows = await (await conn.execute(query, params)).fetchall()  # type: ignore[arg-type]
        for file_no, line, field_name, message, _ in rows:
            errors.add(file_no, line, f"{field_name}: {message}", kept_anyway=True)
        if rows:
            errors.count += rows[0][4] - len(rows)


# ---- writing ----


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
        + _effective("invoices", "id, currency")
        + " i WHERE s.currency IS NULL AND i.id = s.invoice_id"
    )
    counts: dict[str, Counts] = {}
    for table in TABLE_ORDER:
        if table == "invoice_lines":
            await conn.execute(_REMOVE_LINES)
        added, changed = await (await conn.execute(_write(table))).fetchone()  # type: ignore[misc]
        if table != "invoice_lines":
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


# ---- the whole load ----


async def load(
    conn: psycopg.AsyncConnection[Any], files: list[InputFile], progress: Progress | None = None
) -> LoadResult:
    """Check the whole input; if it is sound, upsert it (in the caller's transaction, which must roll
    back when the result is not ok: staging tables hold rows until then)."""
    whole = hashlib.sha256()
    digests: list[Any] = []
    result = await load_records(conn, [f.name for f in files], decoded_lines(files, digests, whole, progress))
    result.sha256 = whole.hexdigest()
    result.files = [{"path": f.name, "sha256": d.hexdigest()} for f, d in zip(files, digests, strict=False)]
    return result


async def load_records(
    conn: psycopg.AsyncConnection[Any], names: list[str], lines: Iterable[Line]
) -> LoadResult:
    """`load` over lines already decoded (seed's ledger comes as records built in memory)."""
    errors = _Errors()
    await create_staging(conn)
    stager = _Stager(conn)
    result = LoadResult()
    for file_no, number, record, source in records_of(lines, errors):
        result.records += 1
        try:
            parsed = parse_record(record, source)
        except Invalid as error:
            errors.add(file_no, number, f"{error.problem.field}: {error.problem.message}")
            known = record_id(record)
            if known is not None:
                await stager.add("bad", known)
            continue
        await _stage_record(stager, parsed, file_no, number)
    await stager.flush_all()
    # Temporary tables are never analysed on their own: without statistics the planner takes a staged
    # million rows for a few hundred and joins them row by row.
    for table in TABLE_ORDER:
        await conn.execute(f"ANALYZE {stage(table)}")
    await conn.execute("ANALYZE ledger_stage_bad")
    await run_checks(conn, names, errors)
    if errors.count:
        result.error_count = errors.count
        result.errors = [
            f"{names[f]}:{line}: {message}" for f, line, message in sorted(errors.kept)[:MAX_ERRORS]
        ]
        return result
    result.counts = await write(conn, stager.staged)
    return result


def records_as_lines(records: Iterable[dict[str, Any]], source: str | None = None) -> Iterator[Line]:
    """Records built in memory (seed's ledger), as the lines of one input: the format line first."""
    header: dict[str, Any] = {"type": "format", "version": json.loads(FORMAT_LINE)["version"]}
    if source is not None:
        header["source"] = source
    yield 0, 1, header, None
    for number, record in enumerate(records, start=2):
        yield 0, number, record, None
