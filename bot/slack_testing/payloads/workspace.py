"""The workspace every payload comes from, and the ids Slack gives things (events, triggers, messages)."""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass

_sequence = itertools.count(1)


@dataclass(frozen=True)
class Workspace:
    """The ids every payload shares; the recording server answers auth.test with the same ones."""

    team_id: str = "T0BILLSLTH"
    team_domain: str = "billsleuth-demo"
    api_app_id: str = "A0BILLSLTH"
    bot_user_id: str = "U0BILLSLTH"
    bot_id: str = "B0BILLSLTH"
    enterprise_id: str | None = None  # the Enterprise Grid org the workspace belongs to, if any
    enterprise_install: bool = False  # installed org-wide (every workspace of the org), not on one


DEMO = Workspace()


def next_number() -> int:
    """A number no other payload of this process has had: the unique part of made-up ids."""
    return next(_sequence)


def new_event_id() -> str:
    return f"Ev{next_number():08d}{secrets.token_hex(3).upper()}"


def new_trigger_id() -> str:
    """Opaque to Slack apps; ours start with the issue time in ms so the recorder can expire them (3 s)."""
    return f"{int(time.time() * 1000)}.{next_number()}.{secrets.token_hex(10)}"


def new_ts() -> str:
    now = time.time()
    return f"{int(now)}.{int((now % 1) * 1_000_000):06d}"


def fake_response_url(team_id: str) -> str:
    return f"https://hooks.slack.com/actions/{team_id}/{next_number()}/{secrets.token_urlsafe(18)}"


def user_object(user_id: str, ws: Workspace) -> dict[str, str]:
    name = user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": ws.team_id}


def team_object(ws: Workspace) -> dict[str, str]:
    team = {"id": ws.team_id, "domain": ws.team_domain}
    return {**team, "enterprise_id": ws.enterprise_id} if ws.enterprise_id else team


def enterprise_object(ws: Workspace) -> dict[str, str] | None:
    return {"id": ws.enterprise_id, "name": ws.enterprise_id.lower()} if ws.enterprise_id else None
