"""Seeding the database: what goes in comes back out, the truth holds against the stored ledger, and a
ledger someone else wrote is not wiped without --force."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.limits import issued_today
from bot.cli import main as cli
from engine import schema as t
from engine.db import create_engine
from engine.diff import check_ledger
from engine.ledger import load_ledgers, load_price_book
from scenarios.dataset import generate
from scenarios.extra_kinds import SCENARIOS_PER_SEED
from scenarios.generator import AS_OF, DEFAULT_SCENARIOS_DIR, DEFAULT_SEED
from scenarios.seed import ForeignDatabaseError, ReseedRefused, seed_database
from scenarios.store import subscription_snapshot


async def test_seeded_ledger_round_trips_and_the_diff_finds_every_truth(seeded_db: AsyncEngine) -> None:
    scenarios = {s.ledger.customer.id: s for s in generate(DEFAULT_SEED)}
    async with seeded_db.connect() as conn:
        ledgers = await load_ledgers(conn)
        book = await load_price_book(conn)
    assert [ledger.customer.id for ledger in ledgers] == sorted(scenarios)
    for stored in ledgers:
        scenario = scenarios[stored.customer.id]
        memory = scenario.ledger
        assert stored.customer == memory.customer
        assert stored.subscriptions == [memory.subscription]
        assert stored.invoices == memory.invoices
        by_time = sorted(memory.payments, key=lambda p: (p.attempted_at, p.id))
        assert stored.payments == by_time
        checks = {c.invoice_id: c for c in check_ledger(stored, book, AS_OF)}
        target = checks[scenario.truth.invoice_ids[0]]
        assert target.overcharge == scenario.truth.overcharge, scenario.id


async def test_stored_headers_agree_with_their_lines(seeded_db: AsyncEngine) -> None:
    async with seeded_db.connect() as conn:
        mismatched = (
            await conn.execute(
                text(
                    "SELECT i.id FROM invoices i JOIN invoice_lines l ON l.invoice_id = i.id "
                    "GROUP BY i.id, i.total HAVING sum(l.amount) <> i.total"
                )
            )
        ).all()
        line_ids = (await conn.execute(select(t.invoice_lines.c.id).order_by(t.invoice_lines.c.id))).scalars()
        info = dict((await conn.execute(select(t.dataset_info.c.key, t.dataset_info.c.value))).all())
        counts = (
            await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM invoices), "
                    "(SELECT count(*) FROM plans)"
                )
            )
        ).one()
    assert mismatched == []
    assert "INV-0001-01-L1" in set(line_ids)
    assert info == {"seeded_by": "billsleuth", "seed": "7", "as_of": "2026-10-15"}
    assert counts == (SCENARIOS_PER_SEED, sum(len(s.ledger.invoices) for s in generate()), 5)


async def test_subscription_row_is_the_snapshot_after_every_event(seeded_db: AsyncEngine) -> None:
    scenarios = generate(DEFAULT_SEED)
    cancelled = next(s for s in scenarios if s.kind == "cancel_not_respected")
    upgraded = next(s for s in scenarios if s.kind == "upgrade_proration")
    async with seeded_db.connect() as conn:
        rows = {r.id: r for r in await conn.execute(select(t.subscriptions))}
    row = rows[cancelled.ledger.subscription.id]
    assert row.status == "canceled"
    # seed 002 takes the latest non-duplicate invoice as the current period, the extra one included
    assert row.current_period_start == cancelled.ledger.invoices[-1].period_start
    row = rows[upgraded.ledger.subscription.id]
    assert (row.plan_id, row.status) == ("business-m", "active")
    snapshot = subscription_snapshot(upgraded.ledger)
    assert (row.quantity, row.current_period_end) == (snapshot.quantity, snapshot.current_period_end)


def _scribble_case_data(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO cases (id, question, requester, status) VALUES ('K-1', 'q', 'U1', 'explained')"
        )
        conn.execute(
            "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
            "VALUES ('user', 'U1', 'opened', 'case', 'K-1')"
        )
        conn.execute(
            "INSERT INTO audit_log (case_id, actor, tool, args, ok, result_digest) "
            "VALUES ('K-1', 'agent', 'get_customer', '{}', true, 'x')"
        )
        conn.execute(
            "INSERT INTO credit_notes (id, invoice_id, amount, reason, status) "
            "VALUES ('CN-0001', 'INV-0001-05', 174.90, 'duplicate', 'draft')"
        )


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[arg-type]
    assert row is not None
    return int(row[0])


async def test_reseeding_our_own_database_replaces_everything(seeded_db_url: str, tmp_path: Path) -> None:
    _scribble_case_data(seeded_db_url)
    (tmp_path / "S999.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("keep me")
    result = await seed_database(seeded_db_url, 3, tmp_path)
    for table in ("cases", "audit_log", "credit_notes"):
        assert _count(seeded_db_url, table) == 0, table
    # The history stays: the scribbled row, then the reseed itself.
    assert _actions(seeded_db_url) == ["opened", "ledger.reseeded"]
    files = [f"S{i:03d}.json" for i in range(1, SCENARIOS_PER_SEED + 1)]
    assert sorted(p.name for p in tmp_path.glob("S*.json")) == files
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind
    first = json.loads((tmp_path / "S001.json").read_text(encoding="utf-8"))
    assert first == generate(3)[0].to_json()
    assert result.scenarios == SCENARIOS_PER_SEED and result.seed == 3
    assert len(result.files) == SCENARIOS_PER_SEED
    with psycopg.connect(seeded_db_url) as conn:
        assert conn.execute("SELECT value FROM dataset_info WHERE key = 'seed'").fetchone() == ("3",)


def _actions(url: str, *, database: bool = False) -> list[str]:
    """BillSleuth's own rows; with `database`, the database's account of each change (migration 0012)."""
    which = "=" if database else "<>"
    with psycopg.connect(url) as conn:
        query = f"SELECT action FROM activity_log WHERE actor_type {which} 'database' ORDER BY id"
        return [r[0] for r in conn.execute(query)]  # type: ignore[arg-type]


def _issue_a_note(url: str) -> None:
    """An issued credit note: money that left, recorded as such."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO credit_notes (id, invoice_id, amount, reason, status, issued_at) "
            "VALUES ('CN-0001', 'INV-0001-05', 174.90, 'duplicate', 'issued', now())"
        )
        conn.execute(
            "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id, details) "
            "VALUES ('system', 'billsleuth', 'credit_note.issued', 'credit_note', 'CN-0001', "
            '\'{"amount": "174.90"}\')'
        )


