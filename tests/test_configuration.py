"""The investigator's configuration from the environment: defaults, choices, one-line errors."""

from __future__ import annotations

import pytest

from agent.configuration import Configuration, ConfigurationError

VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "BILLSLEUTH_INVESTIGATOR",
    "BILLSLEUTH_MODEL",
    "BILLSLEUTH_MAX_STEPS",
    "BILLSLEUTH_MODEL_TIMEOUT",
    "BILLSLEUTH_MODEL_RETRIES",
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
    config = Configuration.from_env()
    assert (config.request_timeout_s, config.max_retries, config.max_steps) == (5.0, 0, 4)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("BILLSLEUTH_INVESTIGATOR", "gpt", "must be offline or llm"),
        ("BILLSLEUTH_MAX_STEPS", "0", "BILLSLEUTH_MAX_STEPS must be at least 1"),
        ("BILLSLEUTH_MODEL_RETRIES", "-1", "BILLSLEUTH_MODEL_RETRIES must be at least 0"),
        ("BILLSLEUTH_MODEL_TIMEOUT", "soon", "BILLSLEUTH_MODEL_TIMEOUT must be a whole number"),
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        Configuration.from_env()


def test_llm_without_a_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLSLEUTH_INVESTIGATOR", "llm")
    with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY"):
        Configuration.from_env()
