"""Model costs and the monthly model budget.

`cost_events`: one row per model response (the fact; spend is a sum over it). The response id is the
dedupe key: a replayed or re-recorded response is not counted twice. `cost` is NULL when the model has no
price (tokens still recorded).

`model_budget_months`: one row per calendar month (UTC, "YYYY-MM") once anything touched its budget:
`limit_usd` when someone raised it (NULL: BILLSLEUTH_MODEL_BUDGET), `paused_at` once spend reached the
limit (the model investigator stays paused, across restarts, until a raise lifts it). Its row is the lock
every reservation and cost event of that month takes.

`model_reservations`: the worst case still ahead of each model run under way, so concurrent runs cannot
all see "a little left"; deleted when the run ends.

`budget_incidents`: each threshold (80, 100 percent) crossed, once per month, threshold and limit;
`notified_at` once finance was told in Slack.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

USD = sa.Numeric(18, 6)


def upgrade() -> None:
    op.create_table(
        "cost_events",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("case_id", sa.Text),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("endpoint", sa.Text, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cost", USD),
        sa.Column("response_id", sa.Text, nullable=False),
        sa.UniqueConstraint("response_id", name="cost_events_response_once"),
    )
    op.create_index("ix_cost_events_at", "cost_events", ["at"])
    op.create_index("ix_cost_events_case_id", "cost_events", ["case_id"])
    op.create_table(
        "model_budget_months",
        sa.Column("month", sa.Text, primary_key=True),
        sa.Column("limit_usd", USD),
        sa.Column("paused_at", sa.TIMESTAMP(timezone=True)),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "model_reservations",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("month", sa.Text, nullable=False, index=True),
        sa.Column("case_id", sa.Text),
        sa.Column("amount", USD, nullable=False),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "budget_incidents",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("month", sa.Text, nullable=False),
        sa.Column("threshold", sa.Integer, nullable=False),
        sa.Column("limit_usd", USD, nullable=False),
        sa.Column("spent", USD, nullable=False),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("notified_at", sa.TIMESTAMP(timezone=True)),
        sa.UniqueConstraint("month", "threshold", "limit_usd", name="budget_incidents_once"),
    )


def downgrade() -> None:
    op.drop_table("budget_incidents")
    op.drop_table("model_reservations")
    op.drop_table("model_budget_months")
    op.drop_table("cost_events")
