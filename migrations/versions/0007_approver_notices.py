"""Approver notices: the message each approver (or the finance channel) got about a note waiting for them.

One row per note, recipient and kind (`notice` when the note starts waiting, `reminder` at half its
approval time), claimed before the message is posted so each goes out once whichever bot process sends
it; `channel` and `ts` say where it landed, so it can be updated to say who decided; `shows` is what the
message last said.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approver_notices",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("credit_note_id", sa.Text, sa.ForeignKey("credit_notes.id"), nullable=False),
        sa.Column("recipient", sa.Text, nullable=False),  # a Slack user id, or the finance channel's id
        sa.Column("kind", sa.Text, nullable=False),  # notice | reminder
        sa.Column("channel", sa.Text),  # where it was posted (a DM's D… id); NULL until it was
        sa.Column("ts", sa.Text),
        sa.Column("shows", sa.Text, nullable=False, server_default="waiting"),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("credit_note_id", "recipient", "kind", name="approver_notices_once"),
    )


def downgrade() -> None:
    op.drop_table("approver_notices")
