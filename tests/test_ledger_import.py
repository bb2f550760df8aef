"""`ledger import` / `ledger export` (issue 28): a hand-written ledger whose ids look nothing like the seed's,
every kind of bad record refused with its one line and nothing written, re-import a no-op, and the round
trip export → import giving back the same ledger row for row."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.ledger_import import LedgerRejected, import_ledger
from engine.db import create_engine
from engine.interchange import COLUMNS, STAGED_COLUMNS
from engine.ledger_checks import MAX_ERRORS
from engine.ledger_export import records, write
from engine.ledger_load import InputFile, input_files
from tests.pg import clone_database, database_name, drop_database

FIXTURE = Path(__file__).parent / "fixtures" / "ledger" / "acme_billing.jsonl"
BILLSLEUTH = str(Path(sys.executable).with_name("billsleuth"))
LEDGER_TABLES = tuple(COLUMNS)

Record = dict[str, Any]


def billsleuth(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BILLSLEUTH, *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


def fixture_file() -> InputFile:
    return InputFile(str(FIXTURE), lambda: FIXTURE.open("rb"))


def fixture_lines() -> list[Record]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def as_file(lines: list[Any], name: str = "ledger.jsonl") -> InputFile:
    """Records (or raw text for a line that is not JSON) as one input file."""
    text_ = "".join(
        (line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n" for line in lines
    )
    data = text_.encode()
    return InputFile(name, lambda: io.BytesIO(data))


async def snapshot(engine: AsyncEngine) -> dict[str, list[tuple[Any, ...]]]:
    """Every ledger row's interchange columns (and the activity log's length), sorted: what a load may
    change and a refused one must not."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    async with engine.connect() as conn:
        for table in LEDGER_TABLES:
            columns = [c for c in COLUMNS[table] if c not in STAGED_COLUMNS]
            if table == "credit_notes":
                columns.append("imported")
            rows = await conn.execute(text(f"SELECT {', '.join(columns)} FROM {table}"))
            found[table] = sorted((tuple(str(v) for v in row) for row in rows), key=repr)
        found["activity_log"] = [tuple((await conn.execute(text("SELECT count(*) FROM activity_log"))).one())]
    return found


async def load(engine: AsyncEngine, lines: list[Any], dry_run: bool = False) -> Any:
    return await import_ledger(engine, [as_file(lines)], actor="tester", dry_run=dry_run)


async def test_a_hand_written_ledger_imports_and_importing_it_again_changes_nothing(db: AsyncEngine) -> None:
    first = await import_ledger(db, [fixture_file()], actor="tester")
    assert first.counts["customer"] == {"added": 4, "changed": 0, "unchanged": 0}
    assert first.counts["invoice"] == {"added": 10, "changed": 0, "unchanged": 0}
    assert first.counts["payment"] == {"added": 12, "changed": 0, "unchanged": 0}
    assert first.counts["credit_note"] == {"added": 1, "changed": 0, "unchanged": 0}
    after_first = await snapshot(db)
    again = await import_ledger(db, [fixture_file()], actor="tester")
    assert all(c["added"] == c["changed"] == 0 for c in again.counts.values()), again.counts
    assert again.counts["invoice"]["unchanged"] == 10
    after_again = await snapshot(db)
    assert {k: v for k, v in after_again.items() if k != "activity_log"} == {
        k: v for k, v in after_first.items() if k != "activity_log"
    }
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text("SELECT actor_id, entity_id, details FROM activity_log WHERE action = 'ledger.imported'")
            )
        ).all()
        sources = set((await conn.execute(text("SELECT DISTINCT source FROM invoices"))).scalars())
        notes = (await conn.execute(text("SELECT id, imported, currency FROM credit_notes"))).all()
    assert len(rows) == 2  # one row per import, the no-op included
    assert rows[0].entity_id == first.sha256 == rows[0].details["sha256"]
    assert rows[0].details["counts"]["invoice"]["added"] == 10
    assert rows[1].details["counts"]["invoice"]["unchanged"] == 10
    assert sources == {"acme-billing"}  # the file's source, on every row it wrote
    assert [tuple(n) for n in notes] == [("cn_sg_refund", True, "SGD")]  # the invoice's currency


