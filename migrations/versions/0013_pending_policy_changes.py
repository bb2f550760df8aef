"""Pending policy changes (issue 25 item 4): a change that widens power waits for a second approver.

`policy_changes`: every proposal to change the stored policy (from `policy apply`, a bot start, `budget
raise`), the old and new values of the variables it changes, and its status — `applied` at once (it
narrows power, or no current approver other than its proposer exists), `pending` until a current approver
other than the proposer approves (`approved`) or rejects it in Slack, `superseded` once the policy moved
on under it. `announced` is the last status the bot told Slack of; `policy_change_messages` the cards it
posted (one per recipient), so a decision redraws them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

STATUSES = "'pending', 'approved', 'rejected', 'applied', 'superseded'"


def upgrade() -> None:
    op.create_table(
        "policy_changes",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("proposed_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("proposed_by", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("month", sa.Text),
        sa.Column("old_values", JSONB, nullable=False),
        sa.Column("new_values", JSONB, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("decided_by", sa.Text),
        sa.Column("decision_source", sa.Text),
        sa.Column("decided_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("announced", sa.Text),
        sa.CheckConstraint(f"status IN ({STATUSES})", name="policy_changes_status"),
    )
    # The bot looks for changes Slack has not heard of yet, and `policy show` for pending ones.
    op.create_index(
        "ix_policy_changes_unannounced",
        "policy_changes",
        ["id"],
        postgresql_where=sa.text("announced IS DISTINCT FROM status"),
    )
    op.create_table(
        "policy_change_messages",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("change_id", sa.BigInteger, sa.ForeignKey("policy_changes.id"), nullable=False),
        sa.Column("recipient", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("ts", sa.Text, nullable=False),
        sa.Column("shows", sa.Text, nullable=False),
        sa.UniqueConstraint("change_id", "recipient", name="policy_change_messages_once"),
    )


def downgrade() -> None:
    op.drop_table("policy_change_messages")
    op.drop_index("ix_policy_changes_unannounced", table_name="policy_changes")
    op.drop_table("policy_changes")
