"""The checks of a ledger import that need other records: SQL over the staging tables and the ledger as
it stands (references, an invoice's currency for its payments and credit notes, ids given twice, a
billing system's credit note replacing one of ours). Each check reports its first MAX_ERRORS problems
and counts the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.interchange import TABLE_OF
from engine.ledger_staging import KEY, TABLE_ORDER, effective, stage
from engine.money import ZERO_DECIMAL_CURRENCIES

if TYPE_CHECKING:
    import psycopg

MAX_ERRORS = 50  # shown; the rest are counted


class Errors:
    """Problems in input order, the first MAX_ERRORS kept."""

    def __init__(self) -> None:
        self.kept: list[tuple[int, int, str]] = []
        self.count = 0

    def add(self, file_no: int, line: int, message: str, *, kept_anyway: bool = False) -> None:
        """kept_anyway: one of a check's first problems, which may come before ones already kept."""
        self.count += 1
        if kept_anyway or len(self.kept) < MAX_ERRORS:
            self.kept.append((file_no, line, message))


def _unknown(record_type: str, value: str) -> str:
    """`value` is no id of a record type: not staged, not in the ledger, not named by a record refused
    for its own problem. Anti-joins (NOT EXISTS), never NOT IN: a NOT IN whose list outgrows work_mem is
    checked row by row against all of it, which at a million invoices never ends."""
    table = TABLE_OF[record_type]
    key = KEY[table]
    return (
        f"NOT EXISTS (SELECT 1 FROM {stage(table)} k WHERE k.{key} = {value}) "
        f"AND NOT EXISTS (SELECT 1 FROM {table} k WHERE k.{key} = {value}) "
        f"AND NOT EXISTS (SELECT 1 FROM ledger_stage_bad k WHERE k.type = '{record_type}' AND k.id = {value})"
    )


def _reference(table: str, column: str, record_type: str, field_name: str | None = None) -> str:
    value = f"s.{column}"
    return (
        f"SELECT _file, _line, '{field_name or column}', format('no {record_type.replace('_', ' ')} %%L in "
        f"the input or the ledger', {value}) FROM {stage(table)} s WHERE {value} IS NOT NULL "
        f"AND {_unknown(record_type, value)}"
    )


def _duplicates(table: str) -> str:
    key = KEY[table]
    field_name = {
        "invoice_lines": "format('lines[%%s].id', line_no - 1)",
        "subscription_items": "format('items[%%s].id', item_no - 1)",
    }.get(table, f"'{key}'")
    return (
        f"SELECT _file, _line, {field_name}, format('%%s is given twice (first at %%s:%%s)', {key}, "
        f"(%(files)s::text[])[first_file + 1], first_line) FROM (SELECT *, row_number() OVER w AS n, "
        f"first_value(_file) OVER w AS first_file, first_value(_line) OVER w AS first_line "
        f"FROM {stage(table)} WINDOW w AS (PARTITION BY {key} ORDER BY _file, _line)) d WHERE n > 1"
    )


_MINOR = "(CASE WHEN {c} = ANY(%(zero)s::text[]) THEN 0 ELSE 2 END)"


def _decimals(table: str) -> str:
    """A payment's or credit note's amount, written with its invoice's currency's decimals."""
    minor = _MINOR.format(c="i.currency")
    return (
        "SELECT s._file, s._line, 'amount', format('written with %%s decimals; %%s amounts have %%s', "
        f"s.places, i.currency, {minor}) FROM {stage(table)} s "
        f"JOIN {effective('invoices', 'id, currency')} i ON i.id = s.invoice_id WHERE s.places <> {minor}"
    )


