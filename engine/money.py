"""Money: Decimal only, two places, ROUND_HALF_UP, rounded once at the end of a computation.

A float is refused outright: by the time a float reaches us it is already inexact, and converting it
would hide the caller's mistake instead of surfacing it where it was made.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")
ZERO = Decimal("0.00")


def money(value: Decimal | int | str) -> Decimal:
    """Normalise an amount to two decimal places (HALF_UP). Floats raise TypeError."""
    if type(value) is Decimal and value.is_finite():  # the rules' hot path: skip the checks below
        return value.quantize(CENT, rounding=ROUND_HALF_UP)
    if isinstance(value, float):
        raise TypeError(f"money cannot be a float: {value!r}; pass a string or a Decimal")
    if isinstance(value, bool) or not isinstance(value, Decimal | int | str):
        raise TypeError(f"money must be a Decimal, int or str, not {type(value).__name__}")
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"not an amount: {value!r}") from None
    if not amount.is_finite():
        raise ValueError(f"not an amount: {value!r}")
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def prorate(amount: Decimal, used_days: int, period_days: int) -> Decimal:
    """amount × used_days / period_days, rounded once at the end (never a rounded daily rate)."""
    if period_days <= 0:
        raise ValueError("period_days must be positive")
    if isinstance(amount, float):
        raise TypeError(f"money cannot be a float: {amount!r}")
    return money(Decimal(amount) * used_days / period_days)


def fmt(amount: Decimal) -> str:
    """Two decimals, no currency: "124.02" (JSON and places that show the currency apart; see fmt_amount)."""
    return f"{money(amount):.2f}"


def total(amounts: Iterable[Decimal]) -> Decimal:
    """Sum Decimals exactly and round once."""
    return money(sum(amounts, ZERO))


# ISO 4217 minor units: how many decimals an amount in the currency may have. Most currencies have two;
# these are the exceptions still in circulation. The ledger holds amounts as NUMERIC(12,2), so a
# three-decimal currency cannot be held exactly at all and callers refuse it (see `held_to_cents`).
ZERO_DECIMAL_CURRENCIES = frozenset(
    {"BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF"}
    | {"XOF", "XPF"}
)
THREE_DECIMAL_CURRENCIES = frozenset({"BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"})
FOUR_DECIMAL_CURRENCIES = frozenset({"CLF", "UYW"})
DEFAULT_MINOR_UNIT = 2


def minor_unit(currency: str) -> int:
    """The number of decimals an amount in `currency` has (ISO 4217): JPY 0, USD 2, KWD 3."""
    code = currency.strip().upper()
    if code in ZERO_DECIMAL_CURRENCIES:
        return 0
    if code in THREE_DECIMAL_CURRENCIES:
        return 3
    if code in FOUR_DECIMAL_CURRENCIES:
        return 4
    return DEFAULT_MINOR_UNIT


def held_to_cents(currency: str) -> bool:
    """Whether the ledger's two-decimal amounts can hold every amount of the currency exactly."""
    return minor_unit(currency) <= 2


def expressible(amount: Decimal, currency: str) -> bool:
    """Whether `amount` is a whole number of the currency's minor units (no fraction of a yen)."""
    places = minor_unit(currency)
    return amount == amount.quantize(Decimal(1).scaleb(-places))


def fmt_amount(amount: Decimal, currency: str) -> str:
    """An amount with its currency, in the currency's own decimals: "124.02 USD", "12000 JPY".

    Never rounds to hide a fraction the currency cannot hold: such an amount (a JPY total with cents) is
    shown with the two decimals the ledger holds, so whoever reads it sees what is wrong.
    """
    value = money(amount)
    places = minor_unit(currency) if expressible(value, currency) else 2
    return f"{value:.{min(places, 2)}f} {currency}"
