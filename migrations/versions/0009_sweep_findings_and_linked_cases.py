"""Sweep findings, and cases linked to the case or digest that offered them.

`sweep_findings`: each overcharge the daily sweep found, keyed by invoice and amount, recorded the first
time it is seen (`first_seen`). `posted_at`, `channel` and `ts` say which digest listed it, so a digest
never lists it again; `case_id` is the case opened from its `Open case` button.

`cases.linked_from`: the case whose card offered this one (`Open a case` on another overpaid invoice of
the same account). NULL for a case opened from a mention, the CLI or a digest.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweep_findings",
        sa.Column("invoice_id", sa.Text, nullable=False),
        sa.Column("overcharge", sa.Numeric(12, 2), nullable=False),
        sa.Column("customer_id", sa.Text, nullable=False),
        sa.Column("root_cause", sa.Text, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("first_seen", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("posted_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("channel", sa.Text),
        sa.Column("ts", sa.Text),
        sa.Column("case_id", sa.Text),
        sa.PrimaryKeyConstraint("invoice_id", "overcharge", name="sweep_findings_pkey"),
    )
    op.add_column("cases", sa.Column("linked_from", sa.Text))


def downgrade() -> None:
    op.drop_column("cases", "linked_from")
    op.drop_table("sweep_findings")
