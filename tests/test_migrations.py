from __future__ import annotations

import psycopg
import pytest

from engine import migrate

CHECKPOINTER_TABLES = {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"}


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {r[0] for r in rows} - {"alembic_version"}


def test_upgrade_from_empty_and_downgrade_back(empty_db_url: str) -> None:
    assert migrate.current_revision(empty_db_url) is None
    migrate.upgrade(empty_db_url)
    assert migrate.current_revision(empty_db_url) == migrate.head_revision()
    assert {"customers", "invoices", "credit_notes", "approvals", "audit_log", "activity_log"} <= tables(
        empty_db_url
    )
    migrate.downgrade(empty_db_url, "base")
    assert tables(empty_db_url) == set()
    migrate.upgrade(empty_db_url)
    assert "credit_note_requests" in tables(empty_db_url)


def test_schema_matches_the_orm_tables(db_url: str) -> None:
    """engine/schema.py (what queries use) and the migrations (what exists) must not drift apart."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, pool

    from engine.db import sqlalchemy_url
    from engine.schema import metadata

    def ours(name: str | None, type_: str, parent_names: dict[str, str | None]) -> bool:
        # The graph checkpointer's tables are its own (its setup() made them in `db upgrade`), not ours.
        table = name if type_ == "table" else parent_names.get("table_name")
        return table not in CHECKPOINTER_TABLES

    engine = create_engine(sqlalchemy_url(db_url), poolclass=pool.NullPool)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"include_name": ours}), metadata)
    engine.dispose()
    assert diff == []


def test_money_columns_refuse_bad_values(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO customers VALUES ('C-1', 'n', 'CN', 'USD', 'CN')")
        conn.execute("INSERT INTO plans VALUES ('p', 'P', 'month', '10.00')")
        conn.execute(
            "INSERT INTO subscriptions VALUES "
            "('SUB-1', 'C-1', 'p', 1, 'active', '2026-01-01', '2026-01-01', '2026-02-01', 1, NULL)"
        )
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO invoices VALUES ('INV-1', 'C-1', 'SUB-1', '2026-01-01', '2026-02-01', "
                "'2026-01-01', 'paid', '10.00', '0.00', '0.60', '99.99', 'USD')"
            )


def test_activity_log_is_append_only(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
            "VALUES ('user', 'U1', 'test', 'case', 'K-1')"
        )
        with pytest.raises(psycopg.errors.RaiseException):
            conn.execute("DELETE FROM activity_log")
