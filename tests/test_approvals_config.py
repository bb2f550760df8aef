"""ApprovalSettings: environment parsing, defaults, and one-line errors that name the variable."""

from __future__ import annotations

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
        ("BILLSLEUTH_APPROVAL_TTL_HOURS", "1.5"),
        ("BILLSLEUTH_APPROVAL_TTL_HOURS", "-3"),
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
