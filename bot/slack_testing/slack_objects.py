"""What the recording Slack server keeps: the calls made to it, the messages, ephemerals and views it holds,
each shaped as Slack's API returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.slack_testing.payloads import DEMO


@dataclass(frozen=True)
class RecordedCall:
    method: str
    args: dict[str, Any]  # the parsed body and query, JSON-encoded form fields (blocks, view) decoded
    token: str | None
    at: datetime
    http_status: int
    response: dict[str, Any]
    peer: str = ""  # the caller's end of the TCP connection: a client keeping connections alive reuses one

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        return self.response.get("error")


@dataclass
class StoredMessage:
    channel: str
    ts: str
    text: str
    user: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    bot_id: str | None = None
    team: str = DEMO.team_id
    updates: int = 0  # how many chat.update calls changed it

    def to_slack(self) -> dict[str, Any]:
        """The message object as Slack's API returns it."""
        data: dict[str, Any] = {"type": "message", "user": self.user, "text": self.text, "ts": self.ts}
        data["team"] = self.team
        if self.bot_id:
            data["bot_id"] = self.bot_id
        if self.blocks:
            data["blocks"] = self.blocks
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if self.updates:
            data["edited"] = {"user": self.user, "ts": self.ts}
        return data


@dataclass(frozen=True)
class EphemeralMessage:
    channel: str
    user: str  # who sees it
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    message_ts: str


@dataclass
class StoredView:
    id: str
    view: dict[str, Any]  # as views.* returned it
    user: str | None  # the Home tab's owner (views.publish); None for modals
