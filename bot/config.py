"""Slack settings, read from the environment (DESIGN.md §3 "Environment").

Reading never fails on a missing credential: `billsleuth doctor` wants to list everything that is missing at
once. The mode that needs a credential asks for it with `require()`, which names the variable in one line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SLACK_API_URL = "https://slack.com/api/"
DEFAULT_PORT = 3000

Mode = Literal["http", "socket"]


class SlackConfigError(ValueError):
    """A Slack setting is missing or malformed; the message is one line naming the variable."""


@dataclass(frozen=True)
class SlackSettings:
    bot_token: str  # SLACK_BOT_TOKEN, xoxb-…
    app_token: str  # SLACK_APP_TOKEN, xapp-… (Socket Mode only)
    signing_secret: str  # SLACK_SIGNING_SECRET (HTTP mode only)
    api_url: str = SLACK_API_URL  # SLACK_API_URL: the Web API base, ends with "/"
    port: int = DEFAULT_PORT  # PORT: where HTTP mode listens
    finance_channel: str = ""  # BILLSLEUTH_FINANCE_CHANNEL: where approvers are told; empty: a DM each

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlackSettings:
        env = os.environ if env is None else env
        return cls(
            bot_token=env.get("SLACK_BOT_TOKEN", "").strip(),
            app_token=env.get("SLACK_APP_TOKEN", "").strip(),
            signing_secret=env.get("SLACK_SIGNING_SECRET", "").strip(),
            api_url=_api_url(env.get("SLACK_API_URL", "")),
            port=_port(env.get("PORT", "")),
            finance_channel=_channel(env.get("BILLSLEUTH_FINANCE_CHANNEL", "")),
        )

    def missing(self, mode: Mode) -> list[str]:
        """The variables this mode needs that are not set, in the order a person would fix them."""
        needed = {"SLACK_BOT_TOKEN": self.bot_token}
        if mode == "http":
            needed["SLACK_SIGNING_SECRET"] = self.signing_secret
        else:
            needed["SLACK_APP_TOKEN"] = self.app_token
        return [name for name, value in needed.items() if not value]

    def require(self, mode: Mode) -> SlackSettings:
        """Self, or a SlackConfigError naming every variable this mode still needs."""
        missing = self.missing(mode)
        if missing:
            what = "Socket Mode" if mode == "socket" else "HTTP mode"
            raise SlackConfigError(f"{what} needs {' and '.join(missing)} (not set)")
        if mode == "socket" and not self.app_token.startswith("xapp-"):
            raise SlackConfigError("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
        return self


def _api_url(raw: str) -> str:
    url = raw.strip() or SLACK_API_URL
    if not url.startswith(("http://", "https://")):
        raise SlackConfigError(f"SLACK_API_URL must start with http:// or https://, got {url!r}")
    # The Web API client appends the method name to the base URL, so the trailing slash matters.
    return url if url.endswith("/") else url + "/"


def _channel(raw: str) -> str:
    text = raw.strip()
    if text and not re.fullmatch(r"[CG][A-Z0-9]{2,}", text):
        raise SlackConfigError(
            f"BILLSLEUTH_FINANCE_CHANNEL must be a channel id like C0123ABCD, got {text!r}"
        )
    return text


def _port(raw: str) -> int:
    text = raw.strip()
    if not text:
        return DEFAULT_PORT
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise SlackConfigError(f"PORT must be a number from 0 to 65535, got {text!r}")
    return int(text)
