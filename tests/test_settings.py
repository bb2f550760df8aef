"""Every settings model on the one typed base: defaults, one-line errors naming the variable, and secrets
that never show — in a repr, a dump, or `billsleuth doctor`'s output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.graph.configuration import Configuration, ConfigurationError
from approvals.config import ApprovalSettings
from bot.config import SlackConfigError, SlackSettings
from engine.db import DatabaseSettings
from engine.logcontext import LogSettings
from engine.settings import EnvSettings, SettingsError
from tests.cli import billsleuth

SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-secret-bot-token",
    "SLACK_APP_TOKEN": "xapp-secret-app-token",
    "SLACK_SIGNING_SECRET": "secret-signing-secret",
    "OPENAI_API_KEY": "sk-secret-openai-key",
    "DATABASE_URL": "postgresql://billsleuth:secret-db-password@127.0.0.1:1/billing",
}


def test_defaults_when_nothing_is_set() -> None:
    slack = SlackSettings.from_env({})
    assert (slack.bot_token.get_secret_value(), slack.api_url, slack.port) == (
        "",
        "https://slack.com/api/",
        3000,
    )
    assert ApprovalSettings.from_env({}) == ApprovalSettings()
    config = Configuration.from_env({})
    assert (config.investigator, config.model, config.api_key, config.max_steps) == (
        "offline",
        "gpt-4o-mini",
        None,
        12,
    )
    assert (config.max_tokens, config.request_timeout_s, config.max_retries) == (1200, 30.0, 2)
    database = DatabaseSettings.from_env({})
    assert (database.url, database.home) == (None, Path("var"))
    assert LogSettings.from_env({}).format == "text"


def test_blank_means_unset_and_values_are_trimmed() -> None:
    blank = {"PORT": "  ", "SLACK_BOT_TOKEN": " xoxb-1 ", "BILLSLEUTH_INVESTIGATOR": "", "DATABASE_URL": " "}
    assert SlackSettings.from_env(blank).port == 3000
    assert SlackSettings.from_env(blank).bot_token.get_secret_value() == "xoxb-1"
    assert Configuration.from_env(blank).investigator == "offline"
    assert DatabaseSettings.from_env(blank).url is None


def test_only_from_env_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLSLEUTH_APPROVERS", "U0FIN0001")
    monkeypatch.setenv("BILLSLEUTH_MODEL", "from-the-shell")
    assert ApprovalSettings().approvers == frozenset()  # what a test builds is what it gets
    assert ApprovalSettings.from_env().approvers == frozenset({"U0FIN0001"})
    assert Configuration().model == "gpt-4o-mini"
    assert Configuration.from_env().model == "from-the-shell"


def test_the_investigator_flag_outranks_the_environment() -> None:
    env = {"OPENAI_API_KEY": "sk-1"}
    assert Configuration.from_env(env).investigator == "llm"  # a key chooses the model
    assert Configuration.from_env(env, investigator="offline").investigator == "offline"
    with pytest.raises(ConfigurationError, match=r"^BILLSLEUTH_INVESTIGATOR=llm needs OPENAI_API_KEY$"):
        Configuration.from_env({}, investigator="llm")


@pytest.mark.parametrize(
    ("model", "env", "error", "message"),
    [
        (
            SlackSettings,
            {"PORT": "70000"},
            SlackConfigError,
            "PORT must be a number from 0 to 65535, got '70000'",
        ),
        (
            SlackSettings,
            {"BILLSLEUTH_SWEEP_CHANNEL": "#billing"},
            SlackConfigError,
            "BILLSLEUTH_SWEEP_CHANNEL must be a channel id like C0123ABCD, got '#billing'",
        ),
        (
            SlackSettings,
            {"BILLSLEUTH_SWEEP_HOUR": "24"},
            SlackConfigError,
            "BILLSLEUTH_SWEEP_HOUR must be a UTC hour from 0 to 23, got '24'",
        ),
        (
            SlackSettings,
            {"SLACK_API_URL": "ftp://x"},
            SlackConfigError,
            "SLACK_API_URL must start with http:// or https://, got 'ftp://x'",
        ),
        (
            Configuration,
            {"BILLSLEUTH_MAX_TOKENS": "lots"},
            ConfigurationError,
            "BILLSLEUTH_MAX_TOKENS must be a whole number, got 'lots'",
        ),
        (
            Configuration,
            {"BILLSLEUTH_MODEL_TIMEOUT": "0"},
            ConfigurationError,
            "BILLSLEUTH_MODEL_TIMEOUT must be at least 1, got 0",
        ),
        (
            Configuration,
            {"BILLSLEUTH_INVESTIGATOR": "GPT"},
            ConfigurationError,
            "BILLSLEUTH_INVESTIGATOR must be offline or llm, got 'gpt'",
        ),
        (
            ApprovalSettings,
            {"BILLSLEUTH_HOLD_MAX_DAYS": "1.5"},
            SettingsError,
            "BILLSLEUTH_HOLD_MAX_DAYS must be a whole number of days above zero, got '1.5'",
        ),
        (
            ApprovalSettings,
            {"BILLSLEUTH_CLI_DECISIONS": "yes"},
            SettingsError,
            "BILLSLEUTH_CLI_DECISIONS must be on or off, got 'yes'",
        ),
        (
            LogSettings,
            {"BILLSLEUTH_LOG_FORMAT": "xml"},
            SettingsError,
            "BILLSLEUTH_LOG_FORMAT must be text or json, got 'xml'",
        ),
    ],
)
def test_a_bad_value_is_the_same_one_line_error(
    model: type[EnvSettings], env: dict[str, str], error: type[SettingsError], message: str
) -> None:
    with pytest.raises(error) as raised:
        model.from_env(env)
    assert str(raised.value) == message
    assert isinstance(raised.value, SettingsError)  # one family: a caller catches them all at once


def test_a_wrong_type_from_code_is_one_line_naming_the_variable() -> None:
    with pytest.raises(SlackConfigError, match=r"^SLACK_BOT_TOKEN: ") as raised:
        SlackSettings(bot_token=3)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


def test_settings_are_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):  # shared by every task: nobody may change them
        Configuration().model = "other"  # type: ignore[misc]


def test_secrets_never_show_in_a_repr_or_a_dump() -> None:
    shown = [
        SlackSettings.from_env(SECRETS),
        Configuration.from_env(SECRETS),
        DatabaseSettings.from_env(SECRETS),
    ]
    for settings in shown:
        for text in (repr(settings), str(settings), settings.model_dump_json()):
            assert not [value for value in SECRETS.values() if value in text], text
    assert shown[0].bot_token.get_secret_value() == SECRETS["SLACK_BOT_TOKEN"]  # still there for the client


def test_doctor_prints_no_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    env.update(SECRETS, SLACK_API_URL="http://127.0.0.1:1/api/", OPENAI_BASE_URL="http://127.0.0.1:1/v1")
    done = billsleuth("doctor", env=env, cwd=tmp_path)
    assert done.returncode == 1  # nothing it points at answers
    assert "database" in done.stdout and "slack" in done.stdout and "log format: text" in done.stdout
    assert not [value for value in SECRETS.values() if value in done.stdout + done.stderr], done.stdout
