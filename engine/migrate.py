"""Schema upgrades through Alembic (the only way the schema changes), and where a database stands.

Who may upgrade is agent.database's rule; this module only knows Alembic."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Revision:
    """Where one part of a database's schema stands against what this code needs."""

    what: str  # "database schema", "graph checkpoint schema"
    current: str | None  # None: nothing there yet
    head: str
    newer: bool  # `current` is beyond anything this code knows: written by a later billsleuth

    @property
    def behind(self) -> bool:
        return not self.newer and self.current != self.head

    def describe(self) -> str:
        if self.newer:
            return f"{self.what} is at {self.current}, newer than this billsleuth knows ({self.head})"
        where = "empty" if self.current is None else f"at {self.current}"
        return f"{self.what} is {where}" + (f", this billsleuth needs {self.head}" if self.behind else "")

    def remedy(self) -> str:
        return "install the billsleuth that upgraded it" if self.newer else "run: billsleuth db upgrade"

    def problem(self) -> str | None:
        """One line saying what is wrong and what to run; None when current."""
        if self.newer or self.behind:
            return f"{self.describe()}; {self.remedy()}"
        return None


def schema_revision(libpq_url: str) -> Revision:
    current = current_revision(libpq_url)
    scripts = ScriptDirectory.from_config(alembic_config(libpq_url))
    known = {script.revision for script in scripts.walk_revisions()}
    return Revision("database schema", current, head_revision(), current is not None and current not in known)


def upgrade(libpq_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(libpq_url), revision)


def downgrade(libpq_url: str, revision: str) -> None:
    command.downgrade(alembic_config(libpq_url), revision)
