"""Approval settings from the environment (DESIGN §3), validated up front.

A bad value fails at start-up with one line naming the variable, rather than deep inside a decision.
Tests build `ApprovalSettings(...)` directly with explicit values; the same checks apply.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

APPROVERS = "BILLSLEUTH_APPROVERS"
TWO_PERSON_THRESHOLD = "BILLSLEUTH_TWO_PERSON_THRESHOLD"
DAILY_CREDIT_LIMIT = "BILLSLEUTH_DAILY_CREDIT_LIMIT"
APPROVAL_TTL_HOURS = "BILLSLEUTH_APPROVAL_TTL_HOURS"
HOLD_MAX_DAYS = "BILLSLEUTH_HOLD_MAX_DAYS"

DEFAULT_TWO_PERSON_THRESHOLD = Decimal("300.00")
DEFAULT_DAILY_CREDIT_LIMIT = Decimal("5000.00")
DEFAULT_APPROVAL_TTL_HOURS = 72
DEFAULT_HOLD_MAX_DAYS = 7

# Slack user IDs: U… for workspace users, W… for Enterprise Grid users; upper-case letters and digits.
SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")


class SettingsError(ValueError):
    """A configuration value is unusable; the message names the variable."""


def is_slack_user_id(value: str) -> bool:
    return SLACK_USER_ID.fullmatch(value) is not None


def at_most_cents(amount: Decimal) -> bool:
    """True when the amount has no more than two decimals (exactly as written: 1.50 yes, 1.505 no)."""
    exponent = amount.as_tuple().exponent
    return isinstance(exponent, int) and exponent >= -2


def _amount(variable: str, value: object, *, allow_zero: bool) -> Decimal:
    if isinstance(value, float | bool) or not isinstance(value, Decimal | int | str):
        raise SettingsError(
            f"{variable} must be a Decimal or a string like 300.00, not {type(value).__name__}"
        )
    try:
        amount = Decimal(str(value).strip()) if isinstance(value, str) else Decimal(value)
    except InvalidOperation:
        raise SettingsError(f"{variable} must be an amount like 300.00, got {value!r}") from None
    floor = "zero or more" if allow_zero else "more than zero"
    if not amount.is_finite() or amount < 0 or (amount == 0 and not allow_zero) or not at_most_cents(amount):
        raise SettingsError(f"{variable} must be {floor} with at most two decimals, got {value!r}")
    return amount.quantize(Decimal("0.01"))


def _whole(variable: str, value: object, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingsError(f"{variable} must be a whole number of {unit}, not {type(value).__name__}")
    text = str(value).strip()
    if not text.isdigit() or int(text) <= 0:
        raise SettingsError(f"{variable} must be a whole number of {unit} above zero, got {value!r}")
    return int(text)


def _hours(variable: str, value: object) -> int:
    return _whole(variable, value, "hours")


def _days(variable: str, value: object) -> int:
    return _whole(variable, value, "days")


def _approvers(variable: str, value: str | Iterable[str]) -> frozenset[str]:
    entries = value.split(",") if isinstance(value, str) else list(value)
    ids = [entry.strip() for entry in entries if entry.strip()]
    for user_id in ids:
        if not is_slack_user_id(user_id):
            raise SettingsError(f"{variable}: {user_id!r} is not a Slack user ID (like U012AB3CD)")
    return frozenset(ids)


@dataclass(frozen=True)
class ApprovalSettings:
    """Who may approve, when two people must, how much may leave per UTC day, how long a draft lives, and
    how long an approved note may be held by the daily limit."""

    approvers: frozenset[str] = frozenset()  # empty: nobody can approve
    two_person_threshold: Decimal = DEFAULT_TWO_PERSON_THRESHOLD
    daily_credit_limit: Decimal = DEFAULT_DAILY_CREDIT_LIMIT
    approval_ttl_hours: int = DEFAULT_APPROVAL_TTL_HOURS
    hold_max_days: int = DEFAULT_HOLD_MAX_DAYS  # an approved note held by the daily limit is cancelled after

    def __post_init__(self) -> None:
        # Normalise and validate whatever the caller passed (a list of IDs, "300" as a string, …).
        set_ = object.__setattr__
        set_(self, "approvers", _approvers(APPROVERS, self.approvers))
        set_(
            self,
            "two_person_threshold",
            _amount(TWO_PERSON_THRESHOLD, self.two_person_threshold, allow_zero=False),
        )
        set_(
            self, "daily_credit_limit", _amount(DAILY_CREDIT_LIMIT, self.daily_credit_limit, allow_zero=True)
        )
        set_(self, "approval_ttl_hours", _hours(APPROVAL_TTL_HOURS, self.approval_ttl_hours))
        set_(self, "hold_max_days", _days(HOLD_MAX_DAYS, self.hold_max_days))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApprovalSettings:
        env = os.environ if environ is None else environ

        def raw(variable: str) -> str:
            return env.get(variable, "").strip()  # set but blank means "use the default"

        threshold, limit, ttl = raw(TWO_PERSON_THRESHOLD), raw(DAILY_CREDIT_LIMIT), raw(APPROVAL_TTL_HOURS)
        hold = raw(HOLD_MAX_DAYS)
        return cls(
            approvers=_approvers(APPROVERS, raw(APPROVERS)),
            two_person_threshold=(
                _amount(TWO_PERSON_THRESHOLD, threshold, allow_zero=False)
                if threshold
                else DEFAULT_TWO_PERSON_THRESHOLD
            ),
            daily_credit_limit=_amount(DAILY_CREDIT_LIMIT, limit, allow_zero=True)
            if limit
            else DEFAULT_DAILY_CREDIT_LIMIT,
            approval_ttl_hours=_hours(APPROVAL_TTL_HOURS, ttl) if ttl else DEFAULT_APPROVAL_TTL_HOURS,
            hold_max_days=_days(HOLD_MAX_DAYS, hold) if hold else DEFAULT_HOLD_MAX_DAYS,
        )
