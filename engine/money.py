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
    """Two decimals, no currency symbol: "124.02"."""
    return f"{money(amount):.2f}"


def total(amounts: Iterable[Decimal]) -> Decimal:
    """Sum Decimals exactly and round once."""
    return money(sum(amounts, ZERO))
