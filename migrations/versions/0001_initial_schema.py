"""The initial schema: seed 002's ledger, seed 000's approvals, audit and activity logs, cases.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

MONEY = sa.Numeric(12, 2)
TSTZ = TIMESTAMP(timezone=True)


def _in(column: str, *values: str) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "customers",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("country", sa.Text, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("tax_region", sa.Text, nullable=False),
    )
    op.create_table(
        "plans",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("interval", sa.Text, nullable=False),
        sa.Column("unit_price", MONEY, nullable=False),
        sa.CheckConstraint(_in("interval", "month", "year"), name="plans_interval"),
        sa.CheckConstraint("unit_price >= 0", name="plans_unit_price_nonnegative"),
    )
    op.create_table(
        "coupons",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("value", MONEY, nullable=False),
        sa.Column("duration_months", sa.Integer, nullable=False),
        sa.CheckConstraint(_in("kind", "percent", "amount"), name="coupons_kind"),
        sa.CheckConstraint("value > 0", name="coupons_value_positive"),
        sa.CheckConstraint("kind <> 'percent' OR value <= 100", name="coupons_percent_at_most_100"),
        sa.CheckConstraint("duration_months > 0", name="coupons_duration_positive"),
    )
    op.create_table(
        "tax_rates",
        sa.Column("code", sa.Text, primary_key=True),
        sa.Column("region", sa.Text, nullable=False),
        sa.Column("rate", sa.Numeric(6, 4), nullable=False),
        sa.Column("valid_from", sa.Date, nullable=False),
        sa.Column("valid_to", sa.Date),
        sa.CheckConstraint("rate >= 0 AND rate < 1", name="tax_rates_rate_fraction"),
        sa.CheckConstraint("valid_to IS NULL OR valid_to >= valid_from", name="tax_rates_window"),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("customer_id", sa.Text, sa.ForeignKey("customers.id"), nullable=False),
        sa.Column("plan_id", sa.Text, sa.ForeignKey("plans.id"), nullable=False),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("start_date", sa.Date, nullable=False),
        sa.Column("current_period_start", sa.Date, nullable=False),
        sa.Column("current_period_end", sa.Date, nullable=False),
        sa.Column("billing_anchor_day", sa.Integer, nullable=False),
        sa.Column("coupon_id", sa.Text, sa.ForeignKey("coupons.id")),
        sa.CheckConstraint("quantity > 0", name="subscriptions_quantity_positive"),
        sa.CheckConstraint(_in("status", "active", "canceled", "paused"), name="subscriptions_status"),
        sa.CheckConstraint("billing_anchor_day BETWEEN 1 AND 28", name="subscriptions_anchor_day"),
    )
    op.create_index("ix_subscriptions_customer_id", "subscriptions", ["customer_id"])
    op.create_table(
        "subscription_events",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("subscription_id", sa.Text, sa.ForeignKey("subscriptions.id"), nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("effective_at", TSTZ, nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.CheckConstraint(
            _in("type", "create", "upgrade", "downgrade", "quantity_change", "cancel", "pause", "resume"),
            name="subscription_events_type",
        ),
    )
    op.create_index("idx_events_sub", "subscription_events", ["subscription_id", "effective_at"])
    # No unique (subscription, period): real billing bugs issue two invoices for one period.
    op.create_table(
        "invoices",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("customer_id", sa.Text, sa.ForeignKey("customers.id"), nullable=False),
        sa.Column("subscription_id", sa.Text, sa.ForeignKey("subscriptions.id"), nullable=False),
        sa.Column("period_start", sa.Date, nullable=False),
        sa.Column("period_end", sa.Date, nullable=False),
        sa.Column("issued_at", sa.Date, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("subtotal", MONEY, nullable=False),
        sa.Column("discount", MONEY, nullable=False),
        sa.Column("tax", MONEY, nullable=False),
        sa.Column("total", MONEY, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.CheckConstraint(_in("status", "paid", "open", "void"), name="invoices_status"),
        sa.CheckConstraint("period_end > period_start", name="invoices_period"),
        sa.CheckConstraint("discount >= 0", name="invoices_discount_nonnegative"),
        sa.CheckConstraint("total = subtotal - discount + tax", name="invoices_header_adds_up"),
    )
    op.create_index("idx_inv_customer", "invoices", ["customer_id", "period_start"])
    op.create_table(
        "invoice_lines",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, sa.ForeignKey("invoices.id"), nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("unit_amount", MONEY, nullable=False),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("period_start", sa.Date),
        sa.Column("period_end", sa.Date),
        sa.Column("tax_code", sa.Text),
        sa.CheckConstraint(
            _in("kind", "recurring", "proration", "discount", "tax", "adjustment"), name="invoice_lines_kind"
        ),
    )
    op.create_index("ix_invoice_lines_invoice_id", "invoice_lines", ["invoice_id"])
    # Payments may exceed an invoice's total (a double charge is exactly that).
    op.create_table(
        "payments",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, sa.ForeignKey("invoices.id"), nullable=False),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempted_at", TSTZ, nullable=False),
        sa.Column("gateway_ref", sa.Text, nullable=False),
        sa.CheckConstraint("amount > 0", name="payments_amount_positive"),
        sa.CheckConstraint(_in("status", "succeeded", "failed", "refunded"), name="payments_status"),
    )
    op.create_index("ix_payments_invoice_id", "payments", ["invoice_id"])
    op.create_table(
        "credit_notes",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, sa.ForeignKey("invoices.id"), nullable=False),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("root_cause", sa.Text, nullable=False, server_default=""),
        sa.Column("memo", sa.Text, nullable=False, server_default=""),
        sa.Column("case_id", sa.Text),
        sa.Column("args_hash", sa.Text, nullable=False, server_default=""),
        sa.Column("needed", sa.Integer, nullable=False, server_default="1"),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TSTZ),
        sa.Column("decided_at", TSTZ),
        sa.Column("issued_at", TSTZ),
        sa.CheckConstraint("amount > 0", name="credit_notes_amount_positive"),
        sa.CheckConstraint(
            _in("status", "draft", "approved", "issued", "rejected", "expired"), name="credit_notes_status"
        ),
        sa.CheckConstraint("needed IN (1, 2)", name="credit_notes_needed"),
    )
    op.create_index("ix_credit_notes_invoice_id", "credit_notes", ["invoice_id"])
    op.execute("CREATE SEQUENCE credit_note_number")
    op.create_table(
        "credit_note_requests",
        sa.Column("idempotency_key", sa.Text, primary_key=True),
        sa.Column("case_id", sa.Text, nullable=False),
        sa.Column("credit_note_id", sa.Text, sa.ForeignKey("credit_notes.id"), nullable=False),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_credit_note_requests_case_id", "credit_note_requests", ["case_id"])
    op.create_table(
        "approvals",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("credit_note_id", sa.Text, sa.ForeignKey("credit_notes.id"), nullable=False),
        sa.Column("approver", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("comment", sa.Text, nullable=False, server_default=""),
        sa.Column("args_hash", sa.Text, nullable=False, server_default=""),
        sa.Column("decided_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint(_in("decision", "approve", "reject"), name="approvals_decision"),
        sa.CheckConstraint(
            "decision <> 'reject' OR btrim(comment) <> ''", name="approvals_reject_has_reason"
        ),
        sa.UniqueConstraint("credit_note_id", "approver", name="approvals_one_vote_each"),
    )
    op.create_index("ix_approvals_credit_note_id", "approvals", ["credit_note_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("case_id", sa.Text),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("args", JSONB, nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("result_digest", sa.Text, nullable=False),
    )
    op.create_index("ix_audit_log_case_id", "audit_log", ["case_id"])
    op.create_table(
        "activity_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("actor_type", sa.Text, nullable=False),
        sa.Column("actor_id", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("entity_type", sa.Text, nullable=False),
        sa.Column("entity_id", sa.Text, nullable=False),
        sa.Column("details", JSONB, nullable=False, server_default="{}"),
    )
    # Append-only, enforced by the database rather than by convention.
    op.execute(
        """
        CREATE FUNCTION activity_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'activity_log is append-only';
        END $$;
        CREATE TRIGGER activity_log_append_only BEFORE UPDATE OR DELETE ON activity_log
            FOR EACH ROW EXECUTE FUNCTION activity_log_is_append_only();
        """
    )
    op.create_table(
        "cases",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("customer_id", sa.Text),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("requester", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("channel", sa.Text),
        sa.Column("thread_ts", sa.Text),
        sa.Column("message_ts", sa.Text),
        sa.Column("findings", JSONB),
        sa.Column("reply", JSONB),
        sa.Column("escalation_reason", sa.Text),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint(
            _in(
                "status",
                "investigating",
                "needs_customer",
                "explained",
                "awaiting_approval",
                "issued",
                "rejected",
                "expired",
                "escalated",
            ),
            name="cases_status",
        ),
    )
    op.execute("CREATE SEQUENCE case_number")
    op.create_table(
        "slack_events",
        sa.Column("event_id", sa.Text, primary_key=True),
        sa.Column("received_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("case_id", sa.Text),
    )
    op.create_table(
        "dataset_info",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("dataset_info", "slack_events", "cases"):
        op.drop_table(table)
    op.execute("DROP SEQUENCE case_number")
    op.drop_table("activity_log")
    op.execute("DROP FUNCTION activity_log_is_append_only()")
    for table in ("audit_log", "approvals", "credit_note_requests"):
        op.drop_table(table)
    op.drop_table("credit_notes")
    op.execute("DROP SEQUENCE credit_note_number")
    for table in (
        "payments",
        "invoice_lines",
        "invoices",
        "subscription_events",
        "subscriptions",
        "tax_rates",
        "coupons",
        "plans",
        "customers",
    ):
        op.drop_table(table)