async def test_a_database_holding_an_issued_note_is_not_reseeded_without_force(
    seeded_db_url: str, tmp_path: Path
) -> None:
    _issue_a_note(seeded_db_url)
    with pytest.raises(ReseedRefused) as refused:
        await seed_database(seeded_db_url, 3, tmp_path)
    message = str(refused.value)
    assert "\n" not in message and "issued" in message and "CN-0001" in message and "--force" in message
    assert _count(seeded_db_url, "credit_notes") == 1  # untouched
    assert list(tmp_path.iterdir()) == []

    await seed_database(seeded_db_url, 3, tmp_path, force=True, actor="auditor-joe")
    assert _count(seeded_db_url, "credit_notes") == 0
    # The note left today: erasing its row must not hand the daily credit limit back.
    engine = create_engine(seeded_db_url)
    async with engine.connect() as conn:
        now = datetime.now(UTC)
        assert await issued_today(conn, now, "USD") == Decimal("174.90")
        assert await issued_today(conn, now + timedelta(days=1), "USD") == Decimal("0.00")
    await engine.dispose()
    assert _actions(seeded_db_url) == ["credit_note.issued", "ledger.reseeded"]
    with psycopg.connect(seeded_db_url) as conn:
        row = conn.execute(
            "SELECT actor_type, actor_id, entity_type, entity_id, details FROM activity_log "
            "WHERE action = 'ledger.reseeded'"
        ).fetchone()
    assert row is not None
    actor_type, actor_id, entity_type, entity_id, details = row
    assert (actor_type, actor_id, entity_type, entity_id) == ("user", "auditor-joe", "dataset", "3")
    assert details["seed"] == 3 and details["forced"] is True
    assert details["erased"]["credit_notes"] == 1 and details["erased"]["customers"] == SCENARIOS_PER_SEED
    assert details["erased_issued"] == [
        {
            "id": "CN-0001",
            "invoice_id": "INV-0001-05",
            "amount": "174.90",
            "currency": "USD",
            "issued_at": details["erased_issued"][0]["issued_at"],
        }
    ]


