"""Alembic environment: Postgres only, one migration run at a time (advisory lock)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from engine import locks
from engine.db import owner_database_url, sqlalchemy_url
from engine.schema import metadata


def run_migrations_online() -> None:
    url = context.config.attributes.get("database_url") or owner_database_url()
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.connect() as connection:
        locks.session_lock_sync(connection, locks.MIGRATION)
        connection.commit()
        try:
            context.configure(connection=connection, target_metadata=metadata, transaction_per_migration=True)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            locks.session_unlock_sync(connection, locks.MIGRATION)
            connection.commit()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported: run `billsleuth db upgrade`")
run_migrations_online()
