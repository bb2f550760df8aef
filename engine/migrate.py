"""Schema upgrades through Alembic (the only way the schema changes). Commands upgrade when behind."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool

from engine.db import sqlalchemy_url


def alembic_config(libpq_url: str) -> Config:
    """Built in code, no alembic.ini: the script directory is the installed `migrations` package, found
    the same from a checkout, an editable install or a wheel, whatever the working directory."""
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    config.attributes["database_url"] = libpq_url
    return config


def current_revision(libpq_url: str) -> str | None:
    engine = create_engine(sqlalchemy_url(libpq_url), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    assert head is not None, "no migrations found"
    return head


def upgrade(libpq_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(libpq_url), revision)


def downgrade(libpq_url: str, revision: str) -> None:
    command.downgrade(alembic_config(libpq_url), revision)


def ensure_current(libpq_url: str) -> bool:
    """Upgrade when the schema is behind; returns True when it ran migrations."""
    if current_revision(libpq_url) == head_revision():
        return False
    upgrade(libpq_url)
    return True
