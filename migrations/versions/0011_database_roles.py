"""Least-privilege database roles (issue 25 item 2): billsleuth_app and billsleuth_reader, grants, default
privileges, the activity chain's trigger function as SECURITY DEFINER.

Run by the schema owner (`billsleuth db upgrade`), which owns every table and so keeps TRUNCATE, ALTER,
DROP and DISABLE TRIGGER to itself: those are an owner's rights and cannot be granted. Operators give a
login the runtime's rights with `GRANT billsleuth_app TO <login>` (the MCP server's with
`billsleuth_reader`).

- billsleuth_app: reads and writes the rows of every table, except the history: `activity_log` is
  SELECT and INSERT only, and each INSERT goes through the chain trigger, which now runs as the owner
  (SECURITY DEFINER, search_path pinned so the caller cannot slip in its own `activity_log_head`), so the
  role appends without being able to write the chain's head or draw its ids. `alembic_version` is
  read-only (every command checks it). Default privileges give it the same on the tables and sequences
  later migrations create; agent.database grants the graph checkpointer's tables after its setup.
- billsleuth_reader: what `billsleuth mcp` needs, the ledger and the price book (SELECT) and the tool
  audit (INSERT on `audit_log`), and nothing a later migration adds unless that migration says so.

The roles are NOLOGIN groups and cluster-wide, so they are created only when missing (another database on
the server, or a DBA, may have made them) and the downgrade leaves them, revoking what this database gave.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

APP = "billsleuth_app"
READER = "billsleuth_reader"
DML = "SELECT, INSERT, UPDATE, DELETE"
# The ledger and the price book: what the read-only tools (and so `billsleuth mcp`) read.
LEDGER_TABLES = (
    "customers",
    "plans",
    "coupons",
    "tax_rates",
    "subscriptions",
    "subscription_events",
    "invoices",
    "invoice_lines",
    "payments",
    "credit_notes",
)


def upgrade() -> None:
    for role in (APP, READER):
        _create_group_role(role)
    schema = _schema()
    op.execute(f"GRANT USAGE ON SCHEMA {schema} TO {APP}, {READER}")
    op.execute(f"GRANT {DML} ON ALL TABLES IN SCHEMA {schema} TO {APP}")
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {APP}")
    # History and the schema's own version are not the runtime's to change.
    op.execute(f"REVOKE UPDATE, DELETE ON activity_log FROM {APP}")
    op.execute(f"REVOKE INSERT, UPDATE, DELETE ON activity_log_head, alembic_version FROM {APP}")
    op.execute(f"REVOKE ALL ON SEQUENCE activity_log_id_seq FROM {APP}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT {DML} ON TABLES TO {APP}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT USAGE, SELECT ON SEQUENCES TO {APP}")
    op.execute(f"GRANT SELECT ON {', '.join(LEDGER_TABLES)}, alembic_version TO {READER}")
    # The tool audit's INSERT … RETURNING id reads the new row's id, and only that column.
    op.execute(f"GRANT INSERT, SELECT (id) ON audit_log TO {READER}")
    op.execute(f"GRANT USAGE ON SEQUENCE {_sequence_of('audit_log')} TO {READER}")
    # The chain appends as the owner: the caller needs INSERT on activity_log and nothing else. The pinned
    # search_path keeps a caller's own schema (pg_temp included) from standing in for the head or the
    # hash function. Nobody may attach the function to a table of their own (CREATE TRIGGER needs
    # EXECUTE; firing it does not).
    op.execute(f"ALTER FUNCTION activity_log_chain() SECURITY DEFINER SET search_path = {schema}, pg_temp")
    op.execute("REVOKE EXECUTE ON FUNCTION activity_log_chain() FROM PUBLIC")


def downgrade() -> None:
    schema = _schema()
    op.execute("GRANT EXECUTE ON FUNCTION activity_log_chain() TO PUBLIC")
    op.execute("ALTER FUNCTION activity_log_chain() SECURITY INVOKER RESET search_path")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} REVOKE ALL ON SEQUENCES FROM {APP}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} REVOKE ALL ON TABLES FROM {APP}")
    for role in (APP, READER):
        op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}")
        op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}")
        op.execute(f"REVOKE USAGE ON SCHEMA {schema} FROM {role}")


def _create_group_role(role: str) -> None:
    """CREATE ROLE … NOLOGIN unless it exists. Two databases of one server migrated at once (parallel
    test workers, two apps) can both find it missing: the loser's duplicate is not an error."""
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
                BEGIN
                    CREATE ROLE {role} NOLOGIN;
                EXCEPTION WHEN duplicate_object OR unique_violation THEN
                    NULL;
                END;
            END IF;
        END $$;
        """
    )


def _schema() -> str:
    """The schema the migrations create their tables in, quoted for SQL."""
    return str(op.get_bind().execute(text("SELECT quote_ident(current_schema())")).scalar_one())


def _sequence_of(table: str) -> str:
    """The identity sequence behind `table`.id."""
    return str(
        op.get_bind().execute(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table}).scalar_one()
    )