async def test_a_changed_record_is_updated_and_counted_as_changed(db: AsyncEngine) -> None:
    lines = fixture_lines()
    await load(db, lines)
    renamed = [dict(r, name="Northwind Analytics Inc.") if r.get("id") == "cus_8f3aQz" else r for r in lines]
    # in_zx_1 loses its tax line and the header says so: one invoice changed, by its lines alone
    for record in renamed:
        if record.get("id") == "in_zx_1":
            record["lines"] = record["lines"][:1]
            record["tax"], record["total"] = "0.00", "49.00"
    report = await load(db, renamed)
    assert report.counts["customer"] == {"added": 0, "changed": 1, "unchanged": 3}
    assert report.counts["invoice"] == {"added": 0, "changed": 1, "unchanged": 9}
    async with db.connect() as conn:
        lines_left = (
            await conn.execute(text("SELECT id FROM invoice_lines WHERE invoice_id = 'in_zx_1'"))
        ).all()
        name = (await conn.execute(text("SELECT name FROM customers WHERE id = 'cus_8f3aQz'"))).scalar_one()
    assert [r.id for r in lines_left] == ["il_zx_a"]
    assert name == "Northwind Analytics Inc."


async def test_text_and_instants_arrive_as_written_whatever_copy_makes_of_their_characters(
    db: AsyncEngine,
) -> None:
    """Rows go to staging as COPY text built from the checked strings: a tab, newline, carriage return or
    backslash in a value (or a value reading \\N, COPY's null) must arrive as written, and an instant in
    another ISO 8601 form as the instant it names."""
    awkward = "Tab\there, line\nbreak, return\r, back\\slash and \\N"
    lines = fixture_lines()
    for record in lines:
        if record.get("id") == "cus_8f3aQz":
            record["name"] = awkward
        elif record.get("id") == "py_7Kd2":
            record["gateway_ref"] = "\\N"
            record["attempted_at"] = "20260701T153000.25+0530"  # basic format: not the plain form
        elif record.get("id") == "py_8Lm4":
            record["attempted_at"] = "2026-08-01T10:00:00Z"  # plain form: goes to COPY as written
    await load(db, lines)
    async with db.connect() as conn:
        name = (await conn.execute(text("SELECT name FROM customers WHERE id = 'cus_8f3aQz'"))).scalar_one()
        rows = await conn.execute(text("SELECT id, gateway_ref, attempted_at FROM payments"))
        payments = {row.id: (row.gateway_ref, row.attempted_at) for row in rows}
    assert name == awkward
    assert payments["py_7Kd2"] == ("\\N", datetime(2026, 7, 1, 10, 0, 0, 250000, tzinfo=UTC))
    assert payments["py_8Lm4"][1] == datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


async def test_a_dry_run_counts_and_writes_nothing(db: AsyncEngine) -> None:
    before = await snapshot(db)
    report = await load(db, fixture_lines(), dry_run=True)
    assert report.dry_run and report.counts["invoice"]["added"] == 10
    assert await snapshot(db) == before


def _set(line: int, **changes: Any) -> Callable[[list[Any]], list[Any]]:
    """Change fields of the record on this line (1-based; None removes the field)."""

    def edit(lines: list[Any]) -> list[Any]:
        record = dict(lines[line - 1])
        for name, value in changes.items():
            if value is None:
                record.pop(name, None)
            else:
                record[name] = value
        return [*lines[: line - 1], record, *lines[line:]]

    return edit


def _escaped(line: int, field: str, escapes: str) -> Callable[[list[Any]], list[Any]]:
    """Write `escapes` (JSON string escapes, as they stand in the file) into a text field of this line."""

    def edit(lines: list[Any]) -> list[Any]:
        raw = json.dumps(dict(lines[line - 1], **{field: "@@"})).replace('"@@"', f'"Zed{escapes}Corp"')
        return [*lines[: line - 1], raw, *lines[line:]]

    return edit


def _replace(line: int, raw: Any) -> Callable[[list[Any]], list[Any]]:
    return lambda lines: [*lines[: line - 1], raw, *lines[line:]]


def _append(raw: Any) -> Callable[[list[Any]], list[Any]]:
    return lambda lines: [*lines, raw]


def _line_of(lines: list[Any], record_id: str) -> int:
    return next(n for n, r in enumerate(lines, start=1) if isinstance(r, dict) and r.get("id") == record_id)


def _edit_invoice(invoice_id: str, edit: Callable[[Record], None]) -> Callable[[list[Any]], list[Any]]:
    def apply(lines: list[Any]) -> list[Any]:
        out = [json.loads(json.dumps(r)) for r in lines]
        edit(out[_line_of(out, invoice_id) - 1])
        return out

    return apply


def _jpy_invoice(record: Record) -> None:
    record["currency"] = "JPY"


