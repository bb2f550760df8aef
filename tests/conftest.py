"""Shared fixtures: a real Postgres for every test that needs one."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.database import upgrade_all
from engine.db import create_engine, with_database
from tests.os_accounts import SECOND, THIRD, OsAccount, os_account_for
from tests.pg import (
    DatabaseSupply,
    Login,
    admin_execute,
    clone_database,
    create_login,
    database_name,
    disposable_data_parent,
    drop_database,
    drop_login,
    start_disposable_server,
)
from tests.scheduling import slowest_first, xdist_workers

MIGRATED_TEMPLATE = f"bs_migrated_{os.getpid()}"
SEEDED_TEMPLATE = f"bs_seeded_{os.getpid()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the slowest tests first, one share per worker (tests/scheduling.py): a
    minute-long test left to the end of a batch kept the run going after the other workers were done."""
    workers = xdist_workers()
    if workers > 1:
        items[:] = slowest_first(items, [item.nodeid for item in items], workers)


@pytest.fixture(autouse=True)
def _model_endpoints_forgotten() -> Iterator[None]:
    """Each test meets the model endpoints afresh. The investigator remembers, per process, the base URLs
    that refused max_completion_tokens; a test's stub on 127.0.0.1 can get the port an earlier test's stub
    had in the same worker, and then inherited its answer (a flake depending on the order of tests)."""
    yield
    investigator = sys.modules.get("agent.model.investigator")  # only if a test has loaded it
    if investigator is not None:
        investigator._KNOWS_ONLY_MAX_TOKENS.clear()


def fresh_database(
    server_url: str, template: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Clone `template` for one test, point DATABASE_URL at it, and drop it afterwards."""
    url = clone_database(server_url, template, prefix=prefix)
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
    drop_database(server_url, database_name(url))


def supplied_database(supply: DatabaseSupply, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh clone from `supply` for one test, DATABASE_URL pointing at it, given back afterwards."""
    url = supply.take()
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
    supply.give_back(url)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """The libpq URL of the session's Postgres server (its `postgres` database)."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield with_database(external, "postgres")
        return
    with tempfile.TemporaryDirectory(prefix="bs-pg-", dir=disposable_data_parent()) as pgdata:
        server = start_disposable_server(Path(pgdata))
        yield server.get_uri()
        server.cleanup()


@pytest.fixture(scope="session")
async def migrated_template(pg_server_url: str) -> AsyncIterator[str]:
    """A database exactly as `billsleuth db upgrade` leaves it (schema and graph checkpoint tables at
    head), used only as a template: tests point DATABASE_URL at copies, where commands only check."""
    admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{MIGRATED_TEMPLATE}" WITH (FORCE)')
    admin_execute(pg_server_url, f'CREATE DATABASE "{MIGRATED_TEMPLATE}"')
    await upgrade_all(with_database(pg_server_url, MIGRATED_TEMPLATE))
    yield MIGRATED_TEMPLATE
    drop_database(pg_server_url, MIGRATED_TEMPLATE)


@pytest.fixture(scope="session")
def migrated_clones(pg_server_url: str, migrated_template: str) -> Iterator[DatabaseSupply]:
    """Clones of the migrated template, made ahead (closed before the template is dropped)."""
    supply = DatabaseSupply(pg_server_url, migrated_template, "t")
    yield supply
    supply.close()


@pytest.fixture
def db_url(migrated_clones: DatabaseSupply, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh, migrated, empty database for this test; DATABASE_URL points at it."""
    yield from supplied_database(migrated_clones, monkeypatch)


@pytest.fixture
def empty_db_url(pg_server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    yield from fresh_database(pg_server_url, "template0", "e", monkeypatch)


@pytest.fixture
def second_db_url(pg_server_url: str, migrated_template: str) -> Iterator[str]:
    """Another empty, migrated database beside `db` (DATABASE_URL stays on `db`'s)."""
    url = clone_database(pg_server_url, migrated_template, prefix="r")
    yield url
    drop_database(pg_server_url, database_name(url))


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(db_url)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def seeded_template(
    pg_server_url: str, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A migrated database seeded with the default dataset (`billsleuth seed`), used only as a template."""
    from scenarios.generator import DEFAULT_SEED
    from scenarios.seed import seed_database

    admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{SEEDED_TEMPLATE}" WITH (FORCE)')
    admin_execute(pg_server_url, f'CREATE DATABASE "{SEEDED_TEMPLATE}" TEMPLATE "{migrated_template}"')
    url = with_database(pg_server_url, SEEDED_TEMPLATE)
    await seed_database(url, DEFAULT_SEED, tmp_path_factory.mktemp("seeded-scenarios"))
    yield SEEDED_TEMPLATE
    drop_database(pg_server_url, SEEDED_TEMPLATE)


@pytest.fixture(scope="session")
def seeded_clones(pg_server_url: str, seeded_template: str) -> Iterator[DatabaseSupply]:
    """Clones of the seeded template, made ahead (closed before the template is dropped)."""
    supply = DatabaseSupply(pg_server_url, seeded_template, "s")
    yield supply
    supply.close()


@pytest.fixture
def seeded_db_url(seeded_clones: DatabaseSupply, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh copy of the seeded default dataset for this test; DATABASE_URL points at it."""
    yield from supplied_database(seeded_clones, monkeypatch)


@pytest.fixture
async def seeded_db(seeded_db_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(seeded_db_url)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def second_os_account(pg_server_url: str) -> OsAccount:
    """A second person at the CLI: the real OS account bs_second, able to reach the test database."""
    return os_account_for(SECOND, pg_server_url)


@pytest.fixture(scope="session")
def third_os_account(pg_server_url: str) -> OsAccount:
    """A third person at the CLI: the real OS account bs_third."""
    return os_account_for(THIRD, pg_server_url)


@pytest.fixture(scope="session")
def app_login(pg_server_url: str, migrated_template: str) -> Iterator[Login]:
    """A login in billsleuth_app (the roles exist once `db upgrade` ran: migrated_template): the runtime
    as an operator sets it up. `app_login.url(db_url)` reaches a test's database as it."""
    login = create_login(pg_server_url, "billsleuth_app")
    yield login
    drop_login(pg_server_url, login)


@pytest.fixture(scope="session")
def reader_login(pg_server_url: str, migrated_template: str) -> Iterator[Login]:
    """A login in billsleuth_reader (what `billsleuth mcp` runs as); `reader_login.url(db_url)`."""
    login = create_login(pg_server_url, "billsleuth_reader")
    yield login
    drop_login(pg_server_url, login)
