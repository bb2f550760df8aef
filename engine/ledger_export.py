"""The ledger written out in `billsleuth-ledger/2`: what `ledger import` reads back, row for row.

Streamed: each table is read through a server-side cursor (a few thousand rows at a time) and written as
it comes, invoices zipped with their lines (both in invoice id order), so memory stays flat. Plain
psycopg, as engine.ledger_stream.

What is written: the price book, the customers (all, or those asked for) with their subscriptions,
events, invoices, payments, refunds, and the credit notes the billing system issued itself (`imported`).
BillSleuth's own notes are not ledger input: they live with their cases, votes and activity rows.
`since` keeps invoices issued on or after it (with their payments and credit notes) and events effective
on or after it; the price book, customers and subscriptions, which every other record names, are whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import date
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TextIO

from engine.interchange import COLUMNS, FORMAT_VERSION, STAGED_COLUMNS, item_record, line_record, to_record

if TYPE_CHECKING:
    import psycopg

FETCH_ROWS = 5_000


def _columns(table: str) -> list[str]:
    return [c for c in COLUMNS[table] if c not in STAGED_COLUMNS]


_CUSTOMER = "(%(ids)s::text[] IS NULL OR {col} = ANY(%(ids)s::text[]))"
_SINCE = "(%(since)s::date IS NULL OR {col} >= %(since)s::date)"
# Rows that belong to an invoice: exported with the invoice's customer and issue date (`i` is joined).
_INVOICE_SCOPE = _CUSTOMER.format(col="i.customer_id") + " AND " + _SINCE.format(col="i.issued_at")


def _select(table: str, prefix: str, where: str, order: str, extra: str = "", join: str = "") -> str:
    columns = ", ".join(f"{prefix}.{c}" for c in _columns(table))
    return f"SELECT {columns}{extra} FROM {table} {prefix} {join} WHERE {where} ORDER BY {order}"


# The key ordering is byte order (COLLATE "C"): invoices and their lines are zipped by id in Python.
QUERIES: dict[str, str] = {
    "plans": _select("plans", "p", "true", "p.id"),
    "coupons": _select("coupons", "c", "true", "c.id"),
    "tax_rates": _select("tax_rates", "r", "true", "r.valid_from, r.code"),
    "customers": _select("customers", "c", _CUSTOMER.format(col="c.id"), "c.id"),
    "subscriptions": _select("subscriptions", "s", _CUSTOMER.format(col="s.customer_id"), 's.id COLLATE "C"'),
    "subscription_items": _select(
        "subscription_items",
        "m",
        _CUSTOMER.format(col="s.customer_id"),
        'm.subscription_id COLLATE "C", m.item_no, m.id',
        join="JOIN subscriptions s ON s.id = m.subscription_id",
    ),
    "subscription_events": _select(
        "subscription_events",
        "e",
        _CUSTOMER.format(col="s.customer_id") + " AND " + _SINCE.format(col="e.effective_at::date"),
        "e.effective_at, e.id",
        join="JOIN subscriptions s ON s.id = e.subscription_id",
    ),
    "invoices": _select(
        "invoices",
        "i",
        _INVOICE_SCOPE,
        'i.id COLLATE "C"',
    ),
    "invoice_lines": _select(
        "invoice_lines",
        "l",
        _INVOICE_SCOPE,
        'l.invoice_id COLLATE "C", l.line_no, l.id',
        join="JOIN invoices i ON i.id = l.invoice_id",
    ),
    "payments": _select(
        "payments",
        "p",
        _INVOICE_SCOPE,
        "p.attempted_at, p.id",
        extra=", i.currency",
        join="JOIN invoices i ON i.id = p.invoice_id",
    ),
    "credit_notes": _select(
        "credit_notes",
        "n",
        "n.imported AND " + _INVOICE_SCOPE,
        "n.id",
        join="JOIN invoices i ON i.id = n.invoice_id",
    ),
    "refunds": _select(
        "refunds",
        "r",
        _INVOICE_SCOPE,
        "r.created_at, r.id",
        extra=", i.currency",
        join="JOIN payments p ON p.id = r.payment_id JOIN invoices i ON i.id = p.invoice_id",
    ),
}


def _rows(conn: psycopg.Connection[Any], table: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    names = [*_columns(table), *(["currency"] if table in ("payments", "refunds") else [])]
    with conn.cursor(name=f"export_{table}") as cursor:
        cursor.execute(QUERIES[table], params)
        while rows := cursor.fetchmany(FETCH_ROWS):
            for row in rows:
                yield dict(zip(names, row, strict=True))


def records(
    conn: psycopg.Connection[Any], customer_ids: Sequence[str] | None = None, since: date | None = None
) -> Iterator[dict[str, Any]]:
    """Every record to write, the format line first, in one transaction (one snapshot of the ledger)."""
    params = {"ids": None if customer_ids is None else list(customer_ids), "since": since}
    yield {"type": "format", "version": FORMAT_VERSION}
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for table in ("plans", "coupons", "tax_rates", "customers"):
            for row in _rows(conn, table, params):
                yield to_record(table, row)
        yield from _subscriptions(conn, params)
        for row in _rows(conn, "subscription_events", params):
            yield to_record("subscription_events", row)
        yield from _invoices(conn, params)
        for row in _rows(conn, "payments", params):
            yield to_record("payments", row, row["currency"])
        for row in _rows(conn, "credit_notes", params):
            yield to_record("credit_notes", row, row["currency"])
        for row in _rows(conn, "refunds", params):
            yield to_record("refunds", row, row["currency"])


def _subscriptions(conn: psycopg.Connection[Any], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Subscriptions with their items (format 2): both streams in subscription id order, zipped."""
    items = groupby(_rows(conn, "subscription_items", params), key=itemgetter("subscription_id"))
    pending = next(items, None)
    for row in _rows(conn, "subscriptions", params):
        record = to_record("subscriptions", row)
        if pending is not None and pending[0] == row["id"]:
            record["items"] = [item_record(item) for item in pending[1]]
            pending = next(items, None)
        yield record


def _invoices(conn: psycopg.Connection[Any], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Invoices with their lines: both streams in invoice id order, zipped."""
    lines = groupby(_rows(conn, "invoice_lines", params), key=itemgetter("invoice_id"))
    pending = next(lines, None)
    for row in _rows(conn, "invoices", params):
        record = to_record("invoices", row, row["currency"])
        own: list[dict[str, Any]] = []
        if pending is not None and pending[0] == row["id"]:
            own = [line_record(line, row["currency"]) for line in pending[1]]
            pending = next(lines, None)
        record["lines"] = own
        yield record


def write(records_: Iterator[dict[str, Any]], out: TextIO) -> int:
    """One JSON object a line; returns how many records (the format line aside)."""
    count = -1
    for record in records_:
        out.write(json.dumps(record, ensure_ascii=False, separators=(", ", ": ")))
        out.write("\n")
        count += 1
    return count
