"""The field rules of `billsleuth-ledger/2` (DESIGN.md §3): how text, ids, whole numbers, dates, instants,
money and currency codes must be written, one field at a time.

Each reader takes the decoded record and a field name and returns the value, or raises `Invalid` naming
the field and the problem. Dates and instants come back as the text COPY takes (a date as written, an
instant as psycopg would send it), so a checked record's rows go to COPY without being formatted again.
They run on every field of every record of an import (a few million calls for a large ledger), so the
common case, a well-formed value, is checked first and cheaply; the wording of a refusal is only worked
out once something is wrong.

Money is a JSON string with exactly the currency's number of decimals ("174.90" USD, "12000" JPY); a JSON
number is refused, as a float would already be inexact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any

from engine.money import held_to_cents, minor_unit

MAX_MONEY = Decimal("9999999999.99")  # NUMERIC(12,2)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_CURRENCY = re.compile(r"[A-Z]{3}", re.ASCII)
_DECIMAL = re.compile(r"-?\d+(\.\d+)?", re.ASCII)
# An amount in the ledger's range (NUMERIC(12,2)) with at most two decimals: the common case of `amount`.
_MONEY = re.compile(r"-?\d{1,10}(?:\.(\d{1,2}))?", re.ASCII)
# An instant in the form exports write: Postgres reads it as Python does, so it goes to COPY as written.
_PLAIN_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?([+-]\d{2}:\d{2}|Z)", re.ASCII)


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


def get(record: Mapping[str, Any], name: str, required: bool) -> Any:
    value = record.get(name)
    if value is None and required:
        raise Invalid(name, "missing" if name not in record else "must not be null")
    return value


def text(record: Mapping[str, Any], name: str, required: bool = True, empty: bool = False) -> str | None:
    value = record.get(name)
    if isinstance(value, str):
        if empty or value.strip():
            return value
        raise Invalid(name, "must not be empty")
    if get(record, name, required) is None:
        return None
    raise Invalid(name, f"must be a string, not {json_type(value)}")


def ident(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    """An id: any text the source uses, but not blank and not padded (a lookup would never find it)."""
    value = record.get(name)
    if isinstance(value, str) and value and value.strip() == value:
        return value  # the common case, settled at once
    value = text(record, name, required)
    if value is not None and value != value.strip():
        raise Invalid(name, f"{value!r} has spaces around it")
    return value


def choice(record: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = record.get(name)
    if value in allowed and isinstance(value, str):
        return value
    value = text(record, name)
    raise Invalid(name, f"{value!r} is not one of {', '.join(allowed)}")


def whole(record: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int:
    value = record.get(name)
    if type(value) is int and value >= low and (high is None or value <= high):
        return value  # the common case, settled at once (bool is a subclass of int, not int itself)
    get(record, name, True)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(name, f"must be a whole number, not {json_type(value)}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise Invalid(name, f"{value} is out of range ({bound})")
    return value


def flag(record: Mapping[str, Any], name: str) -> bool:
    """A true/false field; left out means false."""
    value = record.get(name, False)
    if isinstance(value, bool):
        return value
    raise Invalid(name, f"must be true or false, not {json_type(value)}")


def day(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    """A date, as written ("2026-09-01"): checked, and already what COPY takes. Two of them compare as
    text in date order (the pattern fixes every digit's place)."""
    value = record.get(name)
    if value is None:
        get(record, name, required)
        return None
    if not isinstance(value, str) or not _is_date(value):
        raise Invalid(name, f"{shown(value)} is not a date (YYYY-MM-DD)")
    return value


@lru_cache(maxsize=8192)
def _is_date(value: str) -> bool:
    """Written YYYY-MM-DD and a day of the calendar. A ledger names a few thousand days a million times:
    each is worked out once (the cache is bounded, so memory stays flat)."""
    if not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def instant(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    """An instant with its offset, as COPY text: as written when in the plain form, otherwise as psycopg
    would send what Python read (formatting a datetime costs more than reading one)."""
    value = record.get(name)
    if value is None:
        get(record, name, required)
        return None
    if not isinstance(value, str) or "T" not in value:
        raise Invalid(name, f"{shown(value)} is not an ISO 8601 instant (2026-09-01T10:00:00+00:00)")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(name, f"{value!r} is not an ISO 8601 instant (2026-09-01T10:00:00+00:00)") from None
    if parsed.tzinfo is None:
        raise Invalid(name, f"{value!r} has no offset (write +00:00 or Z)")
    return value if _PLAIN_INSTANT.fullmatch(value) else str(parsed)


def decimal_text(record: Mapping[str, Any], name: str, what: str = "an amount") -> tuple[Decimal, int]:
    """A decimal written as a JSON string, and how many decimals it was written with."""
    value = record.get(name)
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        point = value.find(".")
        return Decimal(value), (len(value) - point - 1 if point >= 0 else 0)
    get(record, name, True)
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise Invalid(name, f'{value} is a JSON number; write {what} as a string ("{value}")')
    raise Invalid(name, f'{shown(value)} is not {what} (a string like "174.90")')


@cache
def _decimals_of(currency: str) -> int:
    return minor_unit(currency)


def amount(
    record: Mapping[str, Any], name: str, currency: str | None = None, *, positive: bool = False
) -> tuple[Decimal, int]:
    """Money: exactly the currency's decimals when it is known here, at most two (what the ledger holds);
    the amount and how many decimals it was written with."""
    written = record.get(name)
    if isinstance(written, str) and (well_formed := _MONEY.fullmatch(written)) is not None:
        places = len(well_formed[1] or "")
        value = Decimal(written)
        if (currency is None or places == _decimals_of(currency)) and (not positive or value > 0):
            return value, places  # the common case, settled with one match
    value, places = decimal_text(record, name)
    if currency is not None and places != _decimals_of(currency):
        raise Invalid(name, f"{record[name]!r} must have {minor_unit(currency)} decimals for {currency}")
    if places > 2:
        raise Invalid(name, f"{record[name]!r} has more than two decimals")
    if abs(value) > MAX_MONEY:
        raise Invalid(name, f"{record[name]!r} is too large")
    if positive and value <= 0:
        raise Invalid(name, f"{record[name]!r} must be more than zero")
    return value, places


def money_text(record: Mapping[str, Any], name: str, currency: str | None = None) -> str:
    """An amount checked as `amount` checks it, as written: already the text COPY takes."""
    amount(record, name, currency)
    return record[name]  # type: ignore[no-any-return]


def currency_code(record: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = text(record, name, required)
    if value is None:
        return None
    if not _CURRENCY.fullmatch(value):
        raise Invalid(name, f"{value!r} is not an ISO 4217 currency code (USD, EUR, JPY)")
    if not held_to_cents(value):
        raise Invalid(name, f"{value} has {minor_unit(value)} decimals; the ledger holds at most two")
    return value


def json_type(value: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
        type(value), "an object" if isinstance(value, dict) else "null"
    )


def shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json_type(value)
