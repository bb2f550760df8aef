"""How a payload travels: signed as Slack signs requests, encoded as Slack sends each kind (Events API as
JSON, interactive payloads as a form with one JSON `payload` field, slash commands as a plain form), and the
Socket Mode envelope type that carries it."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
RETRY_NUM_HEADER = "X-Slack-Retry-Num"
RETRY_REASON_HEADER = "X-Slack-Retry-Reason"

# ---- signing ----------------------------------------------------------------------------------------------


def signature(body: str | bytes, secret: str, timestamp: int | str) -> str:
    """Slack's v0 signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`, keyed by the secret."""
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(timestamp).encode() + b":" + raw
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sign(body: str | bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack adds to every request: signature and request timestamp (default: now)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {SIGNATURE_HEADER: signature(body, secret, ts), TIMESTAMP_HEADER: str(ts)}


# ---- encoding ---------------------------------------------------------------------------------------------

INTERACTIVE_TYPES = frozenset(
    {"block_actions", "view_submission", "view_closed", "message_action", "shortcut", "block_suggestion"}
)


def encode(payload: Mapping[str, Any]) -> tuple[str, str]:
    """(body, content type) the way Slack sends this kind of payload."""
    kind = payload.get("type")
    if kind in ("event_callback", "url_verification"):
        return json.dumps(payload), "application/json"
    if kind in INTERACTIVE_TYPES:
        return urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    if "command" in payload:  # slash commands are a flat form
        return urlencode({k: str(v) for k, v in payload.items()}), "application/x-www-form-urlencoded"
    raise ValueError(f"not a payload shape Slack sends: type {kind!r}")


def socket_mode_type(payload: Mapping[str, Any]) -> str:
    """The Socket Mode envelope type that carries this payload."""
    if payload.get("type") == "event_callback":
        return "events_api"
    if "command" in payload:
        return "slash_commands"
    return "interactive"
