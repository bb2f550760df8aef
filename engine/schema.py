"""The database schema as SQLAlchemy Core tables (queries use these; migrations/ creates them).

Ledger tables keep seed 002's names and columns; seed 000 adds credit_note_requests and approvals.
Money is NUMERIC(12,2), dates DATE, instants TIMESTAMPTZ, payloads JSONB.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP

metadata = MetaData()


def Money(name: str, *args: object, **kwargs: object) -> Column:
    return Column(name, Numeric(12, 2, asdecimal=True), *args, **kwargs)  # type: ignore[arg-type]


def Instant(name: str, *args: object, **kwargs: object) -> Column:
    return Column(name, TIMESTAMP(timezone=True), *args, **kwargs)  # type: ignore[arg-type]


customers = Table(
    "customers",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("country", Text, nullable=False),
    Column("currency", Text, nullable=False),
    Column("tax_region", Text, nullable=False),
    Column("contact_email", Text),  # where the customer writes from (NULL for seed 002's ledgers)
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
)

plans = Table(
    "plans",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("interval", Text, nullable=False),
    Money("unit_price", nullable=False),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
)

coupons = Table(
    "coupons",
    metadata,
    Column("id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Money("value", nullable=False),
    Column("duration_months", Integer, nullable=False),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
    Column("duration", Text),  # once / repeating / forever; NULL: the first duration_months months (0015)
    Column("currency", Text),  # an amount-off coupon's currency, where the source names one (0015)
)

tax_rates = Table(
    "tax_rates",
    metadata,
    Column("code", Text, primary_key=True),
    Column("region", Text, nullable=False),
    Column("rate", Numeric(6, 4, asdecimal=True), nullable=False),
    Column("valid_from", Date, nullable=False),
    Column("valid_to", Date),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
    Column("inclusive", Boolean, nullable=False, server_default=false()),  # inside the price (0015)
)

subscriptions = Table(
    "subscriptions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("customer_id", Text, ForeignKey("customers.id"), nullable=False, index=True),
    Column("plan_id", Text, ForeignKey("plans.id"), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("status", Text, nullable=False),
    Column("start_date", Date, nullable=False),
    Column("current_period_start", Date, nullable=False),
    Column("current_period_end", Date, nullable=False),
    Column("billing_anchor_day", Integer, nullable=False),
    Column("coupon_id", Text, ForeignKey("coupons.id")),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
)

subscription_events = Table(
    "subscription_events",
    metadata,
    Column("id", Text, primary_key=True),
    Column("subscription_id", Text, ForeignKey("subscriptions.id"), nullable=False),
    Column("type", Text, nullable=False),
    Instant("effective_at", nullable=False),
    Column("payload", JSONB, nullable=False),
    Index("idx_events_sub", "subscription_id", "effective_at"),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
)

invoices = Table(
    "invoices",
    metadata,
    Column("id", Text, primary_key=True),
    Column("customer_id", Text, ForeignKey("customers.id"), nullable=False),
    # NULL: a one-off invoice, billing no subscription (migration 0015)
    Column("subscription_id", Text, ForeignKey("subscriptions.id")),
    Column("period_start", Date, nullable=False),
    Column("period_end", Date, nullable=False),
    Column("issued_at", Date, nullable=False),
    Column("status", Text, nullable=False),
    Money("subtotal", nullable=False),
    Money("discount", nullable=False),
    Money("tax", nullable=False),
    Money("total", nullable=False),
    Column("currency", Text, nullable=False),
    Index("idx_inv_customer", "customer_id", "period_start"),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
    Instant("created_at"),  # the billing system's own creation instant, where it gives one
    Instant("period_start_at"),  # the billing system's own period instants, where it gives them (0015)
    Instant("period_end_at"),
    # The part of `tax` inside the subtotal (inclusive tax lines): total = subtotal − discount + tax − it.
    Money("inclusive_tax", nullable=False, server_default="0"),
)

invoice_lines = Table(
    "invoice_lines",
    metadata,
    Column("id", Text, primary_key=True),
    Column("invoice_id", Text, ForeignKey("invoices.id"), nullable=False, index=True),
    Column("kind", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("quantity", Integer, nullable=False),
    Money("unit_amount", nullable=False),
    Money("amount", nullable=False),
    Column("period_start", Date),
    Column("period_end", Date),
    Column("tax_code", Text),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
    Column("line_no", Integer),  # its place on the invoice (1, 2, …)
    Column("inclusive", Boolean, nullable=False, server_default=false()),  # a tax inside the prices (0015)
    Instant("period_start_at"),  # the billing system's own period instants, where it gives them (0015)
    Instant("period_end_at"),
)

payments = Table(
    "payments",
    metadata,
    Column("id", Text, primary_key=True),
    Column("invoice_id", Text, ForeignKey("invoices.id"), nullable=False, index=True),
    Money("amount", nullable=False),
    Column("status", Text, nullable=False),
    Instant("attempted_at", nullable=False),
    Column("gateway_ref", Text, nullable=False),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
)

subscription_items = Table(
    "subscription_items",
    metadata,
    Column("id", Text, primary_key=True),
    Column("subscription_id", Text, ForeignKey("subscriptions.id"), nullable=False, index=True),
    Column("plan_id", Text, ForeignKey("plans.id"), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("item_no", Integer),  # its place on the subscription (1, 2, …)
    Column("source", Text),
)

# Money given back on a payment (migration 0015). One a billing system's credit note made names it and
# counts once, as the credit note; any other succeeded refund lowers what its payment brought in.
refunds = Table(
    "refunds",
    metadata,
    Column("id", Text, primary_key=True),
    Column("payment_id", Text, ForeignKey("payments.id"), nullable=False, index=True),
    Money("amount", nullable=False),
    Column("status", Text, nullable=False),
    Instant("created_at", nullable=False),
    Column("credit_note_id", Text),
    Column("source", Text),
)

# Where the last `billsleuth stripe sync` stopped, per kind of Stripe object (migration 0015).
stripe_sync = Table(
    "stripe_sync",
    metadata,
    Column("object", Text, primary_key=True),
    Column("synced_to", BigInteger, nullable=False),  # Stripe's `created`, unix seconds
    Instant("at", nullable=False, server_default=func.now()),
)

credit_notes = Table(
    "credit_notes",
    metadata,
    Column("id", Text, primary_key=True),
    Column("invoice_id", Text, ForeignKey("invoices.id"), nullable=False, index=True),
    Money("amount", nullable=False),
    Column("reason", Text, nullable=False),  # Stripe-like enum: duplicate, order_change, …
    Column("status", Text, nullable=False),
    # Added beyond seed 002: what an approver and the issuing step need.
    Column("root_cause", Text, nullable=False, server_default=""),
    Column("memo", Text, nullable=False, server_default=""),
    Column("case_id", Text),
    Column("args_hash", Text, nullable=False, server_default=""),
    Column("needed", Integer, nullable=False, server_default="1"),
    Instant("created_at", nullable=False, server_default=func.now()),
    Instant("expires_at"),
    Instant("decided_at"),
    Instant("issued_at"),
    Column("currency", Text),  # the invoice's; filled from it by a trigger when an insert leaves it out
    Column("cancelled_by", Text),
    Column("cancel_reason", Text),
    Instant("cancelled_at"),
    Column("source", Text),  # the `source` of the ledger file that wrote it (migration 0014)
    # Issued by the billing system itself and loaded by `ledger import`; never one of ours.
    Column("imported", Boolean, nullable=False, server_default=false()),
    # Issued in Stripe (migration 0016): the Stripe credit note issuing created, one per note at most; and
    # why the last try failed while the note waits, approved, for the next.
    Column("stripe_credit_note_id", Text, unique=True),
    Column("stripe_livemode", Boolean),
    Column("stripe_error", Text),
)

credit_note_requests = Table(
    "credit_note_requests",
    metadata,
    Column("idempotency_key", Text, primary_key=True),
    Column("case_id", Text, nullable=False, index=True),
    Column("credit_note_id", Text, ForeignKey("credit_notes.id"), nullable=False),
    Instant("created_at", nullable=False, server_default=func.now()),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("credit_note_id", Text, ForeignKey("credit_notes.id"), nullable=False, index=True),
    Column("approver", Text, nullable=False),
    Column("decision", Text, nullable=False),
    Column("comment", Text, nullable=False, server_default=""),
    Column("args_hash", Text, nullable=False, server_default=""),
    Instant("decided_at", nullable=False, server_default=func.now()),
    Column("source", Text),  # where the vote came from: slack:<team id> or cli:<os user> (NULL before 0005)
    UniqueConstraint("credit_note_id", "approver", name="approvals_one_vote_each"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Instant("at", nullable=False, server_default=func.now()),
    Column("case_id", Text, index=True),
    Column("actor", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("args", JSONB, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("result_digest", Text, nullable=False),
)

activity_log = Table(
    "activity_log",
    metadata,
    # id, prev_hash and hash are set by the database's BEFORE INSERT trigger (migration 0003): never set them.
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Instant("at", nullable=False, server_default=func.now()),
    Column("actor_type", Text, nullable=False),
    Column("actor_id", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("entity_type", Text, nullable=False),
    Column("entity_id", Text, nullable=False),
    Column("details", JSONB, nullable=False, server_default="{}"),
    Column("prev_hash", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Index("ix_activity_log_action_at", "action", "at"),
)

# The chain's one head row: appends lock it (serialising them) and move it to the row they add.
activity_log_head = Table(
    "activity_log_head",
    metadata,
    Column("one", Boolean, primary_key=True, server_default=true()),
    Column("last_id", BigInteger),
    Column("last_hash", Text, nullable=False),
)

cases = Table(
    "cases",
    metadata,
    Column("id", Text, primary_key=True),  # also the LangGraph thread_id
    Column("customer_id", Text),
    Column("question", Text, nullable=False),
    Column("requester", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("channel", Text),
    Column("thread_ts", Text),
    Column("message_ts", Text),
    Column("findings", JSONB),
    Column("reply", JSONB),
    Column("escalation_reason", Text),
    Instant("created_at", nullable=False, server_default=func.now()),
    Instant("updated_at", nullable=False, server_default=func.now()),
    Column("drawn_state", Text),  # the state its Slack message last showed (see bot/store.py)
    # cli:<os user> when opened from the CLI (under any --as); the clicker's Slack id for a linked case
    # opened on the requester's behalf; else NULL. Whoever it names may not decide the case's note.
    Column("opened_from", Text),
    Column("found_by", Text),  # how its customer was found: id | email | name | fuzzy name | chosen
    Column("linked_from", Text),  # the case whose card offered this one (`Open a case`); else NULL
)

# Each overcharge the sweep found, recorded the first time it was seen; posted_at/channel/ts once a digest
# listed it (never listed again); case_id once a case was opened from it (migration 0009).
sweep_findings = Table(
    "sweep_findings",
    metadata,
    Column("invoice_id", Text, primary_key=True),
    Money("overcharge", primary_key=True),
    Column("customer_id", Text, nullable=False),
    Column("root_cause", Text, nullable=False),
    Column("currency", Text, nullable=False),
    Instant("first_seen", nullable=False, server_default=func.now()),
    Instant("posted_at"),
    Column("channel", Text),
    Column("ts", Text),
    Column("case_id", Text),
)

# The policy in force (approvers, support, limits, CLI decisions): one row per setting, named by its
# environment variable, holding the value in its canonical text form (approvals.policy_store).
policy = Table(
    "policy",
    metadata,
    Column("name", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Instant("updated_at", nullable=False, server_default=func.now()),
)

# Policy changes (migration 0013): each proposal, its old and new values (only the variables it changes),
# and where it stands: `applied` at once (it narrows power, or nobody else could consent), `pending` until
# a current approver other than its proposer approves (`approved`) or rejects it in Slack, `superseded`
# when the policy moved on under it. `month`: a `budget raise` (that month's model-budget limit). The bot
# announces each status once (`announced`), and remembers the cards it posted (policy_change_messages).
policy_changes = Table(
    "policy_changes",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Instant("proposed_at", nullable=False, server_default=func.now()),
    Column("proposed_by", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("why", Text, nullable=False),
    Column("month", Text),
    Column("old_values", JSONB, nullable=False),
    Column("new_values", JSONB, nullable=False),
    Column("status", Text, nullable=False),
    Column("decided_by", Text),
    Column("decision_source", Text),
    Instant("decided_at"),
    Column("announced", Text),
    Index("ix_policy_changes_unannounced", "id", postgresql_where=text("announced IS DISTINCT FROM status")),
)

policy_change_messages = Table(
    "policy_change_messages",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("change_id", BigInteger, ForeignKey("policy_changes.id"), nullable=False),
    Column("recipient", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("ts", Text, nullable=False),
    Column("shows", Text, nullable=False),
    UniqueConstraint("change_id", "recipient", name="policy_change_messages_once"),
)

# Changes Slack must show, written by triggers in the changing transaction (migration 0006); the bot
# drains and deletes them (bot/flows/outbox.py).
outbox = Table(
    "outbox",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Instant("at", nullable=False, server_default=func.now()),
    Column("entity_type", Text, nullable=False),
    Column("entity_id", Text, nullable=False),
    Column("case_id", Text),
    Column("change", Text, nullable=False),
)

# What each approver (or the finance channel) was told of a note waiting for them (migration 0007).
approver_notices = Table(
    "approver_notices",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("credit_note_id", Text, ForeignKey("credit_notes.id"), nullable=False),
    Column("recipient", Text, nullable=False),
    Column("kind", Text, nullable=False),  # notice | reminder
    Column("channel", Text),
    Column("ts", Text),
    Column("shows", Text, nullable=False, server_default="waiting"),
    Instant("at", nullable=False, server_default=func.now()),
    UniqueConstraint("credit_note_id", "recipient", "kind", name="approver_notices_once"),
)

slack_events = Table(
    "slack_events",
    metadata,
    Column("event_id", Text, primary_key=True),
    Instant("received_at", nullable=False, server_default=func.now()),
    Column("case_id", Text),
)

dataset_info = Table(
    "dataset_info",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

# Model costs and the monthly model budget (migration 0010; agent/model/costs.py, agent/model/budget.py).
USD = Numeric(18, 6, asdecimal=True)

# One row per model response; the response id is the dedupe key. cost NULL: the model has no price.
cost_events = Table(
    "cost_events",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Instant("at", nullable=False, server_default=func.now()),
    Column("case_id", Text, index=True),
    Column("model", Text, nullable=False),
    Column("endpoint", Text, nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False, server_default="0"),
    Column("cost", USD),
    Column("response_id", Text, nullable=False),
    UniqueConstraint("response_id", name="cost_events_response_once"),
    Index("ix_cost_events_at", "at"),
)

# A month's budget ("YYYY-MM", UTC): a raised limit (NULL: the environment's), and the pause.
model_budget_months = Table(
    "model_budget_months",
    metadata,
    Column("month", Text, primary_key=True),
    Column("limit_usd", USD),
    Instant("paused_at"),
    Instant("updated_at", nullable=False, server_default=func.now()),
)

# The worst case still ahead of each model run under way.
model_reservations = Table(
    "model_reservations",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("month", Text, nullable=False, index=True),
    Column("case_id", Text),
    Column("amount", USD, nullable=False),
    Instant("at", nullable=False, server_default=func.now()),
)

# Each budget threshold crossed, once per month, threshold and limit; notified_at once finance was told.
budget_incidents = Table(
    "budget_incidents",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("month", Text, nullable=False),
    Column("threshold", Integer, nullable=False),
    Column("limit_usd", USD, nullable=False),
    Column("spent", USD, nullable=False),
    Instant("at", nullable=False, server_default=func.now()),
    Instant("notified_at"),
    UniqueConstraint("month", "threshold", "limit_usd", name="budget_incidents_once"),
)
