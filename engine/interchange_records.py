"""The records of `billsleuth-ledger/2` (DESIGN.md §3): one decoded line checked whole, pure.

Each record type has a reader that turns the decoded line into the rows it writes (tuples in
engine.interchange.COLUMNS order, each value the text COPY takes or None: an amount as written, a whole
number as digits, a payload as JSON; Decimal only where a check does arithmetic), or raises `Invalid`
naming its first problem (`field: problem`); the
loader (engine.ledger_load) adds `PATH:LINE` and does the checks that need other records (references, a
payment's currency, ids given twice). A record knows its currency only on an invoice (its lines too);
payments and credit notes carry how many decimals they were written with, and the loader holds that to
their invoice's currency. A version 1 file's records are read by the same readers; they may not carry
version 2's fields, so what they write is what version 1 wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, NamedTuple

from engine.billing import CONFIG_CHANGES
from engine.interchange import (
    COUPON_DURATIONS,
    CREDIT_NOTE_STATUSES,
    FIELDS,
    FIELDS_V2,
    FORMAT_LINE,
    ITEM_FIELDS,
    LINE_FIELDS,
    LINE_FIELDS_V2,
    LINE_KINDS,
    PAYMENT_STATUSES,
    RECORD_TYPES,
    REFUND_STATUSES,
    V2_RECORD_TYPES,
    VERSIONS,
)
from engine.interchange_fields import (
    Invalid,
    amount,
    choice,
    currency_code,
    day,
    decimal_text,
    flag,
    get,
    ident,
    instant,
    json_type,
    money_text,
    shown,
    text,
    whole,
)
from engine.model import EVENT_TYPES, Invoice, Line
from engine.pricebook import COUNTRY_TZ


class Parsed(NamedTuple):
    """One record's rows, by table (an invoice: its header and its lines). A tuple: one is made per
    record, and a frozen dataclass costs a microsecond more to build."""

    type: str
    id: str
    rows: dict[str, list[tuple[str | None, ...]]]


@dataclass(frozen=True)
class Header:
    """A file's format line: its version (1 or 2) and its `source`."""

    version: int
    source: str | None


