"""`billsleuth-ledger/2` (issue 29 item 1): what a Stripe account's ledger holds that version 1 cannot.

- `subscription_items`: a subscription's several prices, each with its quantity (a subscription's own
  plan_id and quantity stay its first item, so the rules read it as before).
- `invoices.subscription_id` nullable: a one-off invoice bills no subscription (the rules do not judge it).
- `refunds`: money given back on a payment. One a billing system's credit note made (`credit_note_id`)
  is counted once, as the credit note; any other succeeded refund lowers what the payment brought in.
- `tax_rates.inclusive`, `invoice_lines.inclusive`: a tax already inside the prices it applies to (an
  inclusive tax line does not add to the invoice's total), and `invoices.inclusive_tax`, the part of the
  header's `tax` that is inside its subtotal: total = subtotal − discount + tax − inclusive_tax.
- `coupons.duration` (`once`, `repeating`, `forever`; NULL: version 1's first `duration_months` months) and
  `coupons.currency` (what an amount-off coupon's value is in); a forever coupon's duration_months is 0.
- `period_start_at` / `period_end_at` on invoices and their lines: the billing system's own instants, beside
  the dates the rules read.
- `stripe_sync`: where the last `billsleuth stripe sync` stopped, per kind of Stripe object.

All new columns nullable or defaulted: a version 1 ledger loads and audits as before.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

READER = "billsleuth_reader"


def upgrade() -> None:
    op.create_table(
        "subscription_items",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("subscription_id", sa.Text, sa.ForeignKey("subscriptions.id"), nullable=False, index=True),
        sa.Column("plan_id", sa.Text, sa.ForeignKey("plans.id"), nullable=False),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("item_no", sa.Integer),
        sa.Column("source", sa.Text),
    )
    op.create_table(
        "refunds",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("payment_id", sa.Text, sa.ForeignKey("payments.id"), nullable=False, index=True),
        sa.Column("amount", sa.Numeric(12, 2), nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("credit_note_id", sa.Text),
        sa.Column("source", sa.Text),
    )
    op.alter_column("invoices", "subscription_id", nullable=True)
    op.add_column("tax_rates", sa.Column("inclusive", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column(
        "invoice_lines", sa.Column("inclusive", sa.Boolean, nullable=False, server_default=sa.false())
    )
    op.add_column(
        "invoices", sa.Column("inclusive_tax", sa.Numeric(12, 2), nullable=False, server_default="0")
    )
    op.drop_constraint("invoices_header_adds_up", "invoices", type_="check")
    op.create_check_constraint(
        "invoices_header_adds_up", "invoices", "total = subtotal - discount + tax - inclusive_tax"
    )
    op.add_column("coupons", sa.Column("duration", sa.Text))
    op.add_column("coupons", sa.Column("currency", sa.Text))
    # A forever coupon counts no months (its duration_months is 0); any other counts at least one.
    op.drop_constraint("coupons_duration_positive", "coupons", type_="check")
    op.create_check_constraint(
        "coupons_duration_positive", "coupons", "duration_months > 0 OR duration = 'forever'"
    )
    for table in ("invoices", "invoice_lines"):
        op.add_column(table, sa.Column("period_start_at", sa.TIMESTAMP(timezone=True)))
        op.add_column(table, sa.Column("period_end_at", sa.TIMESTAMP(timezone=True)))
    op.create_table(
        "stripe_sync",
        sa.Column("object", sa.Text, primary_key=True),
        sa.Column("synced_to", sa.BigInteger, nullable=False),  # Stripe's `created`, unix seconds
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    # The app role's rights come from 0011's default privileges; the reader reads the ledger.
    op.execute(f"GRANT SELECT ON subscription_items, refunds TO {READER}")


def downgrade() -> None:
    op.drop_table("stripe_sync")
    for table in ("invoice_lines", "invoices"):
        op.drop_column(table, "period_end_at")
        op.drop_column(table, "period_start_at")
    op.execute("UPDATE coupons SET duration_months = 1200 WHERE duration = 'forever'")  # a century
    op.drop_constraint("coupons_duration_positive", "coupons", type_="check")
    op.create_check_constraint("coupons_duration_positive", "coupons", "duration_months > 0")
    op.drop_column("coupons", "currency")
    op.drop_column("coupons", "duration")
    op.drop_column("invoice_lines", "inclusive")
    op.drop_constraint("invoices_header_adds_up", "invoices", type_="check")
    op.drop_column("invoices", "inclusive_tax")  # (an invoice with some would break the old check)
    op.create_check_constraint("invoices_header_adds_up", "invoices", "total = subtotal - discount + tax")
    op.drop_column("tax_rates", "inclusive")
    op.execute("DELETE FROM invoices WHERE subscription_id IS NULL")
    op.alter_column("invoices", "subscription_id", nullable=False)
    op.drop_table("refunds")
    op.drop_table("subscription_items")
