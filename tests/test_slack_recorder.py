"""The recording Slack Web API server answers like Slack: tokens, bodies, stored messages, views, errors."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack_testing import SlackRecorder
from bot.slack_testing.payloads import new_trigger_id

SECTION = {"type": "section", "block_id": "b1", "text": {"type": "mrkdwn", "text": "*hello*"}}


@pytest.fixture
async def slack() -> AsyncIterator[SlackRecorder]:
    async with SlackRecorder() as recorder:
        yield recorder


def client(slack: SlackRecorder, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token or slack.bot_token, base_url=slack.api_url, retry_handlers=[])


async def raw_post(slack: SlackRecorder, method: str, **kwargs: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(slack.api_url + method, **kwargs) as response:
        return await response.json()


async def test_form_and_json_bodies_and_both_ways_of_giving_the_token(slack: SlackRecorder) -> None:
    form = await raw_post(
        slack,
        "chat.postMessage",
        data={"token": slack.bot_token, "channel": "C1", "text": "form", "blocks": json.dumps([SECTION])},
    )
    as_json = await raw_post(
        slack,
        "chat.postMessage",
        json={"channel": "C1", "text": "json", "blocks": [SECTION]},
        headers={"Authorization": f"Bearer {slack.bot_token}"},
    )
    assert form["ok"] and as_json["ok"]
    assert form["message"]["blocks"] == [SECTION] == as_json["message"]["blocks"]
    first, second = slack.calls("chat.postMessage")
    assert (
        first.args["blocks"] == [SECTION] and "token" not in first.args
    )  # decoded, and the token kept apart
    assert first.token == second.token == slack.bot_token
    assert float(as_json["ts"]) > float(form["ts"])


@pytest.mark.parametrize(
    ("method", "token", "error"),
    [
        ("chat.postMessage", None, "not_authed"),
        ("chat.postMessage", "xoxb-forged", "invalid_auth"),
        ("chat.postMessage", "APP", "not_allowed_token_type"),
        ("apps.connections.open", "BOT", "not_allowed_token_type"),
    ],
)
async def test_tokens_are_checked(slack: SlackRecorder, method: str, token: str | None, error: str) -> None:
    real = {"APP": slack.app_token, "BOT": slack.bot_token}.get(token or "", token)
    headers = {"Authorization": f"Bearer {real}"} if real else {}
    answer = await raw_post(slack, method, json={"channel": "C1", "text": "hi"}, headers=headers)
    assert answer == {"ok": False, "error": error}
    assert slack.messages() == []
    assert slack.last_call(method).error == error


async def test_auth_test_names_the_bot(slack: SlackRecorder) -> None:
    answer = await client(slack).auth_test()
    ws = slack.workspace
    assert (answer["user_id"], answer["bot_id"], answer["team_id"]) == (ws.bot_user_id, ws.bot_id, ws.team_id)


async def test_chat_update_changes_the_stored_message(slack: SlackRecorder) -> None:
    web = client(slack)
    posted = await web.chat_postMessage(channel="C1", text="draft", blocks=[SECTION], thread_ts="1700.000001")
    decided = {**SECTION, "block_id": "b2", "text": {"type": "mrkdwn", "text": "issued"}}
    updated = await web.chat_update(channel="C1", ts=posted["ts"], text="issued", blocks=[decided])
    stored = slack.message("C1", posted["ts"])
    assert (stored.text, stored.blocks, stored.updates) == ("issued", [decided], 1)
    assert updated["message"]["blocks"] == [decided] and updated["ts"] == posted["ts"]
    assert slack.last_in_thread("C1", "1700.000001") is stored
    with pytest.raises(SlackApiError) as missing:
        await web.chat_update(channel="C1", ts="1.000000", text="x")
    assert missing.value.response["error"] == "message_not_found"
    typed = slack.post_user_message("C1", "a person's words", user="UALICE")
    with pytest.raises(SlackApiError) as theirs:
        await web.chat_update(channel="C1", ts=typed.ts, text="x")
    assert theirs.value.response["error"] == "cant_update_message"


async def test_timestamps_strictly_increase(slack: SlackRecorder) -> None:
    web = client(slack)
    stamps = [(await web.chat_postMessage(channel="C1", text=str(i)))["ts"] for i in range(30)]
    assert stamps == sorted(stamps, key=float) and len(set(stamps)) == 30


async def test_ephemerals_go_to_one_user(slack: SlackRecorder) -> None:
    answer = await client(slack).chat_postEphemeral(
        channel="C1", user="UBOB", text="refused (rule: one vote each)"
    )
    assert answer["ok"] and answer["message_ts"]
    assert [e.text for e in slack.ephemerals("UBOB")] == ["refused (rule: one vote each)"]
    assert slack.ephemerals("UALICE") == [] and slack.messages("C1") == []


async def test_views_open_update_and_publish(slack: SlackRecorder) -> None:
    web = client(slack)
    modal = {
        "type": "modal",
        "callback_id": "cb",
        "title": {"type": "plain_text", "text": "Reject"},
        "blocks": [SECTION],
    }
    trigger = new_trigger_id()
    opened = (await web.views_open(trigger_id=trigger, view=modal))["view"]
    assert opened["callback_id"] == "cb" and opened["id"].startswith("V")
    with pytest.raises(SlackApiError) as reused:
        await web.views_open(trigger_id=trigger, view=modal)
    assert reused.value.response["error"] == "exchanged_trigger_id"
    stale = f"{int((time.time() - 4) * 1000)}.7.deadbeef"
    with pytest.raises(SlackApiError) as expired:
        await web.views_open(trigger_id=stale, view=modal)
    assert expired.value.response["error"] == "expired_trigger_id"
    with pytest.raises(SlackApiError) as conflict:
        await web.views_update(view_id=opened["id"], hash="0.stale", view=modal)
    assert conflict.value.response["error"] == "hash_conflict"
    changed = {**modal, "private_metadata": "v2"}
    updated = (await web.views_update(view_id=opened["id"], hash=opened["hash"], view=changed))["view"]
    assert updated["id"] == opened["id"] and updated["private_metadata"] == "v2"
    home = {"type": "home", "blocks": [SECTION]}
    await web.views_publish(user_id="UALICE", view=home)
    assert slack.home("UALICE")["blocks"] == [SECTION] and slack.home("UBOB") is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("blocks", "text", "error"),
    [
        ([{"type": "divider", "block_id": f"d{i}"} for i in range(51)], "x", "invalid_blocks"),
        (
            [
                {**SECTION, "block_id": f"s{i}", "text": {"type": "mrkdwn", "text": "y" * 2990}}
                for i in range(5)
            ],
            "x",
            "msg_blocks_too_long",
        ),
        ([{"type": "sparkles", "block_id": "z"}], "x", "invalid_blocks"),
        ([], "", "no_text"),
    ],
)
@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing:UserWarning")
async def test_refuses_what_slack_refuses(slack: SlackRecorder, blocks: list, text: str, error: str) -> None:
    with pytest.raises(SlackApiError) as refused:
        await client(slack).chat_postMessage(channel="C1", text=text, blocks=blocks)
    assert refused.value.response["error"] == error
    assert slack.messages("C1") == []


async def test_conversations_replies_and_history(slack: SlackRecorder) -> None:
    web = client(slack)
    parent = slack.post_user_message("C1", "@BillSleuth C-0007 help", user="USUPPORT")
    await web.chat_postMessage(channel="C1", thread_ts=parent.ts, text="working")
    await web.chat_postMessage(channel="C1", text="elsewhere")
    replies = await web.conversations_replies(channel="C1", ts=parent.ts)
    assert [m["text"] for m in replies["messages"]] == ["@BillSleuth C-0007 help", "working"]
    history = await web.conversations_history(channel="C1")
    assert [m["text"] for m in history["messages"]] == ["elsewhere", "@BillSleuth C-0007 help"]
    with pytest.raises(SlackApiError) as unknown:
        await web.conversations_replies(channel="C1", ts="1.000001")
    assert unknown.value.response["error"] == "thread_not_found"


async def test_unknown_methods_response_urls_and_waiting(slack: SlackRecorder) -> None:
    with pytest.raises(SlackApiError) as unknown:
        await client(slack).api_call("files.upload")
    assert unknown.value.response["error"] == "unknown_method"
    url = slack.response_url()
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json={"text": "only you", "response_type": "ephemeral"}) as r,
    ):
        assert r.status == 200
    assert slack.last_call("response_url").args["text"] == "only you"
    with pytest.raises(TimeoutError, match=r"waited 0\.1s for 1 chat\.update call"):
        await slack.wait_for("chat.update", timeout=0.1)
