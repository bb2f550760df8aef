"""The investigator's configuration from the environment: defaults, choices, one-line errors."""

from __future__ import annotations

import pytest

from agent.graph.configuration import Configuration, ConfigurationError

VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "BILLSLEUTH_INVESTIGATOR",
    "BILLSLEUTH_MODEL",
    "BILLSLEUTH_MAX_STEPS",
    "BILLSLEUTH_MODEL_TIMEOUT",
    "BILLSLEUTH_MODEL_RETRIES",
    "BILLSLEUTH_CASE_TIMEOUT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_offline_without_a_key_and_llm_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Configuration.from_env().investigator == "offline"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = Configuration.from_env()
    assert (config.investigator, config.model, config.request_timeout_s, config.max_retries) == (
        "llm",
        "gpt-4o-mini",
        30.0,
        2,
    )
    monkeypatch.setenv("BILLSLEUTH_INVESTIGATOR", "offline")
    assert Configuration.from_env().investigator == "offline"


def test_bounds_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLSLEUTH_MODEL_TIMEOUT", "5")
    monkeypatch.setenv("BILLSLEUTH_MODEL_RETRIES", "0")
    monkeypatch.setenv("BILLSLEUTH_MAX_STEPS", "4")
    monkeypatch.setenv("BILLSLEUTH_CASE_TIMEOUT", "90.5")
    config = Configuration.from_env()
    assert (config.request_timeout_s, config.max_retries, config.max_steps) == (5.0, 0, 4)
    assert config.case_timeout_s == 90.5


def test_a_case_may_run_two_minutes_unless_told_otherwise() -> None:
    assert Configuration.from_env().case_timeout_s == 120.0
    assert Configuration(case_timeout_s=0.2).case_timeout_s == 0.2  # a test's fraction of a second


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("BILLSLEUTH_INVESTIGATOR", "gpt", "must be offline or llm"),
        ("BILLSLEUTH_MAX_STEPS", "0", "BILLSLEUTH_MAX_STEPS must be at least 1"),
        ("BILLSLEUTH_MODEL_RETRIES", "-1", "BILLSLEUTH_MODEL_RETRIES must be at least 0"),
        ("BILLSLEUTH_MODEL_TIMEOUT", "soon", "BILLSLEUTH_MODEL_TIMEOUT must be a whole number"),
        ("BILLSLEUTH_CASE_TIMEOUT", "2m", "BILLSLEUTH_CASE_TIMEOUT must be a number of seconds like 120"),
        ("BILLSLEUTH_CASE_TIMEOUT", "0", "BILLSLEUTH_CASE_TIMEOUT must be a number of seconds above zero"),
        ("BILLSLEUTH_CASE_TIMEOUT", "-5", "BILLSLEUTH_CASE_TIMEOUT must be a number of seconds above zero"),
        ("BILLSLEUTH_CASE_TIMEOUT", "inf", "BILLSLEUTH_CASE_TIMEOUT must be a number of seconds above zero"),
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message) as refused:
        Configuration.from_env()
    assert "\n" not in str(refused.value)


def test_a_case_time_limit_set_in_code_must_be_above_zero() -> None:
    with pytest.raises(ConfigurationError, match="BILLSLEUTH_CASE_TIMEOUT must be a number of seconds above"):
        Configuration(case_timeout_s=0)


def test_llm_without_a_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLSLEUTH_INVESTIGATOR", "llm")
    with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY"):
        Configuration.from_env()
