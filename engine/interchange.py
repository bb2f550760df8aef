"""The ledger interchange format, `billsleuth-ledger/2` (DESIGN.md §3): its record types, their fields
and columns, and ledger rows written back out as records (ledger export, seed).

Version 2 is version 1 plus what a Stripe account's ledger needs: several items per subscription, invoices
without a subscription, refunds, inclusive tax, a coupon's duration (once, repeating, forever) and an
amount-off coupon's currency, and the billing system's own instants for periods. A version 1 file still
imports as before; its records may not carry version 2's fields.

JSON Lines: a format line first, then one record a line, each with a `type` and its table's columns.
Reading a record is engine.interchange_records (one record checked whole) over engine.interchange_fields
(the rules for each kind of field: text, ids, dates, instants, money); engine.ledger_load streams an
input through them into the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from engine.money import minor_unit

FORMAT_VERSION = "billsleuth-ledger/2"  # what export writes
VERSIONS = {"billsleuth-ledger/1": 1, "billsleuth-ledger/2": 2}  # what import reads
FORMAT_LINE = f'{{"type": "format", "version": "{FORMAT_VERSION}"}}'

# The columns each staging table takes, in the order a record's rows are given (engine.ledger_load
# stages them under these names; `places` is how many decimals an amount was written with).
COLUMNS: dict[str, tuple[str, ...]] = {
    "plans": ("id", "name", "interval", "unit_price", "source"),
    "coupons": ("id", "kind", "value", "duration_months", "source", "duration", "currency"),
    "tax_rates": ("code", "region", "rate", "valid_from", "valid_to", "source", "inclusive"),
    "customers": ("id", "name", "country", "currency", "tax_region", "contact_email", "source"),
    "subscriptions": (
        "id",
        "customer_id",
        "plan_id",
        "quantity",
        "status",
        "start_date",
        "current_period_start",
        "current_period_end",
        "billing_anchor_day",
        "coupon_id",
        "source",
    ),
    "subscription_items": ("id", "subscription_id", "item_no", "plan_id", "quantity", "source"),
    "subscription_events": ("id", "subscription_id", "type", "effective_at", "payload", "source"),
    "invoices": (
        "id",
        "customer_id",
        "subscription_id",
        "period_start",
        "period_end",
        "issued_at",
        "status",
        "subtotal",
        "discount",
        "tax",
        "total",
        "currency",
        "created_at",
        "source",
        "period_start_at",
        "period_end_at",
        "inclusive_tax",
    ),
    "invoice_lines": (
        "id",
        "invoice_id",
        "line_no",
        "kind",
        "description",
        "quantity",
        "unit_amount",
        "amount",
        "period_start",
        "period_end",
        "tax_code",
        "source",
        "inclusive",
        "period_start_at",
        "period_end_at",
    ),
    "payments": ("id", "invoice_id", "amount", "status", "attempted_at", "gateway_ref", "source", "places"),
    "credit_notes": (
        "id",
        "invoice_id",
        "amount",
        "reason",
        "status",
        "currency",
        "issued_at",
        "source",
        "places",
    ),
    "refunds": ("id", "payment_id", "amount", "status", "created_at", "credit_note_id", "source", "places"),
}

# Record type → the table it writes (an invoice also writes invoice_lines).
TABLE_OF: dict[str, str] = {
    "plan": "plans",
    "coupon": "coupons",
    "tax_rate": "tax_rates",
    "customer": "customers",
    "subscription": "subscriptions",
    "subscription_event": "subscription_events",
    "invoice": "invoices",
    "payment": "payments",
    "credit_note": "credit_notes",
    "refund": "refunds",
}
RECORD_TYPES = tuple(TABLE_OF)
V2_RECORD_TYPES = frozenset({"refund"})

LINE_KINDS = ("recurring", "proration", "discount", "tax", "adjustment")
PAYMENT_STATUSES = ("succeeded", "failed", "refunded")
# A billing system's own credit note: in force (issued) or withdrawn (void). Drafts and approvals are ours.
CREDIT_NOTE_STATUSES = ("issued", "void")
REFUND_STATUSES = ("succeeded", "pending", "failed", "canceled")  # Stripe's; only succeeded gives money back
COUPON_DURATIONS = ("once", "repeating", "forever")

# The fields each record type may carry besides `type` and `source`.
FIELDS: dict[str, frozenset[str]] = {
    "customer": frozenset({"id", "name", "country", "currency", "tax_region", "contact_email"}),
    "plan": frozenset({"id", "name", "interval", "unit_price"}),
    "coupon": frozenset({"id", "kind", "value", "duration_months"}),
    "tax_rate": frozenset({"code", "region", "rate", "valid_from", "valid_to"}),
    "subscription": frozenset(
        {"id", "customer_id", "plan_id", "quantity", "status", "start_date", "current_period_start"}
        | {"current_period_end", "billing_anchor_day", "coupon_id"}
    ),
    "subscription_event": frozenset({"id", "subscription_id", "event_type", "effective_at", "payload"}),
    "invoice": frozenset(
        {"id", "customer_id", "subscription_id", "period_start", "period_end", "issued_at", "status"}
        | {"subtotal", "discount", "tax", "total", "currency", "created_at", "lines"}
    ),
    "payment": frozenset({"id", "invoice_id", "amount", "status", "attempted_at", "gateway_ref"}),
    "credit_note": frozenset({"id", "invoice_id", "amount", "reason", "status", "currency", "issued_at"}),
}
# What version 2 adds to each record type (and its one new type).
FIELDS_V2: dict[str, frozenset[str]] = {
    **FIELDS,
    "coupon": FIELDS["coupon"] | {"duration", "currency"},
    "tax_rate": FIELDS["tax_rate"] | {"inclusive"},
    "subscription": FIELDS["subscription"] | {"items"},
    "invoice": FIELDS["invoice"] | {"period_start_at", "period_end_at", "inclusive_tax"},
    "refund": frozenset({"id", "payment_id", "amount", "status", "created_at", "credit_note_id"}),
}

# The fields an invoice line may carry (in its invoice's `lines`), and a subscription's item (`items`).
LINE_FIELDS = frozenset(
    {"id", "kind", "description", "quantity", "unit_amount", "amount", "period_start", "period_end"}
    | {"tax_code", "source"}
)
LINE_FIELDS_V2 = LINE_FIELDS | {"inclusive", "period_start_at", "period_end_at"}
ITEM_FIELDS = frozenset({"id", "plan_id", "quantity"})


# ---- writing records (ledger export, seed) ----

MONEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "plans": ("unit_price",),
    "coupons": ("value",),
    "invoices": ("subtotal", "discount", "tax", "total", "inclusive_tax"),
    "invoice_lines": ("unit_amount", "amount"),
    "payments": ("amount",),
    "credit_notes": ("amount",),
    "refunds": ("amount",),
}
# Version 2's flags and figures, written only when set: a ledger that uses nothing of version 2 exports
# as before.
FLAG_COLUMNS = frozenset({"inclusive", "inclusive_tax"})
RECORD_TYPE_OF = {table: record_type for record_type, table in TABLE_OF.items()}


def _written(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def to_record(table: str, row: Mapping[str, Any], currency: str | None = None) -> dict[str, Any]:
    """A ledger row (column → value) as its record: money in the currency's decimals (two where the row
    has no currency: plans, coupons), dates and instants in ISO 8601, empty optional fields left out.
    An invoice's `lines` are the caller's to add (to_record("invoice_lines", …) each, without invoice_id)."""
    record: dict[str, Any] = {"type": RECORD_TYPE_OF.get(table, "")}
    places = minor_unit(currency) if currency is not None else 2
    for name in COLUMNS[table]:
        if name in STAGED_COLUMNS or name not in row:
            continue
        value = row[name]
        if value is None or (name in FLAG_COLUMNS and not value):
            continue
        if name in MONEY_COLUMNS.get(table, ()):
            value = f"{Decimal(value):.{places}f}"
        record["event_type" if table == "subscription_events" and name == "type" else name] = _written(value)
    return record


def line_record(row: Mapping[str, Any], currency: str) -> dict[str, Any]:
    """An invoice line as it sits in its invoice's `lines`: no type, no invoice_id, no number (its place)."""
    record = to_record("invoice_lines", row, currency)
    for name in ("type", "invoice_id", "line_no"):
        record.pop(name, None)
    return record


def item_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A subscription item as it sits in its subscription's `items`."""
    return {name: row[name] for name in ("id", "plan_id", "quantity")}


STAGED_COLUMNS = frozenset({"places"})
