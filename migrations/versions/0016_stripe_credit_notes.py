"""Issuing in Stripe (issue 29): a credit note remembers the Stripe credit note issuing created for it, and
why the last try to create it failed while it waits, approved, for the sweep's next try.

- `credit_notes.stripe_credit_note_id`: Stripe's id (`cn_…`); unique, so one of ours never names two.
- `credit_notes.stripe_livemode`: whether it is a live one, so its dashboard link opens the right mode.
- `credit_notes.stripe_error`: the last Stripe error, shown on the card; cleared when the note is issued.

Both nullable: a note issued on the ledger alone has neither. The table's grants cover the new columns.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("credit_notes", sa.Column("stripe_credit_note_id", sa.Text, unique=True))
    op.add_column("credit_notes", sa.Column("stripe_livemode", sa.Boolean))
    op.add_column("credit_notes", sa.Column("stripe_error", sa.Text))


def downgrade() -> None:
    op.drop_column("credit_notes", "stripe_error")
    op.drop_column("credit_notes", "stripe_livemode")
    op.drop_column("credit_notes", "stripe_credit_note_id")