def _header_total_wrong(record: Record) -> None:
    record["total"] = "50.48"


def _second_payment(lines: list[Any]) -> list[Any]:
    return [*lines, dict(lines[_line_of(lines, "py_zx") - 1], amount="1.00")]


# (what is wrong, how to make it so, the line it is on, the error after `PATH:LINE: `)
BAD = [
    ("not JSON", _replace(42, '{"type": "payment", "id": '), 42, "line: is not JSON (Expecting value)"),
    ("not an object", _replace(42, [1, 2]), 42, "type: a record must be a JSON object, not a list"),
    (
        "wrong format version",
        _set(1, version="billsleuth-ledger/3"),
        1,
        "version: 'billsleuth-ledger/3' is not 'billsleuth-ledger/1' or 'billsleuth-ledger/2'",
    ),
    ("unknown record type", _set(42, type="charge"), 42, "type: 'charge' is not a record type (plan, "),
    ("record type not text", _set(42, type=["payment"]), 42, "type: a list is not a record type (plan, "),
    ("missing field", _set(8, name=None), 8, "name: missing"),
    ("a NUL character in text", _escaped(8, "name", "\\u0000"), 8, "name: holds a NUL character (\\u0000)"),
    ("a lone surrogate in text", _escaped(8, "name", "\\ud800"), 8, "name: holds a lone surrogate (\\ud800)"),
    ("unknown field", _set(8, vat_id="DE123"), 8, "vat_id: is not a field of a customer record"),
    ("money as a JSON number", _set(42, amount=50.47), 42, "amount: 50.47 is a JSON number; write an amount"),
    ("money not a number", _set(42, amount="fifty"), 42, "amount: 'fifty' is not an amount"),
    ("wrong decimals for the currency", _set(42, amount="50.5"), 42, "amount: written with 1 decimals; USD "),
    (
        "cents on a yen invoice",
        _edit_invoice("in_zx_1", _jpy_invoice),
        30,
        "lines[0].unit_amount: '49.00' must have 0 decimals for JPY",
    ),
    (
        "bad date",
        _set(12, start_date="2026-13-01"),
        12,
        "start_date: '2026-13-01' is not a date (YYYY-MM-DD)",
    ),
    ("instant without an offset", _set(16, effective_at="2026-07-01T09:00:00"), 16, "effective_at: "),
    ("not a currency code", _set(11, currency="usd"), 11, "currency: 'usd' is not an ISO 4217 currency code"),
    (
        "three-decimal currency",
        _set(11, currency="KWD"),
        11,
        "currency: KWD has 3 decimals; the ledger holds",
    ),
    ("country the rules do not know", _set(9, country="FR"), 9, "country: 'FR' is not a country the billing"),
    (
        "event type the rules do not know",
        _set(16, event_type="renew"),
        16,
        "event_type: 'renew' is not one of",
    ),
    (
        "create without a plan",
        _set(16, payload={"quantity": 3}),
        16,
        "payload.plan_id: missing (a create event",
    ),
    (
        "seats not a whole number",
        _set(12, quantity="3"),
        12,
        "quantity: must be a whole number, not a string",
    ),
    (
        "anchor day out of range",
        _set(12, billing_anchor_day=31),
        12,
        "billing_anchor_day: 31 is out of range",
    ),
    ("payment status unknown", _set(42, status="pending"), 42, "status: 'pending' is not one of succeeded"),
    ("plan interval unknown", _set(2, interval="week"), 2, "interval: 'week' is not one of month, year"),
    ("id padded with spaces", _set(42, id=" py_zx"), 42, "id: ' py_zx' has spaces around it"),
    (
        "header not the lines' sum",
        _edit_invoice("in_zx_1", _header_total_wrong),
        30,
        "total: 50.48 is not what",
    ),
    (
        "unknown customer",
        _set(12, customer_id="cus_nope"),
        12,
        "customer_id: no customer 'cus_nope' in the input",
    ),
    (
        "unknown plan in a payload",
        _set(16, payload={"plan_id": "gold", "quantity": 3}),
        16,
        "payload.plan_id: no",
    ),
    ("unknown invoice", _set(42, invoice_id="in_nope"), 42, "invoice_id: no invoice 'in_nope' in the input"),
    (
        "invoice in another currency",
        _set(30, currency="EUR"),
        30,
        "currency: EUR is not the currency of customer 'ZX-41' (USD)",
    ),
    (
        "subscription of another customer",
        _set(30, subscription_id="sub_Mx2"),
        30,
        "subscription_id: 'sub_Mx2'",
    ),
    ("id given twice", _second_payment, 44, "id: py_zx is given twice (first at ledger.jsonl:42)"),
    (
        "a BillSleuth note's id",
        _set(43, id="CN-0001"),
        43,
        "id: 'CN-0001' is a BillSleuth credit note; an imported",
    ),
    (
        "a second format line",
        _append({"type": "format", "version": "billsleuth-ledger/1"}),
        44,
        "type: a second",
    ),
]


