"""Slack settings, read from the environment (DESIGN.md §3 "Environment").

Reading never fails on a missing credential: `billsleuth doctor` wants to list everything that is missing at
once. The mode that needs a credential asks for it with `require()`, which names the variable in one line.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from engine.settings import EnvSettings, SettingsError

SLACK_API_URL = "https://slack.com/api/"
DEFAULT_PORT = 3000
DEFAULT_SWEEP_HOUR = 6  # UTC hour of the daily findings digest
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,}")

Mode = Literal["http", "socket"]


class SlackConfigError(SettingsError):
    """A Slack setting is missing or malformed; the message is one line naming the variable."""


class SlackSettings(EnvSettings):
    error: ClassVar[type[SettingsError]] = SlackConfigError

    bot_token: SecretStr = Field(SecretStr(""), validation_alias="SLACK_BOT_TOKEN")  # xoxb-…
    app_token: SecretStr = Field(SecretStr(""), validation_alias="SLACK_APP_TOKEN")  # xapp-… (Socket Mode)
    signing_secret: SecretStr = Field(SecretStr(""), validation_alias="SLACK_SIGNING_SECRET")  # HTTP mode
    api_url: str = Field(SLACK_API_URL, validation_alias="SLACK_API_URL")  # the Web API base, ends with "/"
    port: int = Field(DEFAULT_PORT, validation_alias="PORT")  # where HTTP mode listens
    # Bind PORT with SO_REUSEPORT, so several bot processes on one host share it (the kernel spreads
    # connections among them); off by default, so a second bot by mistake still fails to start.
    reuse_port: bool = Field(False, validation_alias="BILLSLEUTH_REUSE_PORT")
    # Where approvers are told of notes waiting for them; empty: a DM to each approver.
    finance_channel: str = Field("", validation_alias="BILLSLEUTH_FINANCE_CHANNEL")
    # Where and when (UTC hour) the daily findings digest goes; empty channel: no daily digest.
    sweep_channel: str = Field("", validation_alias="BILLSLEUTH_SWEEP_CHANNEL")
    sweep_hour: int = Field(DEFAULT_SWEEP_HOUR, validation_alias="BILLSLEUTH_SWEEP_HOUR")

    def __init__(
        self,
        bot_token: str | SecretStr = "",
        app_token: str | SecretStr = "",
        signing_secret: str | SecretStr = "",
        api_url: str = SLACK_API_URL,
        port: int | str = DEFAULT_PORT,
        finance_channel: str = "",
        *,
        sweep_channel: str = "",
        sweep_hour: int | str = DEFAULT_SWEEP_HOUR,
        reuse_port: bool | str = False,
    ) -> None:
        # Positional too, as the dataclass this replaced was built.
        super().__init__(
            bot_token=bot_token,
            app_token=app_token,
            signing_secret=signing_secret,
            api_url=api_url,
            port=port,
            finance_channel=finance_channel,
            sweep_channel=sweep_channel,
            sweep_hour=sweep_hour,
            reuse_port=reuse_port,
        )

    @field_validator("api_url", mode="before")
    @classmethod
    def _api_url(cls, value: object) -> str:
        url = str(value).strip() or SLACK_API_URL
        if not url.startswith(("http://", "https://")):
            raise SlackConfigError(f"SLACK_API_URL must start with http:// or https://, got {url!r}")
        # The Web API client appends the method name to the base URL, so the trailing slash matters.
        return url if url.endswith("/") else url + "/"

    @field_validator("finance_channel", "sweep_channel", mode="before")
    @classmethod
    def _channel(cls, value: object, info: ValidationInfo) -> str:
        text = str(value).strip()
        if text and not _CHANNEL_ID.fullmatch(text):
            variable = cls.variable(str(info.field_name))
            raise SlackConfigError(f"{variable} must be a channel id like C0123ABCD, got {text!r}")
        return text

    @field_validator("sweep_hour", mode="before")
    @classmethod
    def _sweep_hour(cls, value: object) -> int:
        text = str(value).strip()
        if not text.isdigit() or not 0 <= int(text) <= 23:
            raise SlackConfigError(f"BILLSLEUTH_SWEEP_HOUR must be a UTC hour from 0 to 23, got {text!r}")
        return int(text)

    @field_validator("reuse_port", mode="before")
    @classmethod
    def _reuse_port(cls, value: object) -> bool:
        text = str(value).strip().lower()
        if text not in ("", "0", "1", "false", "true"):
            raise SlackConfigError(f"BILLSLEUTH_REUSE_PORT must be 1 or 0, got {text!r}")
        return text in ("1", "true")

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, value: object) -> int:
        text = str(value).strip()
        if not text.isdigit() or not 0 <= int(text) <= 65535:
            raise SlackConfigError(f"PORT must be a number from 0 to 65535, got {text!r}")
        return int(text)

    def missing(self, mode: Mode) -> list[str]:
        """The variables this mode needs that are not set, in the order a person would fix them."""
        needed = {"SLACK_BOT_TOKEN": self.bot_token}
        if mode == "http":
            needed["SLACK_SIGNING_SECRET"] = self.signing_secret
        else:
            needed["SLACK_APP_TOKEN"] = self.app_token
        return [name for name, value in needed.items() if not value.get_secret_value()]

    def require(self, mode: Mode) -> SlackSettings:
        """Self, or a SlackConfigError naming every variable this mode still needs."""
        missing = self.missing(mode)
        if missing:
            what = "Socket Mode" if mode == "socket" else "HTTP mode"
            raise SlackConfigError(f"{what} needs {' and '.join(missing)} (not set)")
        if mode == "socket" and not self.app_token.get_secret_value().startswith("xapp-"):
            raise SlackConfigError("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
        return self
