"""Customers gain a contact email, so a complaint can be traced to its customer by the address in it; a case
records how its customer was found (`id`, `email`, `name`, `fuzzy name`, or chosen by a person).

Both nullable: a ledger written with seed 002's columns alone still loads. No index on the address: a
lookup scans the customers table, which takes a few milliseconds at ten thousand customers.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("customers", sa.Column("contact_email", sa.Text))
    op.add_column("cases", sa.Column("found_by", sa.Text))


def downgrade() -> None:
    op.drop_column("cases", "found_by")
    op.drop_column("customers", "contact_email")
