"""Which way a policy change points, variable by variable (approvals/policy_direction.py): what widens power
waits for a second person, what narrows it applies at once. Pure: no database."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.config import ApprovalSettings
from approvals.policy_direction import split, widens

A, B, C = "U0FIN0001", "U0FIN0002", "U0FIN0003"


def policy(**values: str) -> ApprovalSettings:
    return ApprovalSettings.from_env({f"BILLSLEUTH_{name}": value for name, value in values.items()})


WIDENING: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("APPROVERS", {"APPROVERS": A}, {"APPROVERS": f"{A},{B}"}),
    ("APPROVERS", {"APPROVERS": f"{A},{B}"}, {"APPROVERS": f"{A},{C}"}),  # one out, another in: still wider
    ("SUPPORT", {}, {"SUPPORT": C}),
    ("DAILY_CREDIT_LIMIT", {"DAILY_CREDIT_LIMIT": "5000"}, {"DAILY_CREDIT_LIMIT": "5000.01"}),
    # per currency: a lower plain limit does not hide a higher yen one
    ("DAILY_CREDIT_LIMIT", {"DAILY_CREDIT_LIMIT": "5000,JPY:1000"}, {"DAILY_CREDIT_LIMIT": "4000,JPY:2000"}),
    # naming a currency above the plain limit it had before
    ("DAILY_CREDIT_LIMIT", {"DAILY_CREDIT_LIMIT": "5000"}, {"DAILY_CREDIT_LIMIT": "5000,EUR:6000"}),
    ("TWO_PERSON_THRESHOLD", {}, {"TWO_PERSON_THRESHOLD": "300.01"}),
    # per currency: a lower plain threshold does not hide a higher yen one
    (
        "TWO_PERSON_THRESHOLD",
        {"TWO_PERSON_THRESHOLD": "300,JPY:30000"},
        {"TWO_PERSON_THRESHOLD": "200,JPY:40000"},
    ),
    ("APPROVAL_TTL_HOURS", {}, {"APPROVAL_TTL_HOURS": "72.5"}),
    ("HOLD_MAX_DAYS", {}, {"HOLD_MAX_DAYS": "8"}),
    ("CLI_DECISIONS", {}, {"CLI_DECISIONS": "on"}),
    ("MODEL_BUDGET", {"MODEL_BUDGET": "50"}, {"MODEL_BUDGET": "50.01"}),
    ("MODEL_BUDGET", {"MODEL_BUDGET": "50"}, {}),  # no limit at all
    # a model counted cheaper than the default price lets the budget buy more
    ("MODEL_PRICES", {}, {"MODEL_PRICES": '{"gpt-4o-mini": {"input": 0.01, "output": 0.60}}'}),
    # a price removed: that model's calls could no longer be held to the budget
    ("MODEL_PRICES", {"MODEL_PRICES": '{"local": {"input": 1, "output": 1}}'}, {}),
    # issuing then creates Stripe credit notes: real money moves there
    ("BILLING_SYSTEM", {}, {"BILLING_SYSTEM": "stripe"}),
    # the same approval would send the money another way
    ("CREDIT_METHOD", {}, {"CREDIT_METHOD": "customer_balance"}),
    ("CREDIT_METHOD", {"CREDIT_METHOD": "out_of_band"}, {"CREDIT_METHOD": "refund"}),
]

NARROWING: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("APPROVERS", {"APPROVERS": f"{A},{B}"}, {"APPROVERS": A}),
    ("SUPPORT", {"SUPPORT": C}, {}),
    ("DAILY_CREDIT_LIMIT", {"DAILY_CREDIT_LIMIT": "5000,JPY:2000"}, {"DAILY_CREDIT_LIMIT": "5000,JPY:1000"}),
    ("TWO_PERSON_THRESHOLD", {}, {"TWO_PERSON_THRESHOLD": "100"}),
    ("APPROVAL_TTL_HOURS", {}, {"APPROVAL_TTL_HOURS": "0.5"}),
    ("HOLD_MAX_DAYS", {}, {"HOLD_MAX_DAYS": "1"}),
    ("CLI_DECISIONS", {"CLI_DECISIONS": "on"}, {}),
    ("MODEL_BUDGET", {}, {"MODEL_BUDGET": "10"}),  # a limit where there was none
    ("MODEL_BUDGET", {"MODEL_BUDGET": "50"}, {"MODEL_BUDGET": "10"}),
    ("MODEL_PRICES", {}, {"MODEL_PRICES": '{"local": {"input": 1, "output": 1}}'}),  # a model now counted
    ("MODEL_PRICES", {}, {"MODEL_PRICES": '{"gpt-4o-mini": {"input": 1, "output": 1}}'}),  # dearer
    ("BILLING_SYSTEM", {"BILLING_SYSTEM": "stripe"}, {}),  # back to our own rows: nothing leaves for Stripe
]


@pytest.mark.parametrize(("name", "old", "new"), WIDENING)
def test_a_change_that_gives_anyone_more_power_widens(
    name: str, old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert widens(f"BILLSLEUTH_{name}", policy(**old), policy(**new))
    narrowing, widening = split(policy(**old), policy(**new))
    assert [c.variable for c in widening] == [f"BILLSLEUTH_{name}"] and narrowing == []


@pytest.mark.parametrize(("name", "old", "new"), NARROWING)
def test_a_change_that_takes_power_away_narrows(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    assert not widens(f"BILLSLEUTH_{name}", policy(**old), policy(**new))
    narrowing, widening = split(policy(**old), policy(**new))
    assert [c.variable for c in narrowing] == [f"BILLSLEUTH_{name}"] and widening == []


def test_a_mixed_proposal_splits_and_the_same_meaning_is_no_change() -> None:
    old = policy(APPROVERS=f"{A},{B}", HOLD_MAX_DAYS="7", MODEL_BUDGET="50.00")
    new = policy(APPROVERS=f"{B},{A}", HOLD_MAX_DAYS="3", CLI_DECISIONS="on", MODEL_BUDGET="50")
    narrowing, widening = split(old, new)
    assert [(c.variable, c.stored, c.proposed) for c in narrowing] == [("BILLSLEUTH_HOLD_MAX_DAYS", "7", "3")]
    assert [(c.variable, c.stored, c.proposed) for c in widening] == [
        ("BILLSLEUTH_CLI_DECISIONS", "off", "on")
    ]