def _refund_decimals() -> str:
    """A refund's amount, written with its payment's invoice's currency's decimals."""
    minor = _MINOR.format(c="i.currency")
    return (
        "SELECT s._file, s._line, 'amount', format('written with %%s decimals; %%s amounts have %%s', "
        f"s.places, i.currency, {minor}) FROM ledger_stage_refunds s "
        f"JOIN {effective('payments', 'id, invoice_id')} p ON p.id = s.payment_id "
        f"JOIN {effective('invoices', 'id, currency')} i ON i.id = p.invoice_id WHERE s.places <> {minor}"
    )


CHECKS: tuple[str, ...] = (
    *(_duplicates(table) for table in TABLE_ORDER),
    _reference("subscriptions", "customer_id", "customer"),
    _reference("subscriptions", "plan_id", "plan"),
    _reference("subscriptions", "coupon_id", "coupon"),
    _reference("subscription_events", "subscription_id", "subscription"),
    _reference("subscription_events", "payload->>'plan_id'", "plan", "payload.plan_id"),
    _reference("subscription_events", "payload->>'to_plan'", "plan", "payload.to_plan"),
    _reference("invoices", "customer_id", "customer"),
    _reference("invoices", "subscription_id", "subscription"),
    _reference("payments", "invoice_id", "invoice"),
    _reference("credit_notes", "invoice_id", "invoice"),
    _reference("subscription_items", "plan_id", "plan", "items.plan_id"),
    _reference("refunds", "payment_id", "payment"),
    _reference("refunds", "credit_note_id", "credit_note"),
    _refund_decimals(),
    # An invoice bills its subscription's customer, in that customer's currency.
    "SELECT s._file, s._line, 'subscription_id', format('%%L belongs to customer %%L, not %%L', "
    "s.subscription_id, sub.customer_id, s.customer_id) FROM ledger_stage_invoices s JOIN "
    + effective("subscriptions", "id, customer_id")
    + " sub ON sub.id = s.subscription_id "
    # an unknown customer on either side is reported once, as itself: both must be there to compare
    + "JOIN "
    + effective("customers", "id")
    + " mine ON mine.id = s.customer_id JOIN "
    + effective("customers", "id")
    + " theirs ON theirs.id = sub.customer_id WHERE sub.customer_id <> s.customer_id",
    "SELECT s._file, s._line, 'currency', format('%%s is not the currency of customer %%L (%%s)', "
    "s.currency, c.id, c.currency) FROM ledger_stage_invoices s JOIN "
    + effective("customers", "id, currency")
    + " c ON c.id = s.customer_id WHERE c.currency <> s.currency",
    _decimals("payments"),
    _decimals("credit_notes"),
    "SELECT s._file, s._line, 'currency', format('%%s is not the currency of invoice %%L (%%s)', "
    "s.currency, i.id, i.currency) FROM ledger_stage_credit_notes s JOIN "
    + effective("invoices", "id, currency")
    + " i ON i.id = s.invoice_id WHERE s.currency IS NOT NULL AND s.currency <> i.currency",
    # A billing system's credit note never replaces one BillSleuth drafted.
    "SELECT s._file, s._line, 'id', format('%%L is a BillSleuth credit note; an imported one cannot replace "
    "it', s.id) FROM ledger_stage_credit_notes s JOIN credit_notes c ON c.id = s.id WHERE NOT c.imported",
)


async def run_checks(conn: psycopg.AsyncConnection[Any], names: list[str], errors: Errors) -> None:
    params = {"files": names, "zero": sorted(ZERO_DECIMAL_CURRENCIES)}
    for check in CHECKS:
        query = (
            f"SELECT _file, _line, field, message, count(*) OVER () FROM ({check}) AS c(_file, _line, field, "
            f"message) ORDER BY _file, _line LIMIT {MAX_ERRORS}"
        )
        rows = await (await conn.execute(query, params)).fetchall()  # type: ignore[arg-type]
        for file_no, line, field_name, message, _ in rows:
            errors.add(file_no, line, f"{field_name}: {message}", kept_anyway=True)
        if rows:
            errors.count += rows[0][4] - len(rows)