def test_cli_refuses_to_erase_an_issued_note_unless_forced(
    seeded_db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _issue_a_note(seeded_db_url)
    with pytest.raises(SystemExit) as exited:
        cli(["seed", "--scenarios", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("billsleuth: error: ") and "--force" in err and "\n" not in err
    assert _count(seeded_db_url, "credit_notes") == 1
    assert cli(["seed", "--scenarios", str(tmp_path), "--force"]) == 0
    assert _count(seeded_db_url, "credit_notes") == 0
    assert _actions(seeded_db_url) == ["credit_note.issued", "ledger.reseeded"]
    # The database's own account: the note inserted by hand, then erased with its table.
    assert _actions(seeded_db_url, database=True) == ["db.credit_note.status", "db.truncate"]
    capsys.readouterr()
    assert cli(["activity", "verify"]) == 0
    assert capsys.readouterr().out.strip() == "4 rows, chain intact"


def _foreign_ledger(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO customers VALUES ('ACME-1', 'Acme', 'US', 'USD', 'US')")


async def test_a_ledger_someone_else_wrote_is_refused_then_forced(db_url: str, tmp_path: Path) -> None:
    _foreign_ledger(db_url)
    with pytest.raises(ForeignDatabaseError) as refused:
        await seed_database(db_url, DEFAULT_SEED, tmp_path)
    assert "\n" not in str(refused.value) and "--force" in str(refused.value)
    assert _count(db_url, "customers") == 1  # untouched
    assert list(tmp_path.iterdir()) == []  # no files, no staging directory

    await seed_database(db_url, DEFAULT_SEED, tmp_path, force=True)
    with psycopg.connect(db_url) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM customers ORDER BY id")]
    assert ids == [f"C-{i:04d}" for i in range(1, SCENARIOS_PER_SEED + 1)]


def test_cli_seeds_an_empty_database_into_home(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BILLSLEUTH_HOME", str(tmp_path))
    assert cli(["seed"]) == 0
    out = capsys.readouterr().out.strip()
    assert "\n" not in out
    assert out.startswith(f"seeded {SCENARIOS_PER_SEED} scenarios (seed 7")
    assert (
        "cancel_not_respected 6" in out and "annual_renewal 5" in out and str(tmp_path / "scenarios") in out
    )
    assert "24 beyond one complaint (two_faults 4," in out
    default = DEFAULT_SCENARIOS_DIR
    for name in ("S001.json", "S100.json", f"S{SCENARIOS_PER_SEED}.json"):
        assert (tmp_path / "scenarios" / name).read_bytes() == (default / name).read_bytes()


def test_cli_refuses_a_foreign_ledger_unless_forced(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _foreign_ledger(db_url)
    with pytest.raises(SystemExit) as exited:
        cli(["seed", "--scenarios", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("billsleuth: error: ") and "--force" in err and "\n" not in err
    assert cli(["seed", "--seed", "42", "--scenarios", str(tmp_path), "--force"]) == 0
    assert "seed 42" in capsys.readouterr().out
    assert json.loads((tmp_path / "S001.json").read_text(encoding="utf-8")) == generate(42)[0].to_json()
