"""Our payload builders produce what Bolt expects from Slack: each kind, signed and sent over HTTP, reaches
the matching listener of the real AsyncApp with its fields in the right places. Card → click → modal →
submission → chat.update is played end to end against the recording server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs

import pytest
from slack_bolt.async_app import AsyncApp

from bot.cards import (
    APPROVE_ACTION_ID,
    INVESTIGATE_SHORTCUT_CALLBACK_ID,
    REJECT_ACTION_ID,
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
    credit_note_card,
    home_view,
    parse_block_id,
    read_reject_submission,
    reason_errors,
    reject_reason_modal,
)
from bot.cards.models import (
    CardNote,
    ConclusionView,
    CreditNoteCardView,
    CustomerView,
    DecisionView,
    HomeView,
    PendingNoteView,
    RecomputationView,
    RejectModalMetadata,
    ToolCallView,
)
from bot.server import HttpServer, create_app, start_http
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p

SECRET = "c4ca4238a0b923820dcc509a6f75849b"
CHANNEL = "C0CASES"
D = Decimal
CUSTOMER = CustomerView("C-0007", "Acme", "USD")
NOTE = CardNote(
    "CN-0001", "INV-0007-05", D("123.60"), "Charged twice", "draft", 0, 1, datetime(2026, 12, 3, tzinfo=UTC)
)
CARD = CreditNoteCardView(
    case_id="CASE-0001",
    customer=CUSTOMER,
    complaint="charged twice",
    requested_by="USUPPORT",
    conclusion=ConclusionView("duplicate_charge", D("123.60"), "Two payments."),
    recompute=RecomputationView(
        "INV-0007-05", date(2026, 5, 1), date(2026, 6, 1), True, D("123.60"), D("123.60"), D("247.20"), D("0")
    ),
    tool_trail=[ToolCallView("list_payments", "INV-0007-05")],
    credit_note=NOTE,
    revision=1,
)


def test_each_kind_is_encoded_the_way_slack_sends_it() -> None:
    event_body, event_type = p.encode(p.app_mention("<@U0BILLSLTH> hi", user="U1", channel="C1"))
    assert event_type == "application/json" and json.loads(event_body)["event"]["type"] == "app_mention"
    command_body, command_type = p.encode(p.slash_command("show CN-0001", user="U1", channel="C1"))
    assert command_type == "application/x-www-form-urlencoded"
    assert parse_qs(command_body)["text"] == ["show CN-0001"] and parse_qs(command_body)["command"] == [
        "/billsleuth"
    ]
    shortcut = p.message_action({"ts": "1.2", "text": "hello", "user": "U2"}, user="U1", channel="C1")
    shortcut_body, shortcut_type = p.encode(shortcut)
    assert shortcut_type == "application/x-www-form-urlencoded"
    assert (
        json.loads(parse_qs(shortcut_body)["payload"][0])["callback_id"] == INVESTIGATE_SHORTCUT_CALLBACK_ID
    )
    with pytest.raises(ValueError, match="not a payload shape"):
        p.encode({"type": "mystery"})
    assert p.mention_text("C-0007 help") == "<@U0BILLSLTH> C-0007 help"


@pytest.fixture
async def slack() -> AsyncIterator[SlackRecorder]:
    async with SlackRecorder() as recorder:
        yield recorder


@pytest.fixture
async def app_server(slack: SlackRecorder) -> AsyncIterator[tuple[dict[str, Any], HttpServer]]:
    seen: dict[str, Any] = {}
    server = await start_http(
        create_app(slack.settings(signing_secret=SECRET), listeners(seen)), host="127.0.0.1", port=0
    )
    yield seen, server
    await server.stop()


def listeners(seen: dict[str, Any]) -> Callable[[AsyncApp], None]:
    """Stand-ins for the real listeners: they record what Bolt handed them, using the real cards."""

    def register(app: AsyncApp) -> None:
        @app.action(APPROVE_ACTION_ID)
        async def approve(ack: Callable, body: dict, action: dict) -> None:
            seen["approve"] = (body["user"]["id"], action["value"], parse_block_id(action["block_id"]))
            # A click in App Home has no channel or message: only a view container.
            seen["approve_where"] = (
                (body.get("channel") or {}).get("id"),
                body["container"].get("message_ts"),
            )
            await ack()

        @app.action(REJECT_ACTION_ID)
        async def reject(ack: Callable, body: dict, action: dict, client: Any) -> None:
            await ack()
            ref = parse_block_id(action["block_id"])
            meta = RejectModalMetadata(
                body["channel"]["id"],
                body["container"]["message_ts"],
                action["value"],
                ref.revision if ref else 0,
            )
            await client.views_open(
                trigger_id=body["trigger_id"], view=reject_reason_modal(meta, NOTE, "USD")
            )

        @app.view(REJECT_MODAL_CALLBACK_ID)
        async def reason(ack: Callable, view: dict, body: dict, client: Any) -> None:
            try:
                meta, text = read_reject_submission(view)
            except ValueError as error:
                await ack(response_action="errors", errors=reason_errors(str(error)))
                return
            seen["reason"] = (body["user"]["id"], meta, text)
            await ack()
            decided = replace(
                CARD,
                credit_note=replace(NOTE, status="rejected"),
                decisions=[DecisionView(body["user"]["id"], "reject", text)],
                revision=meta.revision + 1,
            )
            await client.chat_update(
                channel=meta.channel, ts=meta.message_ts, **credit_note_card(decided).as_kwargs()
            )

        @app.command("/billsleuth")
        async def command(ack: Callable, command: dict) -> None:
            seen["command"] = (command["user_id"], command["channel_id"], command["text"])
            await ack()

        @app.shortcut(INVESTIGATE_SHORTCUT_CALLBACK_ID)
        async def shortcut(ack: Callable, shortcut: dict) -> None:
            seen["shortcut"] = (shortcut["user"]["id"], shortcut["message"]["text"], shortcut["message_ts"])
            await ack()

        @app.event("app_home_opened")
        async def home(event: dict, client: Any) -> None:
            pending = PendingNoteView(NOTE, "CASE-0001", CUSTOMER, revision=1)
            await client.views_publish(
                user_id=event["user"], view=home_view(HomeView(event["user"], True, [pending]))
            )

    return register


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_card_click_modal_and_submission_through_bolt(slack: SlackRecorder, app_server) -> None:
    seen, server = app_server
    web = create_app(slack.settings(signing_secret=SECRET)).client
    posted = await web.chat_postMessage(channel=CHANNEL, **credit_note_card(CARD).as_kwargs())
    card = slack.message(CHANNEL, posted["ts"]).to_slack()

    async with SignedClient(server.url, SECRET) as client:
        approve = p.click(card, user="UALICE", channel=CHANNEL, action_id=APPROVE_ACTION_ID, value="CN-0001")
        assert (await client.send(approve)).status == 200
        await until(lambda: "approve" in seen)
        assert seen["approve"][:2] == ("UALICE", "CN-0001") and seen["approve"][2].revision == 1
        assert seen["approve_where"] == (CHANNEL, posted["ts"])

        reject = p.click(card, user="UBOB", channel=CHANNEL, action_id=REJECT_ACTION_ID)
        assert (await client.send(reject)).status == 200
        await slack.wait_for("views.open")  # opened in the ack path, inside the trigger's 3 seconds
        modal = slack.views("modal")[0].view

        blank = p.view_submission(
            modal, user="UBOB", values={REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: " "}}
        )
        refused = await client.send(blank)
        assert refused.status == 200
        assert refused.json() == {
            "response_action": "errors",
            "errors": {REJECT_REASON_BLOCK_ID: "a reject needs a reason"},
        }

        typed = {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: "cancellation not confirmed"}}
        assert (await client.send(p.view_submission(modal, user="UBOB", values=typed))).status == 200
    await slack.wait_for("chat.update")
    user, meta, reason = seen["reason"]
    assert (user, reason) == ("UBOB", "cancellation not confirmed")
    assert meta == RejectModalMetadata(CHANNEL, posted["ts"], "CN-0001", 1)
    stored = slack.message(CHANNEL, posted["ts"])
    assert stored.updates == 1 and not any(b["type"] == "actions" for b in stored.blocks)
    assert "cancellation not confirmed" in json.dumps(stored.blocks)
    assert all(parse_block_id(b["block_id"]).revision == 2 for b in stored.blocks)  # type: ignore[union-attr]


async def test_command_shortcut_and_home_through_bolt(slack: SlackRecorder, app_server) -> None:
    seen, server = app_server
    typed = slack.post_user_message(CHANNEL, "Why was I billed twice?", user="UCUSTOMERCARE")
    async with SignedClient(server.url, SECRET) as client:
        assert (
            await client.send(p.slash_command("show CN-0001", user="UALICE", channel=CHANNEL))
        ).status == 200
        shortcut = p.message_action(typed.to_slack(), user="USUPPORT", channel=CHANNEL)
        assert (await client.send(shortcut)).status == 200
        assert (await client.send(p.app_home_opened(user="UALICE"))).status == 200
    await until(lambda: {"command", "shortcut"} <= seen.keys())
    assert seen["command"] == ("UALICE", CHANNEL, "show CN-0001")
    assert seen["shortcut"] == ("USUPPORT", "Why was I billed twice?", typed.ts)
    await slack.wait_for("views.publish")
    home = slack.home("UALICE")
    assert home is not None
    click = p.view_block_actions(
        user="UALICE",
        action=p.find_element(home["blocks"], APPROVE_ACTION_ID)[1],
        block_id="home:CN-0001:decide:r1",
        view=home,
    )
    async with SignedClient(server.url, SECRET) as client:
        assert (await client.send(click)).status == 200
    await until(lambda: "approve" in seen and seen["approve"][2].kind == "home")
    assert seen["approve"][:2] == ("UALICE", "CN-0001") and seen["approve_where"] == (None, None)
