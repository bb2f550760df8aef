"""Who and where a signed payload comes from: the installed workspace (what the bot token's auth.test
says), foreign payloads, and payloads a bot sent.

A valid signature proves only that Slack sent the payload, not that it belongs to the workspace this bot
serves: an app shared through Slack Connect or installed across an Enterprise Grid org hears from other
teams too. Every payload is checked against auth.test's team, org and app before any listener runs; one
from elsewhere is dropped (Slack gets an empty 200, so it does not retry) and leaves an activity row
`foreign_workspace`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import activity
from approvals.config import SLACKBOT

FOREIGN_WORKSPACE = "foreign_workspace"  # the activity row's action (DESIGN §3)


@dataclass(frozen=True)
class Installation:
    """The workspace, org and app the bot token belongs to, and the bot's own user."""

    team_id: str | None
    enterprise_id: str | None
    app_id: str | None  # auth.test gives it for bot tokens; None: not checked
    bot_user_id: str | None
    bot_id: str | None
    is_enterprise_install: bool

    @classmethod
    def from_auth_test(cls, answer: Mapping[str, Any]) -> Installation:
        return cls(
            team_id=answer.get("team_id") or None,
            enterprise_id=answer.get("enterprise_id") or None,
            app_id=answer.get("app_id") or None,
            bot_user_id=answer.get("user_id") or None,
            bot_id=answer.get("bot_id") or None,
            is_enterprise_install=bool(answer.get("is_enterprise_install")),
        )


class InstallationCache:
    """auth.test asked once per process (concurrent first requests share the one call)."""

    def __init__(self) -> None:
        self._installation: Installation | None = None
        self._lock = asyncio.Lock()

    async def get(self, client: AsyncWebClient) -> Installation:
        if self._installation is None:
            async with self._lock:
                if self._installation is None:
                    self._installation = Installation.from_auth_test((await client.auth_test()).data)  # type: ignore[arg-type]
        return self._installation


def _ids(*candidates: Any) -> set[str]:
    return {str(value) for value in candidates if isinstance(value, str) and value}


def _field(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, Mapping) else None


def payload_origin(
    body: Mapping[str, Any], team_id: str | None, enterprise_id: str | None
) -> dict[str, set[str]]:
    """Every team, org and app id the payload names (Bolt's reading of it, `team_id`/`enterprise_id`, and
    the raw fields, so that no field can say one workspace while another says a different one)."""
    team, enterprise, view = body.get("team"), body.get("enterprise"), body.get("view")
    return {
        "team": _ids(team_id, body.get("team_id"), team if isinstance(team, str) else _field(team, "id")),
        "enterprise": _ids(
            enterprise_id,
            body.get("enterprise_id"),
            enterprise if isinstance(enterprise, str) else _field(enterprise, "id"),
        ),
        "app": _ids(body.get("api_app_id"), _field(view, "app_id")),
    }


def foreign_reason(
    installation: Installation, body: Mapping[str, Any], team_id: str | None, enterprise_id: str | None
) -> str | None:
    """Why the payload is not from the installed workspace, org or app; None when it is."""
    origin = payload_origin(body, team_id, enterprise_id)
    if installation.app_id and origin["app"] - {installation.app_id}:
        return f"app {', '.join(sorted(origin['app']))} is not {installation.app_id}"
    if origin["enterprise"] - _ids(installation.enterprise_id):
        return f"org {', '.join(sorted(origin['enterprise']))} is not {installation.enterprise_id or 'none'}"
    if installation.is_enterprise_install and installation.enterprise_id:
        return None  # an org-wide install serves every workspace of its org
    if origin["team"] - _ids(installation.team_id):
        return f"team {', '.join(sorted(origin['team']))} is not {installation.team_id}"
    return None


def _org_of_team(body: Mapping[str, Any]) -> dict[str, str]:
    """Workspace → org, as the payload pairs them: the envelope's (`team_id` with `enterprise_id`, and
    `context_team_id` with `context_enterprise_id`), and an interactive payload's `team` with its org."""
    pairs: dict[str, str] = {}
    team, enterprise = body.get("team"), body.get("enterprise")
    for team_id, org in (
        (body.get("team_id"), body.get("enterprise_id")),
        (body.get("context_team_id"), body.get("context_enterprise_id")),
        (_field(team, "id"), _field(team, "enterprise_id") or _field(enterprise, "id")),
    ):
        if isinstance(team_id, str) and team_id and isinstance(org, str) and org:
            pairs[team_id] = org
    return pairs


def actor_teams(body: Mapping[str, Any]) -> set[str]:
    """Every team or org the payload says its actor belongs to. Slack Connect puts a member of another
    organisation in our channels, and the envelope may still be our workspace's: only these fields tell.
    Events: `event.user_team`, `event.source_team`, `event.user_profile.team`, and in a channel shared with
    other organisations (`is_ext_shared_channel`) `event.team`; interactive payloads: `user.team_id`."""
    event, user = body.get("event"), body.get("user")
    teams = _ids(
        _field(event, "user_team"),
        _field(event, "source_team"),
        _field(_field(event, "user_profile"), "team"),
        _field(user, "team_id"),
    )
    if body.get("is_ext_shared_channel") is True:
        teams |= _ids(_field(event, "team"))
    return teams


def foreign_actor(installation: Installation, body: Mapping[str, Any]) -> str | None:
    """The team (or org) of an actor who is not one of ours; None when the actor is. Ours: our workspace,
    our Enterprise Grid org (Slack may name the org itself as the team), or a workspace the payload places
    in our org. In a channel shared with other organisations an actor whose team Slack does not name at
    all cannot be told from an outsider, so is one ("unknown")."""
    teams = actor_teams(body)
    if not teams:
        shared = body.get("is_ext_shared_channel") is True and isinstance(body.get("event"), Mapping)
        return "unknown" if shared and _field(body.get("event"), "user") else None
    org = installation.enterprise_id
    orgs = _org_of_team(body)
    for team in sorted(teams):
        if team == installation.team_id or (org is not None and (team == org or orgs.get(team) == org)):
            continue
        return team
    return None


def payload_kind(body: Mapping[str, Any]) -> str:
    if "command" in body:
        return f"command {body.get('command')}"
    kind = str(body.get("type") or "unknown")
    event = body.get("event")
    return f"{kind} {event.get('type')}" if kind == "event_callback" and isinstance(event, Mapping) else kind


async def record_foreign(
    engine: AsyncEngine, body: Mapping[str, Any], user_id: str | None, why: str, team_id: str | None
) -> None:
    """The activity row for a dropped foreign payload (in a transaction of its own)."""
    async with engine.begin() as conn:
        await activity.record(
            conn,
            activity.USER,
            user_id or "unknown",
            FOREIGN_WORKSPACE,
            "slack_team",
            team_id or "unknown",
            {"why": why, "payload": payload_kind(body)},
        )


def sent_by_a_bot(body: Mapping[str, Any], user_id: str | None, installation: Installation | None) -> bool:
    """True when a bot sent the payload: it carries a bot_id, or its user is Slackbot or this app's own
    bot user. A bot never decides, whatever the allowlist says."""
    user = body.get("user")
    event = body.get("event")
    if body.get("bot_id") or _field(event, "bot_id") or _field(user, "is_bot") is True:
        return True
    own = installation.bot_user_id if installation is not None else None
    return user_id is not None and (user_id == SLACKBOT or (own is not None and user_id == own))
