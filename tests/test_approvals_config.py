"""ApprovalSettings: environment parsing, defaults, and one-line errors that name the variable."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from approvals.config import ApprovalSettings, SettingsError


def test_defaults_when_nothing_is_set() -> None:
    settings = ApprovalSettings.from_env({})
    assert settings.approvers == frozenset()  # nobody can approve until someone is named
    assert settings.two_person_threshold == Decimal("300.00")
    assert settings.daily_credit_limit == Decimal("5000.00")
    assert settings.approval_ttl_hours == 72


def test_values_from_the_environment() -> None:
    settings = ApprovalSettings.from_env(
        {
            "BILLSLEUTH_APPROVERS": " U012AB3CD, W0ENTERPRISE ,,",
            "BILLSLEUTH_TWO_PERSON_THRESHOLD": "250",
            "BILLSLEUTH_DAILY_CREDIT_LIMIT": "1000.5",
            "BILLSLEUTH_APPROVAL_TTL_HOURS": "24",
        }
    )
    assert settings.approvers == frozenset({"U012AB3CD", "W0ENTERPRISE"})
    assert settings.two_person_threshold == Decimal("250.00")
    assert settings.daily_credit_limit == Decimal("1000.50")
    assert settings.approval_ttl_hours == 24


def test_the_approval_time_takes_decimal_hours() -> None:
    settings = ApprovalSettings.from_env({"BILLSLEUTH_APPROVAL_TTL_HOURS": "0.50"})
    assert settings.approval_ttl == timedelta(minutes=30)
    assert settings.as_env()["BILLSLEUTH_APPROVAL_TTL_HOURS"] == "0.5"
    whole = ApprovalSettings(approval_ttl_hours=Decimal("72.0"))
    assert whole.as_env()["BILLSLEUTH_APPROVAL_TTL_HOURS"] == "72"


def test_blank_values_mean_the_default() -> None:
    settings = ApprovalSettings.from_env(
        {"BILLSLEUTH_TWO_PERSON_THRESHOLD": "  ", "BILLSLEUTH_APPROVAL_TTL_HOURS": ""}
    )
    assert (settings.two_person_threshold, settings.approval_ttl_hours) == (Decimal("300.00"), 72)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BILLSLEUTH_APPROVERS", "U012AB3CD,alice"),
        ("BILLSLEUTH_APPROVERS", "u012ab3cd"),
        ("BILLSLEUTH_TWO_PERSON_THRESHOLD", "three hundred"),
        ("BILLSLEUTH_TWO_PERSON_THRESHOLD", "0"),
        ("BILLSLEUTH_TWO_PERSON_THRESHOLD", "300.001"),
        ("BILLSLEUTH_DAILY_CREDIT_LIMIT", "-1"),
        ("BILLSLEUTH_DAILY_CREDIT_LIMIT", "NaN"),
        ("BILLSLEUTH_APPROVAL_TTL_HOURS", "0"),
        ("BILLSLEUTH_APPROVAL_TTL_HOURS", "1.5h"),
        ("BILLSLEUTH_APPROVAL_TTL_HOURS", "-3"),
        ("BILLSLEUTH_BILLING_SYSTEM", "quickbooks"),
        ("BILLSLEUTH_CREDIT_METHOD", "cheque"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as error:
        ApprovalSettings.from_env({variable: value})
    message = str(error.value)
    assert message.startswith(variable) and "\n" not in message


def test_explicit_values_for_tests_are_checked_too() -> None:
    settings = ApprovalSettings(approvers=["U0ALICE"], two_person_threshold=Decimal("100"))  # type: ignore[arg-type]
    assert settings.approvers == frozenset({"U0ALICE"}) and settings.two_person_threshold == Decimal("100.00")
    with pytest.raises(SettingsError, match="BILLSLEUTH_TWO_PERSON_THRESHOLD"):
        ApprovalSettings(two_person_threshold=300.0)  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="BILLSLEUTH_DAILY_CREDIT_LIMIT"):
        ApprovalSettings(daily_credit_limit=Decimal("-0.01"))


def test_a_zero_daily_limit_freezes_credits() -> None:
    assert ApprovalSettings(daily_credit_limit=Decimal("0")).daily_credit_limit == Decimal("0.00")


def test_a_plain_daily_limit_holds_for_each_currency() -> None:
    settings = ApprovalSettings.from_env({"BILLSLEUTH_DAILY_CREDIT_LIMIT": "1000.00"})
    assert [settings.daily_limit_for(c) for c in ("USD", "EUR", "JPY")] == [Decimal("1000.00")] * 3


def test_a_per_currency_daily_limit() -> None:
    settings = ApprovalSettings.from_env(
        {"BILLSLEUTH_DAILY_CREDIT_LIMIT": " 5000.00, jpy:750000 ,EUR:4000.5"}
    )
    assert settings.daily_credit_limit == Decimal("5000.00")  # every currency not named
    assert settings.daily_limit_for("USD") == Decimal("5000.00")
    assert settings.daily_limit_for("JPY") == Decimal("750000")
    assert settings.daily_limit_for("EUR") == Decimal("4000.50")
    # Naming currencies only keeps the default for the others.
    only_yen = ApprovalSettings.from_env({"BILLSLEUTH_DAILY_CREDIT_LIMIT": "JPY:750000"})
    assert (only_yen.daily_limit_for("USD"), only_yen.daily_limit_for("JPY")) == (
        Decimal("5000.00"),
        Decimal("750000"),
    )


@pytest.mark.parametrize(
    "value",
    [
        "5000.00,JPY:750000.50",  # a fraction of a yen
        "5000.00,KWD:100",  # three decimals: the ledger cannot hold it
        "5000.00,4000.00",  # two defaults
        "JPY:1,JPY:2",  # one currency twice
        "5000.00,,JPY:1",  # an empty entry
        "5000.00,YE:1",  # not an ISO code
        "5000.00,JPY:",  # no amount
        "5000.00,EUR:-1",
    ],
)
def test_a_bad_per_currency_limit_is_one_line_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingsError) as error:
        ApprovalSettings.from_env({"BILLSLEUTH_DAILY_CREDIT_LIMIT": value})
    message = str(error.value)
    assert message.startswith("BILLSLEUTH_DAILY_CREDIT_LIMIT") and "\n" not in message


def test_explicit_per_currency_limits_are_checked_too() -> None:
    settings = ApprovalSettings(currency_daily_limits={"jpy": Decimal("750000")})
    assert settings.daily_limit_for("JPY") == Decimal("750000")
    with pytest.raises(SettingsError, match="BILLSLEUTH_DAILY_CREDIT_LIMIT"):
        ApprovalSettings(currency_daily_limits={"JPY": Decimal("0.5")})


def test_a_zero_plain_limit_with_named_currencies_stays_zero() -> None:
    settings = ApprovalSettings.from_env({"BILLSLEUTH_DAILY_CREDIT_LIMIT": "0,JPY:1000"})
    assert (settings.daily_limit_for("USD"), settings.daily_limit_for("JPY")) == (
        Decimal("0.00"),
        Decimal("1000"),
    )


def test_the_two_person_threshold_takes_the_daily_limits_syntax() -> None:
    settings = ApprovalSettings.from_env({"BILLSLEUTH_TWO_PERSON_THRESHOLD": "300.00, jpy:30000"})
    assert settings.two_person_threshold_for("USD") == Decimal("300.00")  # every currency not named
    assert settings.two_person_threshold_for("jpy") == Decimal("30000")
    assert settings.as_env()["BILLSLEUTH_TWO_PERSON_THRESHOLD"] == "300.00,JPY:30000.00"
    assert ApprovalSettings.from_env(settings.as_env()) == settings  # what the database stores reads back
    only_yen = ApprovalSettings.from_env({"BILLSLEUTH_TWO_PERSON_THRESHOLD": "JPY:30000"})
    assert only_yen.two_person_threshold_for("EUR") == Decimal("300.00")  # the default for the others


@pytest.mark.parametrize("value", ["300.00,JPY:30000.5", "300.00,JPY:0", "0", "300.00,200.00", "JPY:1,JPY:2"])
def test_a_bad_per_currency_threshold_is_one_line_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingsError) as error:
        ApprovalSettings.from_env({"BILLSLEUTH_TWO_PERSON_THRESHOLD": value})
    message = str(error.value)
    assert message.startswith("BILLSLEUTH_TWO_PERSON_THRESHOLD") and "\n" not in message
