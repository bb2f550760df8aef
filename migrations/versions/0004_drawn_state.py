"""What Slack last showed of each case, so recovery can redraw the cards a stop left behind.

`cases.drawn_state` is the case's state (case status, note id, note status, approvals) as it was when its
message was last drawn; recovery redraws every case whose current state differs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("cases", sa.Column("drawn_state", sa.Text))


def downgrade() -> None:
    op.drop_column("cases", "drawn_state")
