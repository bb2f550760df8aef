"""Every note reaches an end, and currency is part of money.

- credit notes gain the status `cancelled` (an approved note that will never be issued), who cancelled it,
  why and when, and the invoice's currency (filled from the invoice when an insert leaves it out, so a
  ledger written with seed 002's columns alone still loads);
- cases gain the statuses `queued` (claimed, waiting for an investigation slot), `cancelled` and
  `revision_requested`, so the CHECK lists every status DESIGN.md §3 names.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TIMESTAMP

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TSTZ = TIMESTAMP(timezone=True)
NOTE_STATUSES = ("draft", "approved", "issued", "rejected", "expired")
CASE_STATUSES = (
    "investigating",
    "needs_customer",
    "explained",
    "awaiting_approval",
    "issued",
    "rejected",
    "expired",
    "escalated",
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint("credit_notes_status", "credit_notes", type_="check")
    op.create_check_constraint(
        "credit_notes_status", "credit_notes", _in("status", (*NOTE_STATUSES, "cancelled"))
    )
    op.add_column("credit_notes", sa.Column("currency", sa.Text))
    op.add_column("credit_notes", sa.Column("cancelled_by", sa.Text))
    op.add_column("credit_notes", sa.Column("cancel_reason", sa.Text))
    op.add_column("credit_notes", sa.Column("cancelled_at", TSTZ))
    op.execute(
        "UPDATE credit_notes AS n SET currency = i.currency FROM invoices AS i WHERE i.id = n.invoice_id"
    )
    # A note's currency is its invoice's: an insert that leaves it out gets it from there.
    op.execute(
        """
        CREATE FUNCTION credit_notes_take_invoice_currency() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.currency IS NULL THEN
                SELECT currency INTO NEW.currency FROM invoices WHERE id = NEW.invoice_id;
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER credit_notes_currency BEFORE INSERT ON credit_notes
            FOR EACH ROW EXECUTE FUNCTION credit_notes_take_invoice_currency();
        """
    )
    op.create_check_constraint(
        "credit_notes_cancel_has_reason",
        "credit_notes",
        "status <> 'cancelled' OR (btrim(coalesce(cancel_reason, '')) <> '' AND cancelled_by IS NOT NULL)",
    )
    op.drop_constraint("cases_status", "cases", type_="check")
    op.create_check_constraint(
        "cases_status", "cases", _in("status", (*CASE_STATUSES, "queued", "cancelled", "revision_requested"))
    )


def downgrade() -> None:
    op.drop_constraint("cases_status", "cases", type_="check")
    op.create_check_constraint("cases_status", "cases", _in("status", CASE_STATUSES))
    op.drop_constraint("credit_notes_cancel_has_reason", "credit_notes", type_="check")
    op.execute("DROP TRIGGER credit_notes_currency ON credit_notes")
    op.execute("DROP FUNCTION credit_notes_take_invoice_currency()")
    for column in ("cancelled_at", "cancel_reason", "cancelled_by", "currency"):
        op.drop_column("credit_notes", column)
    op.drop_constraint("credit_notes_status", "credit_notes", type_="check")
    op.create_check_constraint("credit_notes_status", "credit_notes", _in("status", NOTE_STATUSES))