@pytest.fixture(scope="module")
async def loaded(pg_server_url: str, migrated_template: str) -> AsyncIterator[AsyncEngine]:
    """One database for every bad input (a refused import changes nothing, so they can share it): the
    hand-written ledger, and one of BillSleuth's own notes, which no import may replace."""
    url = clone_database(pg_server_url, migrated_template, prefix="b")
    engine = create_engine(url)
    await load(engine, fixture_lines())
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO credit_notes (id, invoice_id, amount, reason, status, case_id) "
                "VALUES ('CN-0001', 'in_zx_1', 10.30, 'order_change', 'draft', 'CASE-0001')"
            )
        )
    yield engine
    await engine.dispose()
    drop_database(pg_server_url, database_name(url))


@pytest.mark.parametrize(("what", "spoil", "line", "error"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_record_gets_its_one_line_and_nothing_is_written(
    loaded: AsyncEngine, what: str, spoil: Callable[[list[Any]], list[Any]], line: int, error: str
) -> None:
    before = await snapshot(loaded)
    # The spoiled file also changes a good record: a refused import writes none of it.
    spoiled = [dict(r, name="Renamed") if r.get("id") == "ZX-41" else r for r in fixture_lines()]
    with pytest.raises(LedgerRejected) as rejected:
        await load(loaded, spoil(spoiled))
    assert rejected.value.count == 1, rejected.value.lines
    [message] = rejected.value.errors
    assert message.startswith(f"ledger.jsonl:{line}: {error}"), message
    assert "\n" not in message
    assert await snapshot(loaded) == before


async def test_an_empty_file_is_refused(db: AsyncEngine) -> None:
    with pytest.raises(LedgerRejected) as rejected:
        await load(db, [])
    assert rejected.value.errors == [
        'ledger.jsonl:1: type: the file is empty; its first line must be {"type": "format", "version": '
        '"billsleuth-ledger/2"}'
    ]


async def test_only_the_first_fifty_problems_are_shown_then_a_count(db: AsyncEngine) -> None:
    lines = fixture_lines()
    bad = [dict(lines[7], id=f"cus_{n}", country="FR") for n in range(70)]
    with pytest.raises(LedgerRejected) as rejected:
        await load(db, [*lines, *bad])
    assert rejected.value.count == 70
    assert len(rejected.value.errors) == MAX_ERRORS
    assert rejected.value.lines[-1] == "… and 20 more"
    assert rejected.value.errors[0].startswith("ledger.jsonl:44: country:")


def test_the_command_prints_each_bad_record_and_exits_2(db_url: str, tmp_path: Path) -> None:
    lines = fixture_lines()
    lines[8]["country"] = "FR"
    lines[41]["amount"] = 50.47
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in lines))
    done = billsleuth("ledger", "import", str(bad))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{bad}:9: country: 'FR' is not a country the billing rules know (CN, SG, DE, US)",
        f'{bad}:42: amount: 50.47 is a JSON number; write an amount as a string ("50.47")',
        "billsleuth: error: 2 bad record(s) in the input; nothing was written",
    ]
    missing = billsleuth("ledger", "import", str(tmp_path / "nowhere.jsonl"))
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        == f"billsleuth: error: {tmp_path / 'nowhere.jsonl'}: no such file or directory"
    )


