"""The ledger interchange format, `billsleuth-ledger/1` (DESIGN.md §3): one record's checks, pure.

JSON Lines: a format line first, then one record a line, each with a `type` and its table's columns.
This module turns one decoded line into the rows it writes (tuples in `COLUMNS` order), or says what is
wrong with it as `Problem`s (`field: problem`); the loader (engine.ledger_load) adds `PATH:LINE` and does
the checks that need other records (references, a payment's currency, ids given twice).

Money is a JSON string with exactly the currency's number of decimals ("174.90" USD, "12000" JPY); a JSON
number is refused, as a float would already be inexact. A record knows its currency only on an invoice
(its lines too); payments and credit notes carry how many decimals they were written with, and the
loader holds that to their invoice's currency.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.billing import CONFIG_CHANGES
from engine.model import EVENT_TYPES, Invoice, Line
from engine.money import held_to_cents, minor_unit
from engine.pricebook import COUNTRY_TZ

FORMAT_VERSION = "billsleuth-ledger/1"
FORMAT_LINE = f'{{"type": "format", "version": "{FORMAT_VERSION}"}}'

# The columns each staging table takes, in the order a record's rows are given (engine.ledger_load
# stages them under these names; `places` is how many decimals an amount was written with).
COLUMNS: dict[str, tuple[str, ...]] = {
    "plans": ("id", "name", "interval", "unit_price", "source"),
    "coupons": ("id", "kind", "value", "duration_months", "source"),
    "tax_rates": ("code", "region", "rate", "valid_from", "valid_to", "source"),
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
}
RECORD_TYPES = tuple(TABLE_OF)

LINE_KINDS = ("recurring", "proration", "discount", "tax", "adjustment")
PAYMENT_STATUSES = ("succeeded", "failed", "refunded")
# A billing system's own credit note: in force (issued) or withdrawn (void). Drafts and approvals are ours.
CREDIT_NOTE_STATUSES = ("issued", "void")
MAX_MONEY = Decimal("9999999999.99")  # NUMERIC(12,2)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_CURRENCY = re.compile(r"[A-Z]{3}", re.ASCII)


@dataclass(frozen=True)
class Problem:
    field: str
    message: str

    def at(self, path: str, line: int) -> str:
        return f"{path}:{line}: {self.field}: {self.message}"


class Invalid(ValueError):
    """One field's problem; raised by the field readers, collected per record."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.problem = Problem(field, message)


@dataclass(frozen=True)
class Parsed:
    """One record's rows, by table (an invoice: its header and its lines)."""

    type: str
    id: str
    rows: dict[str, list[tuple[Any, ...]]]


# ---- field readers: each takes the record and a field name, returns the value or raises Invalid ----


def _get(record: Mapping[str, Any], name: str, required: bool) -> Any:
    value = record.get(name)
    if value is None and required:
        raise Invalid(name, "missing" if name not in record else "must not be null")
    return value


def text(record: Mapping[str, Any], name: str, required: bool = True, empty: bool = False) -> str | None:
    value = _get(record, name, required)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(name, f"must be a string, not {_json_type(value)}")
    if not empty and not value.strip():
        raise Invalid(name, "must not be empty")
    return value


