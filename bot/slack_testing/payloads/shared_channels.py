"""Slack Connect: a payload as Slack sends it when its actor belongs to another organisation."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def in_shared_channel(payload: Mapping[str, Any], *, user_team: str) -> dict[str, Any]:
    """`payload` as Slack sends it when its actor acts in a Slack Connect channel (one shared with other
    organisations) and belongs to `user_team` (a workspace `T…`, or an Enterprise Grid org `E…`). The
    envelope stays the installed workspace's (its team_id and authorizations); the actor's own team is
    where Slack names it: for events `is_ext_shared_channel: true` and the event's `user_team`,
    `source_team`, `team` and `user_profile.team` (as in Slack's message and app_mention events of shared
    channels); for interactive payloads `user.team_id`."""
    shared = copy.deepcopy(dict(payload))
    event = shared.get("event")
    if shared.get("type") == "event_callback" and isinstance(event, dict):
        shared["is_ext_shared_channel"] = True
        name = str(event.get("user") or "someone").lower()
        event.update(user_team=user_team, source_team=user_team, team=user_team)
        event["user_profile"] = {"name": name, "real_name": name, "display_name": name, "team": user_team}
    elif isinstance(shared.get("user"), dict):
        shared["user"] = {**shared["user"], "team_id": user_team}
    else:
        raise ValueError("Slack Connect shapes are for events and interactive payloads")
    return shared
