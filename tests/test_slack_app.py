"""The real Bolt AsyncApp, served over HTTP on 127.0.0.1 and over Socket Mode, against the recording Slack
Web API server: signatures, acks before slow work, replies in the mention's thread, clean shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier

from bot.cards import INVESTIGATE_SHORTCUT_CALLBACK_ID, SLASH_COMMAND
from bot.config import SlackConfigError, SlackSettings
from bot.runtime import BackgroundWork
from bot.server import (
    BillSleuthApp,
    HttpServer,
    create_app,
    run_http,
    run_socket_mode,
    start_http,
)
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
CHANNEL = "C0CASES"


@pytest.fixture
async def slack() -> AsyncIterator[SlackRecorder]:
    async with SlackRecorder() as recorder:
        yield recorder


@pytest.fixture
async def served(slack: SlackRecorder) -> AsyncIterator[Callable[..., object]]:
    """Serve an app built from `register` on a free port; stopped after the test."""
    servers: list[HttpServer] = []

    async def serve(
        register: Callable[[AsyncApp], None], secret: str = SECRET
    ) -> tuple[BillSleuthApp, HttpServer]:
        app = create_app(slack.settings(signing_secret=secret), register)
        server = await start_http(app, host="127.0.0.1", port=0)
        servers.append(server)
        return app, server

    yield serve
    for server in servers:
        await server.stop()


def reply_in_thread(app: AsyncApp) -> None:
    @app.event("app_mention")
    async def answer(event: dict, client: object) -> None:
        await client.chat_postMessage(  # type: ignore[attr-defined]
            channel=event["channel"], thread_ts=event.get("thread_ts") or event["ts"], text="Looking into it."
        )


def mention(slack: SlackRecorder, words: str = "C-0007 I was charged twice in May") -> dict:
    typed = slack.post_user_message(CHANNEL, p.mention_text(words), user="USUPPORT")
    return p.app_mention(typed.text, user="USUPPORT", channel=CHANNEL, ts=typed.ts)


# ---- signatures -------------------------------------------------------------------------------------------


async def test_only_correctly_signed_fresh_requests_get_through(slack: SlackRecorder, served) -> None:
    _, server = await served(reply_in_thread)
    payload = mention(slack)
    async with SignedClient(server.url, SECRET) as client:
        wrong_secret = await client.send(payload, secret="not-the-secret")
        stale = await client.send(payload, timestamp=int(time.time()) - 6 * 60)
        body, content_type = p.encode(payload)
        tampered = await client.send_raw(
            body.replace("charged twice", "charged thrice"),
            {"Content-Type": content_type, **p.sign(body, SECRET)},
        )
        unsigned = await client.send_raw(body, {"Content-Type": content_type})
        good = await client.send(payload)
    assert [r.status for r in (wrong_secret, stale, tampered, unsigned)] == [401, 401, 401, 401]
    assert good.status == 200
    replies = await slack.wait_for("chat.postMessage")
    await asyncio.sleep(0.2)  # a refused request must not have run the listener late either
    assert len(slack.calls("chat.postMessage")) == len(replies) == 1


def test_our_signature_is_the_one_slack_sdk_verifies() -> None:
    body, now = '{"type":"event_callback"}', int(time.time())
    headers = p.sign(body, SECRET, now)
    assert headers["X-Slack-Request-Timestamp"] == str(now)
    assert SignatureVerifier(SECRET).is_valid(body, str(now), headers["X-Slack-Signature"])
    assert not SignatureVerifier("other").is_valid(body, str(now), headers["X-Slack-Signature"])


async def test_app_without_a_signing_secret_refuses_requests_signed_with_an_empty_one(
    slack: SlackRecorder, served
) -> None:
    _, server = await served(reply_in_thread, secret="")
    async with SignedClient(server.url, "") as client:
        assert (await client.send(mention(slack))).status == 401


# ---- the mention's thread --------------------------------------------------------------------------------


async def test_mention_reply_lands_in_its_thread_with_the_bot_token(slack: SlackRecorder, served) -> None:
    _, server = await served(reply_in_thread)
    payload = mention(slack)
    in_thread = p.app_mention(
        p.mention_text("C-0008 again"), user="USUPPORT", channel=CHANNEL, thread_ts="1700.1"
    )
    async with SignedClient(server.url, SECRET) as client:
        assert (await client.send(payload)).status == 200
        assert (await client.send(in_thread)).status == 200
    calls = await slack.wait_for("chat.postMessage", 2)
    assert {c.token for c in calls} == {slack.bot_token}
    assert sorted(c.args["thread_ts"] for c in calls) == sorted([payload["event"]["ts"], "1700.1"])
    thread = slack.thread(CHANNEL, payload["event"]["ts"])
    assert [m.text for m in thread] == [payload["event"]["text"], "Looking into it."]
    assert slack.last_in_thread(CHANNEL, payload["event"]["ts"]).user == slack.workspace.bot_user_id  # type: ignore[union-attr]
    assert slack.calls("auth.test")[0].token == slack.bot_token  # Bolt's single-workspace authorisation


# ---- ack before slow work --------------------------------------------------------------------------------


async def test_event_is_acked_while_the_listener_is_still_working(slack: SlackRecorder, served) -> None:
    # The listener cannot finish before the test lets it, and the test lets it only once the HTTP response
    # is in: a response that waited for the listener would never come (the timeout fails the test). No
    # wall-clock bound, so a busy machine cannot fail it.
    release, finished = asyncio.Event(), asyncio.Event()

    def register(app: AsyncApp) -> None:
        @app.event("app_mention")
        async def slow(event: dict, client: object) -> None:
            await release.wait()
            await client.chat_postMessage(channel=event["channel"], thread_ts=event["ts"], text="done")  # type: ignore[attr-defined]
            finished.set()

    app, server = await served(register)
    assert app.process_before_response is False
    async with SignedClient(server.url, SECRET) as client:
        response = await asyncio.wait_for(client.send(mention(slack)), 10)
    assert response.status == 200
    assert not finished.is_set(), "the HTTP response must not wait for the listener"
    release.set()
    await asyncio.wait_for(finished.wait(), 10)
    assert slack.last_call("chat.postMessage").args["text"] == "done"


async def test_button_click_is_acked_before_the_slow_part_of_its_listener(
    slack: SlackRecorder, served
) -> None:
    phases: list[str] = []
    release, finished = asyncio.Event(), asyncio.Event()  # as above: no wall-clock bound

    def register(app: AsyncApp) -> None:
        @app.action("credit_note_approve")
        async def approve(ack: Callable, body: dict) -> None:
            await ack()
            phases.append("acked")
            await release.wait()
            phases.append(f"worked on {body['actions'][0]['value']}")
            finished.set()

    _, server = await served(register)
    card = slack.post_user_message(CHANNEL, "card", user="UOTHER")
    card.blocks = [
        {
            "type": "actions",
            "block_id": "cn:CN-0001:decide:r0",
            "elements": [
                {
                    "type": "button",
                    "action_id": "credit_note_approve",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": "CN-0001",
                }
            ],
        }
    ]
    click = p.click(card.to_slack(), user="UALICE", channel=CHANNEL, action_id="credit_note_approve")
    async with SignedClient(server.url, SECRET) as client:
        response = await asyncio.wait_for(client.send(click), 10)
    assert response.status == 200
    assert phases == ["acked"]
    release.set()
    await asyncio.wait_for(finished.wait(), 10)
    assert phases == ["acked", "worked on CN-0001"]


async def test_the_app_is_busy_from_the_request_until_its_listener_returns(
    slack: SlackRecorder, served
) -> None:
    """What `RunningBot.settled()` waits for: a listener still working after its ack (opening a modal,
    say) keeps the app busy, though it has started no background work yet; none may be missed because
    the machine was too slow to get the listener going within a quiet period."""
    release, done = asyncio.Event(), asyncio.Event()

    def register(app: AsyncApp) -> None:
        @app.action("credit_note_reject")
        async def reject(ack: Callable) -> None:
            await ack()
            await release.wait()
            done.set()

    app, server = await served(register)
    card = slack.post_user_message(CHANNEL, "card", user="UOTHER")
    card.blocks = [
        {
            "type": "actions",
            "block_id": "cn:CN-0001:decide:r0",
            "elements": [
                {
                    "type": "button",
                    "action_id": "credit_note_reject",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": "CN-0001",
                }
            ],
        }
    ]
    click = p.click(card.to_slack(), user="UALICE", channel=CHANNEL, action_id="credit_note_reject")
    assert app.busy == 0
    async with SignedClient(server.url, SECRET) as client:
        assert (await asyncio.wait_for(client.send(click), 10)).status == 200
        assert (await client.send(mention(slack))).status == 404  # no listener: nothing to wait for
    assert app.busy == 1 and app.background.pending == 0
    release.set()
    await asyncio.wait_for(done.wait(), 10)
    for _ in range(100):  # the runner's own bookkeeping after the listener returns: a few loop turns
        if app.busy == 0:
            break
        await asyncio.sleep(0.01)
    assert app.busy == 0


# ---- running and stopping --------------------------------------------------------------------------------


async def test_run_http_stops_cleanly_after_draining_background_work(slack: SlackRecorder) -> None:
    acked = asyncio.Event()

    def register(app: AsyncApp) -> None:
        bot = app  # create_app hands over a BillSleuthApp

        @app.event("app_mention")
        async def start_investigation(event: dict, client: object) -> None:
            async def investigate() -> None:
                await asyncio.sleep(0.5)
                await client.chat_postMessage(
                    channel=event["channel"], thread_ts=event["ts"], text="finished"
                )  # type: ignore[attr-defined]

            bot.background.start(investigate(), name="investigate")  # type: ignore[attr-defined]
            acked.set()

    app = create_app(slack.settings(signing_secret=SECRET), register)
    ready: asyncio.Future[HttpServer] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_http(app, host="127.0.0.1", port=0, stop=stop, on_ready=ready.set_result)
    )
    server = await asyncio.wait_for(ready, 5)
    async with SignedClient(server.url, SECRET) as client:
        assert (await client.send(mention(slack))).status == 200
        await asyncio.wait_for(acked.wait(), 5)
        assert app.background.pending == 1
        stop.set()
        await asyncio.wait_for(running, 10)
        assert [c.args["text"] for c in slack.calls("chat.postMessage")] == ["finished"]
        assert app.background.pending == 0
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.send(mention(slack))


async def test_http_mode_needs_the_signing_secret(slack: SlackRecorder) -> None:
    app = create_app(slack.settings(signing_secret=""))
    with pytest.raises(SlackConfigError, match="HTTP mode needs SLACK_SIGNING_SECRET"):
        await run_http(app, host="127.0.0.1", port=0, stop=asyncio.Event())


async def test_socket_mode_round_trip_and_clean_shutdown(slack: SlackRecorder) -> None:
    def register(app: AsyncApp) -> None:
        reply_in_thread(app)

        @app.command("/billsleuth")
        async def command(ack: Callable, command: dict) -> None:
            await ack(f"you asked for {command['text']}")

    app = create_app(slack.settings(), register)
    stop = asyncio.Event()
    running = asyncio.create_task(run_socket_mode(app, stop=stop))
    payload = mention(slack)
    ack = await slack.socket_send(payload)
    assert set(ack) == {"envelope_id"}  # events are acked with an empty body
    answer = await slack.socket_send(p.slash_command("list", user="USUPPORT", channel=CHANNEL))
    assert answer["payload"] == {"text": "you asked for list"}
    await slack.wait_for("chat.postMessage")
    assert slack.last_call("chat.postMessage").args["thread_ts"] == payload["event"]["ts"]
    assert slack.last_call("apps.connections.open").token == slack.app_token
    stop.set()
    await asyncio.wait_for(running, 5)
    assert not slack.socket_connected


async def test_socket_mode_needs_an_app_token(slack: SlackRecorder) -> None:
    settings = SlackSettings(slack.bot_token, "", "", slack.api_url, 0)
    with pytest.raises(SlackConfigError, match="Socket Mode needs SLACK_APP_TOKEN"):
        await run_socket_mode(create_app(settings), stop=asyncio.Event())


# ---- the Web API client ----------------------------------------------------------------------------------


async def test_client_uses_slack_api_url_and_retries_when_rate_limited(slack: SlackRecorder) -> None:
    app = create_app(slack.settings())
    assert app.client.base_url == slack.api_url
    assert any(isinstance(h, AsyncRateLimitErrorRetryHandler) for h in app.client.retry_handlers)
    slack.fail_next("chat.postMessage", "ratelimited", retry_after=0)
    response = await app.client.chat_postMessage(channel=CHANNEL, text="hello")
    assert response["ok"] is True
    attempts = slack.calls("chat.postMessage")
    assert [(c.http_status, c.error) for c in attempts] == [(429, "ratelimited"), (200, None)]
    assert [m.text for m in slack.messages(CHANNEL)] == ["hello"]


# ---- settings and background work ------------------------------------------------------------------------


def test_settings_from_the_environment() -> None:
    settings = SlackSettings.from_env(
        {"SLACK_BOT_TOKEN": " xoxb-1 ", "SLACK_API_URL": "http://127.0.0.1:9/api"}
    )
    assert settings == SlackSettings("xoxb-1", "", "", "http://127.0.0.1:9/api/", 3000)
    assert SlackSettings.from_env({}).api_url == "https://slack.com/api/"
    assert SlackSettings.from_env({"PORT": "8080"}).port == 8080
    assert settings.missing("http") == ["SLACK_SIGNING_SECRET"]
    assert SlackSettings.from_env({}).missing("socket") == ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]
    with pytest.raises(SlackConfigError, match="PORT must be a number from 0 to 65535, got 'http'"):
        SlackSettings.from_env({"PORT": "http"})
    with pytest.raises(SlackConfigError, match="SLACK_API_URL must start with http"):
        SlackSettings.from_env({"SLACK_API_URL": "slack.com/api"})
    with pytest.raises(SlackConfigError, match="must be an app-level token starting with xapp-"):
        SlackSettings("xoxb-1", "xoxb-2", "", "https://slack.com/api/", 3000).require("socket")
    with pytest.raises(SlackConfigError, match="SLACK_BOT_TOKEN is not set"):
        create_app(SlackSettings.from_env({}))


async def test_background_work_logs_failures_and_cancels_what_outlives_the_drain(
    caplog: pytest.LogCaptureFixture,
) -> None:
    work = BackgroundWork()
    cancelled = asyncio.Event()

    async def fails() -> None:
        raise RuntimeError("ledger unreachable")

    async def hangs() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with caplog.at_level(logging.ERROR, logger="bot.runtime"):
        work.start(fails(), name="case CASE-0001")
        work.start(hangs(), name="case CASE-0002")
        await asyncio.sleep(0.05)
        assert work.pending == 1
        started = time.monotonic()
        await work.drain(timeout=0.2)
    assert time.monotonic() - started < 2
    assert cancelled.is_set() and work.pending == 0
    assert "background work case CASE-0001 failed" in caplog.text


def test_manifest_declares_what_the_app_uses() -> None:
    manifest = json.loads((Path(__file__).parent.parent / "manifest.json").read_text(encoding="utf-8"))
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {"app_mentions:read", "chat:write", "commands"}
    settings = manifest["settings"]
    assert set(settings["event_subscriptions"]["bot_events"]) == {"app_mention", "app_home_opened"}
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == [SLASH_COMMAND]
    assert manifest["features"]["shortcuts"] == [
        {
            "name": "Investigate billing",
            "type": "message",
            "callback_id": INVESTIGATE_SHORTCUT_CALLBACK_ID,
            "description": manifest["features"]["shortcuts"][0]["description"],
        }
    ]
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert len(manifest["display_information"]["description"]) <= 140  # Slack's limit for it


async def test_a_taken_port_is_a_one_line_error(slack: SlackRecorder, served) -> None:
    _, first = await served(reply_in_thread)
    app = create_app(slack.settings(signing_secret=SECRET))
    with pytest.raises(SlackConfigError, match=f"cannot listen on 127.0.0.1:{first.port}: "):
        await start_http(app, host="127.0.0.1", port=first.port)
