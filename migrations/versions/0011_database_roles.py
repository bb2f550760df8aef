"""Least-privilege database roles (issue 25 item 2): billsleuth_app and billsleuth_reader, grants, default
privileges, the activity chain's trigger function as SECURITY DEFINER.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