def ident(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    """An id: any text the source uses, but not blank and not padded (a lookup would never find it)."""
    value = text(record, name, required)
    if value is not None and value != value.strip():
        raise Invalid(name, f"{value!r} has spaces around it")
    return value


def choice(record: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = text(record, name)
    assert value is not None
    if value not in allowed:
        raise Invalid(name, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def whole(record: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int:
    value = _get(record, name, True)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(name, f"must be a whole number, not {_json_type(value)}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise Invalid(name, f"{value} is out of range ({bound})")
    return value


def day(record: Mapping[str, Any], name: str, required: bool = True) -> date | None:
    value = _get(record, name, required)
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise Invalid(name, f"{_shown(value)} is not a date (YYYY-MM-DD)")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise Invalid(name, f"{value!r} is not a date (YYYY-MM-DD)") from None


def instant(record: Mapping[str, Any], name: str, required: bool = True) -> datetime | None:
    value = _get(record, name, required)
    if value is None:
        return None
    if not isinstance(value, str) or "T" not in value:
        raise Invalid(name, f"{_shown(value)} is not an ISO 8601 instant (2026-09-01T10:00:00+00:00)")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(name, f"{value!r} is not an ISO 8601 instant (2026-09-01T10:00:00+00:00)") from None
    if parsed.tzinfo is None:
        raise Invalid(name, f"{value!r} has no offset (write +00:00 or Z)")
    return parsed


def decimal_text(record: Mapping[str, Any], name: str, what: str = "an amount") -> tuple[Decimal, int]:
    """A decimal written as a JSON string, and how many decimals it was written with."""
    value = _get(record, name, True)
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise Invalid(name, f'{value} is a JSON number; write {what} as a string ("{value}")')
    if not isinstance(value, str) or not re.fullmatch(r"-?\d+(\.\d+)?", value, re.ASCII):
        raise Invalid(name, f'{_shown(value)} is not {what} (a string like "174.90")')
    try:
        number = Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        raise Invalid(name, f"{value!r} is not {what}") from None
    _, _, places = value.partition(".")
    return number, len(places)


def amount(
    record: Mapping[str, Any], name: str, currency: str | None = None, *, positive: bool = False
) -> tuple[Decimal, int]:
    """Money: exactly the currency's decimals when it is known here, at most two (what the ledger holds)."""
    value, places = decimal_text(record, name)
    if currency is not None and places != minor_unit(currency):
        raise Invalid(name, f"{record[name]!r} must have {minor_unit(currency)} decimals for {currency}")
    if places > 2:
        raise Invalid(name, f"{record[name]!r} has more than two decimals")
    if abs(value) > MAX_MONEY:
        raise Invalid(name, f"{record[name]!r} is too large")
    if positive and value <= 0:
        raise Invalid(name, f"{record[name]!r} must be more than zero")
    return value, places


def currency_code(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = text(record, name, required)
    if value is None:
        return None
    if not _CURRENCY.fullmatch(value):
        raise Invalid(name, f"{value!r} is not an ISO 4217 currency code (USD, EUR, JPY)")
    if not held_to_cents(value):
        raise Invalid(name, f"{value} has {minor_unit(value)} decimals; the ledger holds at most two")
    return value


def _json_type(value: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
        type(value), "an object" if isinstance(value, dict) else "null"
    )


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else _json_type(value)


# ---- records ----


def _customer(r: Mapping[str, Any], source: str | None) -> Parsed:
    country = text(r, "country")
    if country not in COUNTRY_TZ:
        raise Invalid(
            "country", f"{country!r} is not a country the billing rules know ({', '.join(COUNTRY_TZ)})"
        )
    row = (
        ident(r, "id"),
        text(r, "name"),
        country,
        currency_code(r, "currency"),
        text(r, "tax_region"),
        text(r, "contact_email", required=False),
        source,
    )
    return Parsed("customer", row[0], {"customers": [row]})  # type: ignore[arg-type]


def _plan(r: Mapping[str, Any], source: str | None) -> Parsed:
    price, _ = amount(r, "unit_price")
    if price < 0:
        raise Invalid("unit_price", f"{r['unit_price']!r} must not be negative")
    row = (ident(r, "id"), text(r, "name"), choice(r, "interval", ("month", "year")), price, source)
    return Parsed("plan", row[0], {"plans": [row]})  # type: ignore[arg-type]


def _coupon(r: Mapping[str, Any], source: str | None) -> Parsed:
    kind = choice(r, "kind", ("percent", "amount"))
    value, _ = amount(r, "value", positive=True)
    if kind == "percent" and value > 100:
        raise Invalid("value", f"{r['value']!r} is more than 100 percent")
    row = (ident(r, "id"), kind, value, whole(r, "duration_months", 0), source)
    return Parsed("coupon", row[0], {"coupons": [row]})  # type: ignore[arg-type]


def _tax_rate(r: Mapping[str, Any], source: str | None) -> Parsed:
    rate, places = decimal_text(r, "rate", "a rate")
    if not Decimal(0) <= rate < 1 or places > 4:
        raise Invalid("rate", f'{r["rate"]!r} must be from 0 to below 1 with at most 4 decimals ("0.19")')
    valid_from, valid_to = day(r, "valid_from"), day(r, "valid_to", required=False)
    if valid_to is not None and valid_from is not None and valid_to < valid_from:
        raise Invalid("valid_to", f"{valid_to} is before valid_from {valid_from}")
    row = (ident(r, "code"), text(r, "region"), rate, valid_from, valid_to, source)
    return Parsed("tax_rate", row[0], {"tax_rates": [row]})  # type: ignore[arg-type]


def _subscription(r: Mapping[str, Any], source: str | None) -> Parsed:
    start, end = day(r, "current_period_start"), day(r, "current_period_end")
    if start is not None and end is not None and end <= start:
        raise Invalid("current_period_end", f"{end} is not after current_period_start {start}")
    row = (
        ident(r, "id"),
        ident(r, "customer_id"),
        ident(r, "plan_id"),
        whole(r, "quantity", 1),
        text(r, "status"),
        day(r, "start_date"),
        start,
        end,
        whole(r, "billing_anchor_day", 1, 28),
        ident(r, "coupon_id", required=False),
        source,
    )
    return Parsed("subscription", row[0], {"subscriptions": [row]})  # type: ignore[arg-type]


def _payload(event_type: str, payload: Any) -> dict[str, Any]:
    """The payload the rules read for this event type (engine.billing.build_invoices)."""
    if not isinstance(payload, dict):
        raise Invalid("payload", f"must be an object, not {_json_type(payload)}")
    if event_type == "create":
        for name in ("plan_id", "quantity"):
            if name not in payload:
                raise Invalid(f"payload.{name}", "missing (a create event names the plan and the seats)")
    elif event_type in CONFIG_CHANGES and "to_plan" not in payload and "to_quantity" not in payload:
        raise Invalid("payload", f"a {event_type} event needs to_plan or to_quantity")
    for name in ("plan_id", "to_plan"):
        if name in payload:
            ident(payload, name)
    for name in ("quantity", "to_quantity"):
        if name in payload:
            try:
                whole(payload, name, 1)
            except Invalid as error:
                raise Invalid(f"payload.{name}", error.problem.message) from None
    return payload


def _event(r: Mapping[str, Any], source: str | None) -> Parsed:
    event_type = choice(r, "event_type", EVENT_TYPES)
    row = (
        ident(r, "id"),
        ident(r, "subscription_id"),
        event_type,
        instant(r, "effective_at"),
        _payload(event_type, _get(r, "payload", True)),
        source,
    )
    return Parsed("subscription_event", row[0], {"subscription_events": [row]})  # type: ignore[arg-type]


LINE_FIELDS = frozenset(
    {"id", "kind", "description", "quantity", "unit_amount", "amount", "period_start", "period_end"}
    | {"tax_code", "source"}
)


def _line(r: Any, invoice_id: str, number: int, currency: str, source: str | None) -> tuple[Any, ...]:
    where = f"lines[{number - 1}]"
    if not isinstance(r, dict):
        raise Invalid(where, f"must be an object, not {_json_type(r)}")
    try:
        unknown = sorted(set(r) - LINE_FIELDS)
        if unknown:
            raise Invalid(unknown[0], "is not a field of an invoice line")
        return (
            ident(r, "id"),
            invoice_id,
            number,
            choice(r, "kind", LINE_KINDS),
            text(r, "description", empty=True),
            whole(r, "quantity", 0),
            amount(r, "unit_amount", currency)[0],
            amount(r, "amount", currency)[0],
            day(r, "period_start", required=False),
            day(r, "period_end", required=False),
            text(r, "tax_code", required=False),
            _source(r, source),
        )
    except Invalid as error:
        raise Invalid(f"{where}.{error.problem.field}", error.problem.message) from None


def _invoice(r: Mapping[str, Any], source: str | None) -> Parsed:
    invoice_id = ident(r, "id")
    currency = currency_code(r, "currency")
    assert invoice_id is not None and currency is not None
    lines = _get(r, "lines", True)
    if not isinstance(lines, list):
        raise Invalid("lines", f"must be a list, not {_json_type(lines)}")
    line_rows = [_line(line, invoice_id, n, currency, source) for n, line in enumerate(lines, start=1)]
    start, end = day(r, "period_start"), day(r, "period_end")
    if start is not None and end is not None and end <= start:
        raise Invalid("period_end", f"{end} is not after period_start {start}")
    header = {name: amount(r, name, currency)[0] for name in ("subtotal", "discount", "tax", "total")}
    _check_header(header, line_rows)
    row = (
        invoice_id,
        ident(r, "customer_id"),
        ident(r, "subscription_id"),
        start,
        end,
        day(r, "issued_at"),
        text(r, "status"),
        header["subtotal"],
        header["discount"],
        header["tax"],
        header["total"],
        currency,
        instant(r, "created_at", required=False),
        source,
    )
    return Parsed("invoice", invoice_id, {"invoices": [row], "invoice_lines": line_rows})


def _check_header(header: dict[str, Decimal], line_rows: list[tuple[Any, ...]]) -> None:
    """The header's figures are the lines' sums (what the rules compare is the lines: a header that says
    otherwise would show one figure and judge another)."""
    derived = Invoice(
        "", "", "", date.min, date.min, date.min, "", lines=[Line(r[3], "", 0, r[6], r[7]) for r in line_rows]
    )
    for name in ("subtotal", "discount", "tax", "total"):
        want = getattr(derived, name)
        if header[name] != want:
            raise Invalid(name, f"{header[name]} is not what the lines add up to ({want})")


def _payment(r: Mapping[str, Any], source: str | None) -> Parsed:
    value, places = amount(r, "amount")
    row = (
        ident(r, "id"),
        ident(r, "invoice_id"),
        value,
        choice(r, "status", PAYMENT_STATUSES),
        instant(r, "attempted_at"),
        text(r, "gateway_ref", empty=True),
        source,
        places,
    )
    return Parsed("payment", row[0], {"payments": [row]})  # type: ignore[arg-type]


def _credit_note(r: Mapping[str, Any], source: str | None) -> Parsed:
    value, places = amount(r, "amount", positive=True)
    row = (
        ident(r, "id"),
        ident(r, "invoice_id"),
        value,
        text(r, "reason"),
        choice(r, "status", CREDIT_NOTE_STATUSES),
        currency_code(r, "currency", required=False),
        instant(r, "issued_at", required=False),
        source,
        places,
    )
    return Parsed("credit_note", row[0], {"credit_notes": [row]})  # type: ignore[arg-type]


Reader = Callable[[Mapping[str, Any], str | None], Parsed]
READERS: dict[str, Reader] = {
    "plan": _plan,
    "coupon": _coupon,
    "tax_rate": _tax_rate,
    "customer": _customer,
    "subscription": _subscription,
    "subscription_event": _event,
    "invoice": _invoice,
    "payment": _payment,
    "credit_note": _credit_note,
}

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


def _source(record: Mapping[str, Any], file_source: str | None) -> str | None:
    """A record's own `source` (an export of rows from several sources) wins over its file's."""
    if "source" not in record:
        return file_source
    return text(record, "source", required=False)


def record_id(record: Any) -> tuple[str, str] | None:
    """(type, id) of a record, as far as it can be read: a bad record's id still resolves references to
    it, so its one error is not followed by one on every record that names it."""
    if not isinstance(record, dict) or record.get("type") not in READERS:
        return None
    key = record.get("code" if record["type"] == "tax_rate" else "id")
    return (record["type"], key) if isinstance(key, str) else None


def parse_record(record: Any, file_source: str | None) -> Parsed:
    """One decoded JSON line (after the format line) → its rows; raises Invalid naming the first problem."""
    if not isinstance(record, dict):
        raise Invalid("type", f"a record must be a JSON object, not {_json_type(record)}")
    kind = record.get("type")
    if kind == "format":
        raise Invalid("type", "a second format line (only the first line is one)")
    if kind not in READERS:
        shown = _shown(kind) if kind is not None else "missing"
        raise Invalid("type", f"{shown} is not a record type ({', '.join(RECORD_TYPES)})")
    unknown = sorted(set(record) - FIELDS[kind] - {"type", "source"})
    if unknown:
        raise Invalid(unknown[0], f"is not a field of a {kind} record")
    return READERS[kind](record, _source(record, file_source))


def parse_header(record: Any) -> str | None:
    """The format line → the file's `source` (None when it names none); raises Invalid otherwise."""
    if not isinstance(record, dict) or record.get("type") != "format":
        raise Invalid("type", f"the first line must be the format line {FORMAT_LINE}")
    if record.get("version") != FORMAT_VERSION:
        raise Invalid("version", f"{_shown(record.get('version'))} is not {FORMAT_VERSION!r}")
    unknown = sorted(set(record) - {"type", "version", "source"})
    if unknown:
        raise Invalid(unknown[0], "is not a field of the format line")
    return text(record, "source", required=False)


# ---- writing records (ledger export, seed) ----

MONEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "plans": ("unit_price",),
    "coupons": ("value",),
    "invoices": ("subtotal", "discount", "tax", "total"),
    "invoice_lines": ("unit_amount", "amount"),
    "payments": ("amount",),
    "credit_notes": ("amount",),
}
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
        if value is None:
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


STAGED_COLUMNS = frozenset({"places"})
