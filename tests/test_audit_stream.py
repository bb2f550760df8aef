"""The streamed sweep (`audit --all`, `sweep`): the same ledgers and findings as the one-customer path, a
progress bar only on a terminal, and a start-up without the graph, the model client or SQLAlchemy."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import psycopg

from agent.auditor.run import audit_all
from bot.cli.common import dumps
from bot.cli.progress import ProgressBar, progress_bar, render
from engine.db import create_engine
from engine.ledger import full_ledgers, load_ledgers
from engine.ledger_stream import customer_ids, screen_batches

BILLSLEUTH = str(Path(sys.executable).with_name("billsleuth"))


# ---------- the bar, as a pure function ----------


def test_the_bar_shows_the_count_the_rate_and_the_time_left() -> None:
    line = render("audit", 1_000, 4_000, 2.0)
    assert line.startswith("audit [######------------------]")
    assert "1,000/4,000 customers" in line
    assert "25%" in line
    assert "500 customers/s" in line
    assert line.endswith("ETA 6 s")


def test_the_finished_bar_says_how_long_it_took() -> None:
    line = render("sweep", 4_000, 4_000, 125.0)
    assert "100%" in line and line.endswith("done in 2 min 05 s")
    assert render("audit", 0, 0, 0.0).endswith("done in 0 s")  # an empty ledger: no division by zero
    assert render("audit", 0, 10, 0.0).endswith("ETA --")


def test_the_bar_redraws_in_place_at_most_ten_times_a_second_and_always_at_the_end() -> None:
    now = [0.0]
    out = io.StringIO()
    bar = ProgressBar("audit", out, clock=lambda: now[0])
    for done in (100, 200, 300):
        now[0] += 0.01
        bar(done, 1_000)
    now[0] += 0.5
    bar(1_000, 1_000)
    bar.close()
    drawn = out.getvalue()
    assert drawn.count("\r") == 2  # the first call and the last; the two in between came too soon
    assert "100/1,000" in drawn and "1,000/1,000" in drawn and drawn.endswith("\n")


def test_no_bar_unless_stderr_is_a_terminal() -> None:
    assert progress_bar("audit", io.StringIO()) is None
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            assert isinstance(progress_bar("audit", terminal), ProgressBar)
    finally:
        os.close(leader)
        os.close(follower)


# ---------- the command, on a terminal and not ----------


def _audit_all(env: dict[str, str], stderr_on_a_terminal: bool) -> tuple[str, str]:
    """`billsleuth audit --all --json`: stdout, and what reached stderr (a pty or a pipe)."""
    if not stderr_on_a_terminal:
        done = subprocess.run(
            [BILLSLEUTH, "audit", "--all", "--json"], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [BILLSLEUTH, "audit", "--all", "--json"], stdout=subprocess.PIPE, stderr=follower, env=env
        )
        os.close(follower)
        stdout, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    return stdout.decode(), b"".join(chunks).decode()


def test_the_bar_appears_on_a_terminal_only_and_the_json_is_the_same(seeded_db_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": seeded_db_url}
    piped_out, piped_err = _audit_all(env, stderr_on_a_terminal=False)
    tty_out, tty_err = _audit_all(env, stderr_on_a_terminal=True)
    assert piped_err == ""
    assert "customers/s" in tty_err and "done in" in tty_err
    assert tty_out == piped_out
    assert json.loads(piped_out)["findings"]


# ---------- the same ledgers, the same findings ----------


def test_streamed_ledgers_are_the_ones_engine_ledger_loads(seeded_db_url: str) -> None:
    async def by_sqlalchemy() -> list:
        engine = create_engine(seeded_db_url)
        try:
            async with engine.connect() as conn:
                return await load_ledgers(conn)
        finally:
            await engine.dispose()

    expected = asyncio.run(by_sqlalchemy())
    with psycopg.connect(seeded_db_url) as conn:
        ids = customer_ids(conn)
        assert full_ledgers(conn, ids) == expected
        screened = [ledger for batch in screen_batches(conn, 7) for ledger in batch]
    assert [s.customer for s in screened] == [e.customer for e in expected]
    for screen, whole in zip(screened, expected, strict=True):
        assert screen.subscriptions == whole.subscriptions
        assert [(i.id, i.period_start) for i in screen.invoices] == [
            (i.id, i.period_start) for i in whole.invoices
        ]


def test_a_range_of_customers_streams_only_that_range(seeded_db_url: str) -> None:
    with psycopg.connect(seeded_db_url) as conn:
        ids = customer_ids(conn)
        part = [ledger.customer.id for batch in screen_batches(conn, 5, ids[3], ids[9]) for ledger in batch]
    assert part == ids[3:10]


def test_a_progress_callback_sees_every_customer(seeded_db_url: str) -> None:
    seen: list[tuple[int, int]] = []
    report = asyncio.run(audit_all(seeded_db_url, progress=lambda done, total: seen.append((done, total))))
    assert seen and seen[-1] == (report.customers, report.customers)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_audit_all_starts_without_the_graph_the_model_client_slack_or_sqlalchemy(
    seeded_db_url: str,
) -> None:
    probe = (
        "import sys; from bot.cli import main; code = main(sys.argv[1:]); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'langgraph', 'langchain_core', 'openai', "
        "'slack_sdk', 'slack_bolt', 'sqlalchemy', 'pydantic', 'alembic'}); "
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "audit", "--all", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": seeded_db_url},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "HEAVY="


def test_audit_all_json_is_the_whole_ledger_audited_in_memory(seeded_db_url: str) -> None:
    """Byte for byte what auditing every whole ledger (engine.ledger, no screen, no stream) prints."""
    from agent.auditor.audit import audit_customer
    from engine.ledger import load_price_book

    async def in_memory() -> dict:
        engine = create_engine(seeded_db_url)
        try:
            async with engine.connect() as conn:
                ledgers, book = await load_ledgers(conn), await load_price_book(conn)
                as_of = max(inv.issued_at for ledger in ledgers for inv in ledger.invoices)
        finally:
            await engine.dispose()
        findings = [f.as_json() for ledger in ledgers for f in audit_customer(ledger, book, as_of)]
        return {"as_of": as_of.isoformat(), "findings": findings}

    done = subprocess.run(
        [BILLSLEUTH, "audit", "--all", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": seeded_db_url},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == dumps(asyncio.run(in_memory())) + "\n"
