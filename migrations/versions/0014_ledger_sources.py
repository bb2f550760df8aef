"""A ledger from elsewhere (issue 28): where each ledger row came from, and what the interchange format
carries beyond seed 002's columns.

- `source` on every ledger table: the `source` of the `billsleuth-ledger/1` file that wrote the row
  (`stripe`, `acme-billing`); NULL for rows written without one.
- `invoices.created_at`: the instant the billing system created the invoice, where it says; it breaks a
  tie between two invoices of one period issued on the same day (the later one is the extra copy).
- `invoice_lines.line_no`: a line's place on its invoice. Seed 002's line ids end in `-L<n>` and the order
  was read from them; an imported line's id is the source's own, so the order is kept as a number.
  Existing rows get it from their ids.
- `credit_notes.imported`: a note the billing system issued itself, loaded by `ledger import`; BillSleuth's
  own notes are never overwritten by one (an import naming one of their ids is refused).

All nullable or defaulted: a ledger written with seed 002's columns alone still loads.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

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
    for table in LEDGER_TABLES:
        op.add_column(table, sa.Column("source", sa.Text))
    op.add_column("invoices", sa.Column("created_at", sa.TIMESTAMP(timezone=True)))
    op.add_column("invoice_lines", sa.Column("line_no", sa.Integer))
    op.execute(
        "UPDATE invoice_lines SET line_no = substring(id from '-L([0-9]{1,9})$')::integer "
        "WHERE id ~ '-L[0-9]{1,9}$'"
    )
    op.add_column(
        "credit_notes", sa.Column("imported", sa.Boolean, nullable=False, server_default=sa.false())
    )


def downgrade() -> None:
    op.drop_column("credit_notes", "imported")
    op.drop_column("invoice_lines", "line_no")
    op.drop_column("invoices", "created_at")
    for table in reversed(LEDGER_TABLES):
        op.drop_column(table, "source")