def test_stdin_a_directory_and_json_counts(db_url: str, tmp_path: Path) -> None:
    lines = fixture_lines()
    header = lines[0]
    book = [header, *(r for r in lines[1:] if r["type"] in ("plan", "tax_rate"))]
    rest = [header, *(r for r in lines[1:] if r["type"] not in ("plan", "tax_rate"))]
    (tmp_path / "a_book.jsonl").write_text("".join(json.dumps(r) + "\n" for r in book))
    (tmp_path / "b_rest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rest))
    (tmp_path / "notes.txt").write_text("not a ledger file: left alone")
    dry = billsleuth("ledger", "import", str(tmp_path), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    counts = json.loads(dry.stdout)
    assert counts["dry_run"] is True
    assert [f["path"] for f in counts["files"]] == [
        str(tmp_path / "a_book.jsonl"),
        str(tmp_path / "b_rest.jsonl"),
    ]
    assert counts["counts"]["plan"] == {"added": 2, "changed": 0, "unchanged": 0}
    assert counts["counts"]["invoice"] == {"added": 10, "changed": 0, "unchanged": 0}
    done = billsleuth("ledger", "import", "-", "--json", stdin=FIXTURE.read_text())
    assert done.returncode == 0, done.stderr
    # The dry run wrote nothing: stdin's import adds everything.
    assert json.loads(done.stdout)["counts"]["invoice"] == {"added": 10, "changed": 0, "unchanged": 0}
    text_out = billsleuth("ledger", "import", str(FIXTURE))
    assert text_out.returncode == 0, text_out.stderr
    assert "invoice                    0 added        0 changed       10 unchanged" in text_out.stdout


def export_text(url: str, customers: list[str] | None = None, since: date | None = None) -> str:
    out = io.StringIO()
    with psycopg.connect(url) as conn:
        write(records(conn, customers, since), out)
    return out.getvalue()


def audit_findings(url: str) -> list[tuple[str, str, str, str]]:
    done = subprocess.run(
        [BILLSLEUTH, "audit", "--all", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": url},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    findings = json.loads(done.stdout)["findings"]
    return sorted((f["customer_id"], f["invoice_id"], f["root_cause"], f["overcharge"]) for f in findings)


async def test_export_then_import_gives_back_the_seeded_ledger_row_for_row(
    seeded_db: AsyncEngine, seeded_db_url: str, db: AsyncEngine, db_url: str
) -> None:
    exported = export_text(seeded_db_url)
    report = await import_ledger(db, [as_file([exported.rstrip("\n")], "export.jsonl")], actor="tester")
    assert report.counts["invoice"]["added"] > 500
    source, copy = await snapshot(seeded_db), await snapshot(db)
    for table in LEDGER_TABLES:
        assert copy[table] == source[table], table
    assert audit_findings(db_url) == audit_findings(seeded_db_url)
    assert export_text(db_url) == exported  # and out again, byte for byte


async def test_the_hand_written_ledger_round_trips_and_export_can_keep_to_customers(
    db: AsyncEngine, db_url: str, second_db_url: str
) -> None:
    await import_ledger(db, [fixture_file()], actor="tester")
    exported = export_text(db_url)
    copy = create_engine(second_db_url)
    try:
        await import_ledger(copy, [as_file([exported.rstrip("\n")], "export.jsonl")], actor="tester")
        assert await snapshot(copy) == await snapshot(db)
    finally:
        await copy.dispose()
    assert audit_findings(second_db_url) == audit_findings(db_url)
    one = [json.loads(line) for line in export_text(db_url, ["cus_B71x"]).splitlines()]
    assert one[0] == {"type": "format", "version": "billsleuth-ledger/2"}  # export writes the latest
    assert {r["customer_id"] for r in one if r["type"] in ("invoice", "subscription")} == {"cus_B71x"}
    assert {r["id"] for r in one if r["type"] == "customer"} == {"cus_B71x"}
    assert {r["type"] for r in one} >= {"plan", "tax_rate", "subscription_event", "payment"}
    assert all(r.get("source") == "acme-billing" for r in one[1:])
    since = [json.loads(line) for line in export_text(db_url, since=date(2026, 8, 15)).splitlines()]
    assert sorted(r["id"] for r in since if r["type"] == "invoice") == [
        "in_1Ab",
        "in_9Zk",
        "in_DE_0815",
        "in_sg_sep",
        "in_zx_1",
    ]


def test_input_files_reads_a_directory_by_name_and_refuses_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_text("")
    (tmp_path / "a.jsonl").write_text("")
    assert [f.name for f in input_files(str(tmp_path), sys.stdin.buffer)] == [
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "b.jsonl"),
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no \.jsonl files in this directory"):
        input_files(str(empty), sys.stdin.buffer)


async def test_notes_the_billing_system_issued_count_against_what_is_owed_not_against_our_daily_limit(
    db: AsyncEngine,
) -> None:
    from approvals.limits import issued_today, lock_invoice, owed_on_invoice

    lines = fixture_lines()
    now = datetime.now(UTC)
    note = dict(lines[42], issued_at=now.isoformat())
    await load(db, [*lines[:42], note])
    async with db.begin() as conn:
        await lock_invoice(conn, "in_sg_sep")
        owed = await owed_on_invoice(conn, "in_sg_sep", pending=["draft", "approved"])
        assert (owed.paid, owed.issued, owed.amount) == (Decimal("194.02"), Decimal("97.01"), Decimal("0.00"))
        assert await issued_today(conn, now, "SGD") == Decimal("0.00")


async def test_a_change_under_an_issued_note_is_kept_and_put_on_record_naming_it(db: AsyncEngine) -> None:
    lines = fixture_lines()
    await load(db, lines)
    async with db.begin() as conn:  # BillSleuth credited the wrong price on in_zx_1 already
        await conn.execute(
            text(
                "INSERT INTO credit_notes (id, invoice_id, amount, reason, status, case_id, issued_at) "
                "VALUES ('CN-0007', 'in_zx_1', 10.30, 'order_change', 'issued', 'CASE-0007', now())"
            )
        )
    # The billing system says the payment was 0.01 more: kept as the ledger's fact, and on record.
    changed = [dict(r, amount="50.48") if r.get("id") == "py_zx" else r for r in lines]
    dry = await load(db, changed, dry_run=True)
    assert [n["credit_note_id"] for n in dry.notes] == ["CN-0007"]
    report = await load(db, changed)
    assert report.counts["payment"] == {"added": 0, "changed": 1, "unchanged": 11}
    [note] = report.notes
    assert (note["credit_note_id"], note["status"], note["covered"]) == ("CN-0007", "issued", True)
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT action, entity_id, details FROM activity_log "
                    "WHERE action IN ('ledger.imported', 'ledger.changed_under_note') ORDER BY id"
                )
            )
        ).all()
        paid = (await conn.execute(text("SELECT amount FROM payments WHERE id = 'py_zx'"))).scalar_one()
        status = (
            await conn.execute(text("SELECT status FROM credit_notes WHERE id = 'CN-0007'"))
        ).scalar_one()
        outbox = (
            await conn.execute(text("SELECT count(*) FROM outbox WHERE change = 'ledger.changed'"))
        ).scalar_one()
    assert [(r.action, r.entity_id) for r in rows] == [
        ("ledger.imported", rows[0].entity_id),
        ("ledger.imported", report.sha256),
        ("ledger.changed_under_note", "CN-0007"),
    ]
    assert rows[2].details["invoice_id"] == "in_zx_1" and rows[2].details["sha256"] == report.sha256
    assert (paid, status, outbox) == (Decimal("50.48"), "issued", 0)  # issued stays issued; no card to redraw
    unchanged = await load(db, changed)
    assert unchanged.notes == []  # nothing changed under it this time


def test_reading_reports_progress_in_kilobytes_of_the_files_sizes(tmp_path: Path) -> None:
    from engine.ledger_load import PROGRESS_EVERY, decoded_lines

    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(json.dumps({"type": "plan", "id": f"p{n}", "pad": "x" * 200}) + "\n" for n in range(5000))
    )
    [source] = input_files(str(path), sys.stdin.buffer)
    seen: list[tuple[int, int]] = []
    lines = list(
        decoded_lines([source], [], hashlib.sha256(), lambda done, total: seen.append((done, total)))
    )
    assert len(lines) == 5000
    total = path.stat().st_size // 1024
    assert len(seen) == 5000 // PROGRESS_EVERY + 1 and seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen) and seen[0][0] < total
    piped = InputFile("<stdin>", lambda: path.open("rb"))  # no size: no bar
    seen.clear()
    list(decoded_lines([piped], [], hashlib.sha256(), lambda done, total: seen.append((done, total))))
    assert seen == []


def test_the_command_draws_its_bar_in_kilobytes_on_a_terminal_and_nothing_on_a_pipe(db_url: str) -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [BILLSLEUTH, "ledger", "import", str(FIXTURE), "--json"],
            stdout=subprocess.PIPE,
            stderr=follower,
            env=dict(os.environ),
            timeout=120,
            check=False,
        )
        os.set_blocking(leader, False)
        drawn = os.read(leader, 65536).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert done.returncode == 0
    assert json.loads(done.stdout)["counts"]["invoice"]["added"] == 10  # stdout stays the counts
    kilobytes = FIXTURE.stat().st_size // 1024
    assert f"import [{'#' * 24}]" in drawn and f"{kilobytes:,}/{kilobytes:,} kB  100%" in drawn, drawn
    piped = billsleuth("ledger", "import", str(FIXTURE))
    assert piped.returncode == 0 and piped.stderr == ""