def _customer(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
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


def _plan(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    price, _ = amount(r, "unit_price")
    if price < 0:
        raise Invalid("unit_price", f"{r['unit_price']!r} must not be negative")
    row = (ident(r, "id"), text(r, "name"), choice(r, "interval", ("month", "year")), r["unit_price"], source)
    return Parsed("plan", row[0], {"plans": [row]})  # type: ignore[arg-type]


def _coupon(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    kind = choice(r, "kind", ("percent", "amount"))
    currency = currency_code(r, "currency", required=False)
    if currency is not None and kind != "amount":
        raise Invalid("currency", "only an amount-off coupon has a currency")
    value, _ = amount(r, "value", currency, positive=True)
    if kind == "percent" and value > 100:
        raise Invalid("value", f"{r['value']!r} is more than 100 percent")
    duration = choice(r, "duration", COUPON_DURATIONS) if "duration" in r else None
    row = (ident(r, "id"), kind, value, _coupon_months(r, duration), source, duration, currency)
    return Parsed("coupon", row[0], {"coupons": [row]})  # type: ignore[arg-type]


# The months a `once` or `forever` coupon's duration_months must be (or is, when left out): once is the
# first invoice's month; forever has no count, and the rules read its duration instead.
_IMPLIED_MONTHS = {"once": 1, "forever": 0}


def _coupon_months(r: Mapping[str, Any], duration: str | None) -> int:
    if duration not in _IMPLIED_MONTHS:
        return whole(r, "duration_months", 1)  # (the ledger holds at least one: coupons_duration_positive)
    implied = _IMPLIED_MONTHS[duration]
    if "duration_months" in r and whole(r, "duration_months", 0) != implied:
        raise Invalid("duration_months", f"a {duration} coupon's duration_months is {implied} (or left out)")
    return implied


def _tax_rate(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    rate, places = decimal_text(r, "rate", "a rate")
    if not Decimal(0) <= rate < 1 or places > 4:
        raise Invalid("rate", f'{r["rate"]!r} must be from 0 to below 1 with at most 4 decimals ("0.19")')
    valid_from, valid_to = day(r, "valid_from"), day(r, "valid_to", required=False)
    if valid_to is not None and valid_from is not None and valid_to < valid_from:
        raise Invalid("valid_to", f"{valid_to} is before valid_from {valid_from}")
    row = (ident(r, "code"), text(r, "region"), rate, valid_from, valid_to, source, flag(r, "inclusive"))
    return Parsed("tax_rate", row[0], {"tax_rates": [row]})  # type: ignore[arg-type]


def _subscription(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    start, end = day(r, "current_period_start"), day(r, "current_period_end")
    if start is not None and end is not None and end <= start:
        raise Invalid("current_period_end", f"{end} is not after current_period_start {start}")
    row = (
        ident(r, "id"),
        ident(r, "customer_id"),
        ident(r, "plan_id"),
        str(whole(r, "quantity", 1)),
        text(r, "status"),
        day(r, "start_date"),
        start,
        end,
        str(whole(r, "billing_anchor_day", 1, 28)),
        ident(r, "coupon_id", required=False),
        source,
    )
    items = _items(r, row[0], source)  # type: ignore[arg-type]
    return Parsed("subscription", row[0], {"subscriptions": [row], "subscription_items": items})  # type: ignore[arg-type]


def _items(r: Mapping[str, Any], subscription_id: str, source: str | None) -> list[tuple[Any, ...]]:
    """A subscription's items (version 2): each price it bills, with its quantity, in their order."""
    items = r.get("items", [])
    if not isinstance(items, list):
        raise Invalid("items", f"must be a list, not {json_type(items)}")
    rows = []
    for number, item in enumerate(items, start=1):
        where = f"items[{number - 1}]"
        if not isinstance(item, dict):
            raise Invalid(where, f"must be an object, not {json_type(item)}")
        try:
            if not ITEM_FIELDS.issuperset(item):
                raise Invalid(sorted(set(item) - ITEM_FIELDS)[0], "is not a field of a subscription item")
            plan_id, quantity = ident(item, "plan_id"), whole(item, "quantity", 0)
            rows.append((ident(item, "id"), subscription_id, number, plan_id, quantity, source))
        except Invalid as error:
            raise Invalid(f"{where}.{error.problem.field}", error.problem.message) from None
    return rows


def _payload(event_type: str, payload: Any) -> dict[str, Any]:
    """The payload the rules read for this event type (engine.billing.build_invoices)."""
    if not isinstance(payload, dict):
        raise Invalid("payload", f"must be an object, not {json_type(payload)}")
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


def _event(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    event_type = choice(r, "event_type", EVENT_TYPES)
    row = (
        ident(r, "id"),
        ident(r, "subscription_id"),
        event_type,
        instant(r, "effective_at"),
        json.dumps(_payload(event_type, get(r, "payload", True))),
        source,
    )
    return Parsed("subscription_event", row[0], {"subscription_events": [row]})  # type: ignore[arg-type]


def _line(
    r: Any, invoice_id: str, number: int, currency: str, source: str | None, version: int
) -> tuple[str | None, ...]:
    if not isinstance(r, dict):
        raise Invalid(f"lines[{number - 1}]", f"must be an object, not {json_type(r)}")
    allowed = LINE_FIELDS_V2 if version >= 2 else LINE_FIELDS
    try:
        if not allowed.issuperset(r):
            raise Invalid(sorted(set(r) - allowed)[0], _not_a_field("an invoice line", version))
        inclusive = flag(r, "inclusive")
        if inclusive and r.get("kind") != "tax":
            raise Invalid("inclusive", "only a tax line is inclusive")
        return (
            ident(r, "id"),
            invoice_id,
            str(number),
            choice(r, "kind", LINE_KINDS),
            text(r, "description", empty=True),
            str(whole(r, "quantity", 0)),
            money_text(r, "unit_amount", currency),
            money_text(r, "amount", currency),
            day(r, "period_start", required=False),
            day(r, "period_end", required=False),
            text(r, "tax_code", required=False),
            _source(r, source),
            "t" if inclusive else "f",
            *_period_instants(r),
        )
    except Invalid as error:
        raise Invalid(f"lines[{number - 1}].{error.problem.field}", error.problem.message) from None


def _period_instants(r: Mapping[str, Any]) -> tuple[Any, Any]:
    """A period's own instants (version 2), beside its dates: the end after the start."""
    start, end = instant(r, "period_start_at", required=False), instant(r, "period_end_at", required=False)
    if start is not None and end is not None and end <= start:
        raise Invalid("period_end_at", f"{r['period_end_at']} is not after period_start_at")
    return start, end


def _invoice(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    invoice_id = ident(r, "id")
    currency = currency_code(r, "currency")
    assert invoice_id is not None and currency is not None
    lines = get(r, "lines", True)
    if not isinstance(lines, list):
        raise Invalid("lines", f"must be a list, not {json_type(lines)}")
    line_rows = [
        _line(line, invoice_id, n, currency, source, version) for n, line in enumerate(lines, start=1)
    ]
    start, end = day(r, "period_start"), day(r, "period_end")
    if start is not None and end is not None and end <= start:
        raise Invalid("period_end", f"{end} is not after period_start {start}")
    header = {name: amount(r, name, currency)[0] for name in _HEADER if name in r or name != "inclusive_tax"}
    _check_header(header, line_rows)
    row = (
        invoice_id,
        ident(r, "customer_id"),
        ident(r, "subscription_id", required=version < 2),  # version 2: a one-off invoice names none
        start,
        end,
        day(r, "issued_at"),
        text(r, "status"),
        r["subtotal"],
        r["discount"],
        r["tax"],
        r["total"],
        currency,
        instant(r, "created_at", required=False),
        source,
        *_period_instants(r),
        str(header["inclusive_tax"]),  # as psycopg would send the Decimal: the digits as written or derived
    )
    return Parsed("invoice", invoice_id, {"invoices": [row], "invoice_lines": line_rows})


_HEADER = ("subtotal", "discount", "tax", "total", "inclusive_tax")


def _check_header(header: dict[str, Decimal], line_rows: list[tuple[str | None, ...]]) -> None:
    """The header's figures are the lines' sums (what the rules compare is the lines: a header that says
    otherwise would show one figure and judge another). inclusive_tax, when left out, is the lines'."""
    derived = Invoice(
        "",
        "",
        "",
        date.min,
        date.min,
        date.min,
        "",
        lines=[Line(r[3], "", 0, Decimal(r[6]), Decimal(r[7]), inclusive=r[12] == "t") for r in line_rows],  # type: ignore[arg-type]
    )
    header.setdefault("inclusive_tax", derived.inclusive_tax)
    for name in _HEADER:
        want = getattr(derived, name)
        if header[name] != want:
            raise Invalid(name, f"{header[name]} is not what the lines add up to ({want})")


def _payment(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    _, places = amount(r, "amount")
    row = (
        ident(r, "id"),
        ident(r, "invoice_id"),
        r["amount"],
        choice(r, "status", PAYMENT_STATUSES),
        instant(r, "attempted_at"),
        text(r, "gateway_ref", empty=True),
        source,
        str(places),
    )
    return Parsed("payment", row[0], {"payments": [row]})  # type: ignore[arg-type]


def _credit_note(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    _, places = amount(r, "amount", positive=True)
    row = (
        ident(r, "id"),
        ident(r, "invoice_id"),
        r["amount"],
        text(r, "reason"),
        choice(r, "status", CREDIT_NOTE_STATUSES),
        currency_code(r, "currency", required=False),
        instant(r, "issued_at", required=False),
        source,
        str(places),
    )
    return Parsed("credit_note", row[0], {"credit_notes": [row]})  # type: ignore[arg-type]


def _refund(r: Mapping[str, Any], source: str | None, version: int) -> Parsed:
    """Money given back on a payment (version 2). One its credit note made names the note (counted once,
    as the note)."""
    value, places = amount(r, "amount", positive=True)
    row = (
        ident(r, "id"),
        ident(r, "payment_id"),
        value,
        choice(r, "status", REFUND_STATUSES),
        instant(r, "created_at"),
        ident(r, "credit_note_id", required=False),
        source,
        places,
    )
    return Parsed("refund", row[0], {"refunds": [row]})  # type: ignore[arg-type]


Reader = Callable[[Mapping[str, Any], str | None, int], Parsed]
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
    "refund": _refund,
}


def _source(record: Mapping[str, Any], file_source: str | None) -> str | None:
    """A record's own `source` (an export of rows from several sources) wins over its file's."""
    if "source" not in record:
        return file_source
    return text(record, "source", required=False)


# Every field a record of each type may carry, `type` and `source` included, by format version.
_ALLOWED = {
    version: {kind: fields | {"type", "source"} for kind, fields in by_kind.items()}
    for version, by_kind in ((1, FIELDS), (2, FIELDS_V2))
}


def _not_a_field(what: str, version: int) -> str:
    return f"is not a field of {what}" + (" in billsleuth-ledger/1" if version < 2 else "")


def record_id(record: Any) -> tuple[str, str] | None:
    """(type, id) of a record, as far as it can be read: a bad record's id still resolves references to
    it, so its one error is not followed by one on every record that names it."""
    kind = record.get("type") if isinstance(record, dict) else None
    if not isinstance(kind, str) or kind not in READERS:
        return None
    key = record.get("code" if kind == "tax_rate" else "id")
    return (kind, key) if isinstance(key, str) else None


def parse_record(record: Any, file_source: str | None, version: int = 2) -> Parsed:
    """One decoded JSON line (after the format line) → its rows; raises Invalid naming the first problem."""
    if not isinstance(record, dict):
        raise Invalid("type", f"a record must be a JSON object, not {json_type(record)}")
    kind = record.get("type")
    if kind == "format":
        raise Invalid("type", "a second format line (only the first line is one)")
    if not isinstance(kind, str) or kind not in READERS:
        written = shown(kind) if kind is not None else "missing"
        raise Invalid("type", f"{written} is not a record type ({', '.join(RECORD_TYPES)})")
    if version < 2 and kind in V2_RECORD_TYPES:
        raise Invalid("type", f"{kind!r} is a billsleuth-ledger/2 record type")
    allowed = _ALLOWED[min(version, 2)][kind]
    if not allowed.issuperset(record):
        unknown = sorted(set(record) - allowed)
        raise Invalid(unknown[0], _not_a_field(f"a {kind} record", version))
    return READERS[kind](record, _source(record, file_source), version)


def parse_header(record: Any) -> Header:
    """The format line → the file's version and `source` (None when it names none); raises Invalid
    otherwise."""
    if not isinstance(record, dict) or record.get("type") != "format":
        raise Invalid("type", f"the first line must be the format line {FORMAT_LINE}")
    version = record.get("version")
    if not isinstance(version, str) or version not in VERSIONS:
        raise Invalid("version", f"{shown(version)} is not {' or '.join(map(repr, VERSIONS))}")
    unknown = sorted(set(record) - {"type", "version", "source"})
    if unknown:
        raise Invalid(unknown[0], "is not a field of the format line")
    return Header(VERSIONS[version], text(record, "source", required=False))
