"""One stored policy per database, and where every vote and CLI-opened case came from.

`policy` holds the policy in force (one row per setting, named by its environment variable, value in its
canonical text form); every process enforces it, whatever its own environment says. `approvals.source` is
`slack:<team id>` or `cli:<os user>`; `cases.opened_from` is `cli:<os user>` for a case opened from the CLI,
so that OS user cannot approve it under any `--as`.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "policy",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.add_column("approvals", sa.Column("source", sa.Text))
    op.add_column("cases", sa.Column("opened_from", sa.Text))


def downgrade() -> None:
    op.drop_column("cases", "opened_from")
    op.drop_column("approvals", "source")
    op.drop_table("policy")
