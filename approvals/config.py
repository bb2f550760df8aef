"""Approval settings from the environment (DESIGN §3), validated up front.

A bad value fails at start-up with one line naming the variable, rather than deep inside a decision.
Tests build `ApprovalSettings(...)` directly with explicit values; the same checks apply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from approvals.model_prices import BUDGET, PRICES, ModelPrice, parse_prices, parse_usd, prices_text
from engine.money import expressible, held_to_cents, minor_unit
from engine.settings import EnvSettings, SettingsError

APPROVERS = "BILLSLEUTH_APPROVERS"
TWO_PERSON_THRESHOLD = "BILLSLEUTH_TWO_PERSON_THRESHOLD"
DAILY_CREDIT_LIMIT = "BILLSLEUTH_DAILY_CREDIT_LIMIT"
APPROVAL_TTL_HOURS = "BILLSLEUTH_APPROVAL_TTL_HOURS"
HOLD_MAX_DAYS = "BILLSLEUTH_HOLD_MAX_DAYS"
SUPPORT = "BILLSLEUTH_SUPPORT"
CLI_DECISIONS = "BILLSLEUTH_CLI_DECISIONS"
MODEL_BUDGET = BUDGET  # BILLSLEUTH_MODEL_BUDGET: model spend per calendar month (USD)
MODEL_PRICES = PRICES  # BILLSLEUTH_MODEL_PRICES: what the budget counts a model's tokens at
BILLING_SYSTEM = (
    "BILLSLEUTH_BILLING_SYSTEM"  # ledger: an issued note is our row; stripe: a Stripe credit note
)
CREDIT_METHOD = "BILLSLEUTH_CREDIT_METHOD"  # where the paid part of a Stripe credit note goes
# Every variable of the policy in force, in the order `policy show` and doctor list them.
POLICY_VARIABLES = (
    APPROVERS,
    SUPPORT,
    TWO_PERSON_THRESHOLD,
    DAILY_CREDIT_LIMIT,
    APPROVAL_TTL_HOURS,
    HOLD_MAX_DAYS,
    CLI_DECISIONS,
    MODEL_BUDGET,
    MODEL_PRICES,
    BILLING_SYSTEM,
    CREDIT_METHOD,
)
ON, OFF = "on", "off"
LEDGER, STRIPE = "ledger", "stripe"
BILLING_SYSTEMS = (LEDGER, STRIPE)
# refund: to the invoice's original payment; customer_balance: deducted from the customer's next invoices;
# out_of_band: paid back outside Stripe (recorded on the credit note only).
CREDIT_METHODS = ("refund", "customer_balance", "out_of_band")

DEFAULT_TWO_PERSON_THRESHOLD = Decimal("300.00")
DEFAULT_DAILY_CREDIT_LIMIT = Decimal("5000.00")
DEFAULT_APPROVAL_TTL_HOURS = 72
DEFAULT_HOLD_MAX_DAYS = 7

# Slack user IDs: U… for workspace users, W… for Enterprise Grid users; upper-case letters and digits.
SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")
CURRENCY_CODE = re.compile(r"[A-Z]{3}")  # ISO 4217 alphabetic code
SLACKBOT = "USLACKBOT"  # Slack's own bot has a user-shaped id; bot ids (B…) are not user ids at all


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


def _currency_limit(
    variable: str, currency: object, value: object, *, allow_zero: bool = True
) -> tuple[str, Decimal]:
    """One `CODE:AMOUNT` entry of a per-currency amount (the daily limit, the two-person threshold): a
    currency the ledger can hold, an amount in it."""
    code = str(currency).strip().upper()
    if not CURRENCY_CODE.fullmatch(code):
        raise SettingsError(f"{variable}: {currency!r} is not an ISO 4217 currency code (like JPY)")
    if not held_to_cents(code):
        raise SettingsError(f"{variable}: {code} has {minor_unit(code)} decimals, the ledger holds 2")
    amount = _amount(f"{variable} ({code})", value, allow_zero=allow_zero)
    if not expressible(amount, code):
        raise SettingsError(f"{variable} ({code}) must be a whole amount in {code}, got {value!r}")
    return code, amount


def _currency_limits(
    variable: str, limits: object, *, allow_zero: bool = True
) -> tuple[tuple[str, Decimal], ...]:
    pairs = limits.items() if isinstance(limits, Mapping) else limits
    if not isinstance(pairs, Iterable) or isinstance(pairs, str):
        raise SettingsError(f"{variable}: per-currency limits must be a mapping like {{'JPY': 750000}}")
    checked = [_currency_limit(variable, code, amount, allow_zero=allow_zero) for code, amount in pairs]
    codes = [code for code, _ in checked]
    if len(set(codes)) != len(codes):
        raise SettingsError(f"{variable}: a currency is named twice in {', '.join(codes)}")
    return tuple(sorted(checked))


def _per_currency(
    variable: str, text: str, fallback: Decimal, *, allow_zero: bool = True
) -> tuple[Decimal, tuple[tuple[str, Decimal], ...]]:
    """`5000.00` (every currency) or `5000.00,JPY:750000,EUR:4000` (a default and named currencies; the
    default is `fallback` when only currencies are named). The daily limit's syntax, and the threshold's."""
    default: Decimal | None = None
    named: list[tuple[str, str]] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            raise SettingsError(f"{variable} has an empty entry: {text!r}")
        if ":" in entry:
            code, _, amount = entry.partition(":")
            named.append((code, amount))
        elif default is not None:
            raise SettingsError(f"{variable} has two limits for every currency: {text!r}")
        else:
            default = _amount(variable, entry, allow_zero=allow_zero)
    named_limits = _currency_limits(variable, named, allow_zero=allow_zero)
    return (fallback if default is None else default), named_limits


def _whole(variable: str, value: object, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingsError(f"{variable} must be a whole number of {unit}, not {type(value).__name__}")
    text = str(value).strip()
    if not text.isdigit() or int(text) <= 0:
        raise SettingsError(f"{variable} must be a whole number of {unit} above zero, got {value!r}")
    return int(text)


def _hours(variable: str, value: object) -> Decimal:
    """Hours above zero; decimals allowed (0.5 is half an hour, 0.001 a few seconds for a test)."""
    if isinstance(value, float | bool) or not isinstance(value, Decimal | int | str):
        kind = type(value).__name__
        raise SettingsError(f"{variable} must be a number of hours like 72 or 0.5, not {kind}")
    try:
        hours = Decimal(str(value).strip())
    except InvalidOperation:
        raise SettingsError(f"{variable} must be a number of hours like 72 or 0.5, got {value!r}") from None
    if not hours.is_finite() or hours <= 0:
        raise SettingsError(f"{variable} must be a number of hours above zero, got {value!r}")
    # One text per value (the stored policy compares them): 72 for 72.0, 0.5 for 0.50.
    return hours.quantize(Decimal(1)) if hours == hours.to_integral_value() else hours.normalize()


def _switch(variable: str, value: object) -> bool:
    """`on` or `off` (a bool from code); anything else is a mistake worth naming, not a silent off."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in (ON, OFF):
        raise SettingsError(f"{variable} must be on or off, got {value!r}")
    return text == ON


