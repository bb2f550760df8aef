"""Loading a `billsleuth-ledger` input (version 1 or 2): streamed, checked whole, then upserted by id.

Memory stays flat whatever the input's size: lines are read one at a time, each record's own checks run
in Python (engine.interchange_records) and its rows go to temporary staging tables by COPY, a batch at a time.
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

import orjson

from engine.interchange import FORMAT_LINE
from engine.interchange_fields import Invalid
from engine.interchange_records import Header, parse_header, parse_record, record_id
from engine.ledger_checks import MAX_ERRORS, Errors, run_checks
from engine.ledger_staging import TABLE_ORDER, Stager, create_staging, stage
from engine.ledger_write import Counts, write

if TYPE_CHECKING:
    import psycopg


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


# ---- reading ----


Line = tuple[int, int, Any, "Invalid | None"]  # file number, line number, decoded JSON, or why not

# A run of 19 digits could be a number orjson reads as a rounded float (past 64 bits) where json keeps it
# whole. Found by mapping every digit to "0" and everything else to " " and looking for nineteen "0"s: two
# passes in C, a tenth of what a regular expression's search cost.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_WIDE_NUMBER = b"0" * 19


def decoded(raw: bytes) -> Any:
    """One line's JSON, as json reads it. orjson reads the same lines to the same values at about a third
    of the cost; json reads whatever orjson refuses, so a refusal keeps its wording (json's) and what json
    takes and orjson does not (NaN, Infinity, a lone surrogate, a number past 64 bits) is still taken.
    Raises UnicodeDecodeError or json.JSONDecodeError."""
    if _WIDE_NUMBER not in raw.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw.decode("utf-8"))


def _unstorable_text(value: Any, path: str = "") -> Invalid | None:
    """The first string in the record that Postgres cannot store as text: one holding NUL (\\u0000), or a
    lone surrogate (\\ud800…\\udfff, half of a pair, which is not a character)."""
    if isinstance(value, str):
        if "\x00" in value:
            return Invalid(path or "line", "holds a NUL character (\\u0000), which cannot be stored as text")
        lone = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
        if lone is not None:
            return Invalid(path or "line", f"holds a lone surrogate (\\u{ord(lone):04x}), which is not text")
        return None
    if isinstance(value, dict):
        items: Iterable[tuple[str, Any]] = (
            (f"{path}.{key}" if path else str(key), item) for key, item in value.items()
        )
    elif isinstance(value, list):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for where, item in items:
        if (found := _unstorable_text(item, where)) is not None:
            return found
    return None


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
                if raw.isspace():
                    continue
                empty = False
                try:
                    record = decoded(raw)
                    # Only a \u escape can put NUL or a lone surrogate into a decoded line.
                    unstorable = _unstorable_text(record) if b"\\u" in raw else None
                    yield file_no, number, record, unstorable
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


_NO_HEADER = Header(2, None)


def records_of(lines: Iterable[Line], errors: Errors) -> Iterator[tuple[int, int, Any, Header]]:
    """Each record after its file's format line, with the file's version and source; a bad format line is
    reported and its file's records are read as version 2 with no source (so their own problems are still
    found)."""
    current_file, header, seen_header = -1, _NO_HEADER, False
    for file_no, number, record, problem in lines:
        if file_no != current_file:
            current_file, header, seen_header = file_no, _NO_HEADER, False
        if problem is not None:
            errors.add(file_no, number, f"{problem.problem.field}: {problem.problem.message}")
            seen_header = True
            continue
        if not seen_header:
            seen_header = True
            try:
                header = parse_header(record)
            except Invalid as error:
                errors.add(file_no, number, f"{error.problem.field}: {error.problem.message}")
                if isinstance(record, dict) and record.get("type") != "format":
                    yield file_no, number, record, header  # the data line it is still gets its checks
            continue
        yield file_no, number, record, header


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
    errors = Errors()
    await create_staging(conn)
    stager = Stager(conn)
    result = LoadResult()
    for file_no, number, record, header in records_of(lines, errors):
        result.records += 1
        try:
            parsed = parse_record(record, header.source, header.version)
        except Invalid as error:
            errors.add(file_no, number, f"{error.problem.field}: {error.problem.message}")
            known = record_id(record)
            if known is not None:
                stager.add("bad", known)
            continue
        stager.add_record(parsed, file_no, number)
        if stager.full:
            await stager.flush_full()
    await stager.flush_all()
    # Temporary tables are never analysed on their own: without statistics the planner takes a staged
    # million rows for a few hundred and joins them row by row. What the plans need is the row counts and
    # roughly how distinct the ids are: a sample of 3,000 rows (not the default 30,000) tells that, and
    # cost a tenth of the 0.4 s the default took on 160,000 rows (the setting ends with the transaction).
    await conn.execute("SET LOCAL default_statistics_target = 10")
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