def _one_of(variable: str, value: object, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise SettingsError(f"{variable} must be one of {', '.join(choices)}, got {value!r}")
    return text


def _approvers(variable: str, value: str | Iterable[str]) -> frozenset[str]:
    entries = value.split(",") if isinstance(value, str) else list(value)
    ids = [entry.strip() for entry in entries if entry.strip()]
    for user_id in ids:
        if user_id == SLACKBOT:
            raise SettingsError(f"{variable}: {user_id} is Slackbot; only people can be listed")
        if not is_slack_user_id(user_id):
            raise SettingsError(f"{variable}: {user_id!r} is not a Slack user ID (like U012AB3CD)")
    return frozenset(ids)


class ApprovalSettings(EnvSettings):
    """The policy: who may approve, when two people must, how much may leave per UTC day, how long a draft
    lives, how long an approved note may be held by the daily limit, who is support staff, and whether the
    CLI may decide. The database stores the one in force (approvals.policy_store)."""

    approvers: frozenset[str] = Field(frozenset(), validation_alias=APPROVERS)  # empty: nobody can approve
    two_person_threshold: Decimal = Field(DEFAULT_TWO_PERSON_THRESHOLD, validation_alias=TWO_PERSON_THRESHOLD)
    # Per-currency thresholds (`JPY:30000` in BILLSLEUTH_TWO_PERSON_THRESHOLD, the daily limit's syntax); a
    # currency not named has two_person_threshold. Code may pass a mapping.
    currency_two_person_thresholds: tuple[tuple[str, Decimal], ...] = ()
    daily_credit_limit: Decimal = Field(DEFAULT_DAILY_CREDIT_LIMIT, validation_alias=DAILY_CREDIT_LIMIT)
    # Decimals allowed: 0.5 is half an hour.
    approval_ttl_hours: Decimal = Field(
        Decimal(DEFAULT_APPROVAL_TTL_HOURS), validation_alias=APPROVAL_TTL_HOURS
    )
    # An approved note held by the daily limit longer than this is cancelled.
    hold_max_days: int = Field(DEFAULT_HOLD_MAX_DAYS, validation_alias=HOLD_MAX_DAYS)
    # Per-currency daily limits (`JPY:750000` in BILLSLEUTH_DAILY_CREDIT_LIMIT); code may pass a mapping.
    # A currency not named has daily_credit_limit.
    currency_daily_limits: tuple[tuple[str, Decimal], ...] = ()
    support: frozenset[str] = Field(frozenset(), validation_alias=SUPPORT)  # may open and read cases
    # approve/reject/cancel from the CLI: a break-glass door, shut by default
    cli_decisions: bool = Field(False, validation_alias=CLI_DECISIONS)
    # Model spend rules are policy too (issue 25 item 6): every process enforces the stored budget, whatever
    # its own environment says. None: no monthly limit. Prices: only what overrides or adds to the defaults.
    model_budget: Decimal | None = Field(None, validation_alias=MODEL_BUDGET)
    model_prices: tuple[tuple[str, ModelPrice], ...] = Field((), validation_alias=MODEL_PRICES)
    # Where an issued note goes (issue 29): our row only, or a Stripe credit note; and for Stripe, how the
    # paid part goes back. Stored policy: switching to Stripe or changing the method widens.
    billing_system: str = Field(LEDGER, validation_alias=BILLING_SYSTEM)
    credit_method: str = Field("refund", validation_alias=CREDIT_METHOD)

    @model_validator(mode="before")
    @classmethod
    def _split_per_currency(cls, data: Any) -> Any:
        """Each variable's text holds the plain amount and the named currencies' (`5000.00,JPY:750000`)."""
        if not isinstance(data, dict):
            return data
        for field, named_field, variable, fallback, allow_zero in (
            (
                "daily_credit_limit",
                "currency_daily_limits",
                DAILY_CREDIT_LIMIT,
                DEFAULT_DAILY_CREDIT_LIMIT,
                True,
            ),
            (
                "two_person_threshold",
                "currency_two_person_thresholds",
                TWO_PERSON_THRESHOLD,
                DEFAULT_TWO_PERSON_THRESHOLD,
                False,
            ),
        ):
            text = data.get(field)
            if isinstance(text, str):
                plain, named = _per_currency(variable, text, fallback, allow_zero=allow_zero)
                explicit = _currency_limits(variable, data.get(named_field, ()), allow_zero=allow_zero)
                data = {**data, field: plain, named_field: (*named, *explicit)}
        return data

    @field_validator("approvers", "support", mode="before")
    @classmethod
    def _people(cls, value: str | Iterable[str], info: ValidationInfo) -> frozenset[str]:
        return _approvers(cls.variable(info.field_name or ""), value)

    @field_validator("two_person_threshold", mode="before")
    @classmethod
    def _threshold(cls, value: object) -> Decimal:
        return _amount(TWO_PERSON_THRESHOLD, value, allow_zero=False)

    @field_validator("daily_credit_limit", mode="before")
    @classmethod
    def _daily_limit(cls, value: object) -> Decimal:
        return _amount(DAILY_CREDIT_LIMIT, value, allow_zero=True)

    @field_validator("currency_daily_limits", mode="before")
    @classmethod
    def _currency_daily_limits(cls, value: object) -> tuple[tuple[str, Decimal], ...]:
        return _currency_limits(DAILY_CREDIT_LIMIT, value)

    @field_validator("currency_two_person_thresholds", mode="before")
    @classmethod
    def _currency_thresholds(cls, value: object) -> tuple[tuple[str, Decimal], ...]:
        return _currency_limits(TWO_PERSON_THRESHOLD, value, allow_zero=False)

    @field_validator("approval_ttl_hours", mode="before")
    @classmethod
    def _ttl(cls, value: object) -> Decimal:
        return _hours(APPROVAL_TTL_HOURS, value)

    @field_validator("hold_max_days", mode="before")
    @classmethod
    def _hold(cls, value: object) -> int:
        return _whole(HOLD_MAX_DAYS, value, "days")

    @field_validator("cli_decisions", mode="before")
    @classmethod
    def _cli(cls, value: object) -> bool:
        return _switch(CLI_DECISIONS, value)

    @field_validator("billing_system", mode="before")
    @classmethod
    def _billing_system(cls, value: object) -> str:
        return _one_of(BILLING_SYSTEM, value, BILLING_SYSTEMS)

    @field_validator("credit_method", mode="before")
    @classmethod
    def _credit_method(cls, value: object) -> str:
        return _one_of(CREDIT_METHOD, value, CREDIT_METHODS)

    @field_validator("model_budget", mode="before")
    @classmethod
    def _model_budget(cls, value: object) -> Decimal | None:
        return None if value is None else parse_usd(MODEL_BUDGET, value)

    @field_validator("model_prices", mode="before")
    @classmethod
    def _model_prices(cls, value: object) -> tuple[tuple[str, ModelPrice], ...]:
        prices = parse_prices(value) if isinstance(value, str) else dict(value)  # type: ignore[call-overload]
        return tuple(sorted(prices.items()))

    @property
    def approval_ttl(self) -> timedelta:
        """How long a draft waits for its decision before it expires."""
        return timedelta(seconds=float(self.approval_ttl_hours * 3600))

    def daily_limit_for(self, currency: str) -> Decimal:
        """The credit that may be issued per UTC day in `currency`: its own limit, or the plain one."""
        return dict(self.currency_daily_limits).get(currency.strip().upper(), self.daily_credit_limit)

    def two_person_threshold_for(self, currency: str) -> Decimal:
        """The amount in `currency` from which a note needs two approvers: its own, or the plain one."""
        return dict(self.currency_two_person_thresholds).get(
            currency.strip().upper(), self.two_person_threshold
        )

    def describe_two_person_threshold(self) -> str:
        """ "300.00 per currency, JPY 30000" — for doctor and logs."""
        named = "".join(f", {code} {amount}" for code, amount in self.currency_two_person_thresholds)
        return f"{self.two_person_threshold} per currency{named}"

    def describe_daily_limit(self) -> str:
        """ "5000.00 per currency, JPY 750000" — for doctor and logs."""
        named = "".join(f", {code} {amount}" for code, amount in self.currency_daily_limits)
        return f"{self.daily_credit_limit} per currency{named}"

    def as_env(self) -> dict[str, str]:
        """Every policy variable in its canonical text form: what the database stores, what `from_env`
        reads back to equal settings, and what two policies are compared by."""
        limits = "".join(f",{code}:{amount}" for code, amount in self.currency_daily_limits)
        thresholds = "".join(f",{code}:{amount}" for code, amount in self.currency_two_person_thresholds)
        return {
            APPROVERS: ",".join(sorted(self.approvers)),
            SUPPORT: ",".join(sorted(self.support)),
            TWO_PERSON_THRESHOLD: f"{self.two_person_threshold}{thresholds}",
            DAILY_CREDIT_LIMIT: f"{self.daily_credit_limit}{limits}",
            APPROVAL_TTL_HOURS: str(self.approval_ttl_hours),
            HOLD_MAX_DAYS: str(self.hold_max_days),
            CLI_DECISIONS: ON if self.cli_decisions else OFF,
            # 50, not 50.00: one text per amount (two policies compare by it)
            MODEL_BUDGET: "" if self.model_budget is None else f"{self.model_budget.normalize():f}",
            MODEL_PRICES: prices_text(self.model_prices),
            BILLING_SYSTEM: self.billing_system,
            CREDIT_METHOD: self.credit_method,
        }
