"""What the bot tests share: the scenarios, the people, Block Kit checks, and reading the recorder."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from slack_sdk.models.blocks import Block
from sqlalchemy import func, select

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.cards.ids import POLICY_APPROVE_ACTION_ID
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, block_problems, view_problems
from bot.config import SlackSettings
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing import payloads as p
from bot.slack_testing.processes import free_port
from bot.slack_testing.recorder import dm_channel
from engine import schema

SECRET = "0f5c1e0b7d2a4c6e8a9b1d3f5e7c9a0b"
# Slack waits this long for an ack, then retries the event or shows the user an error. Tests hold acks to
# it; that an ack does not wait for the listener is shown without a clock (tests/test_slack_app.py).
SLACK_ACK_LIMIT = 3.0
CHANNEL = "C0BILLING"
SUPPORT = "U0SUPPORT1"  # opens cases
FINANCE = ("U0FIN0001", "U0FIN0002", "U0FIN0003")  # on BILLSLEUTH_APPROVERS
OUTSIDER = "U0SALES001"  # not an approver
CARD_BUTTONS = ["Approve", "Reject", "Request changes"]  # a draft's evidence card (Home shows the first two)
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "default"


def approval_settings() -> ApprovalSettings:
    return ApprovalSettings(approvers=frozenset(FINANCE), two_person_threshold=Decimal("300.00"))


@contextlib.asynccontextmanager
async def offline_bot(
    url: str,
    slack: SlackRecorder,
    *,
    settings: SlackSettings | None = None,
    policy: ApprovalSettings | None = None,
    configuration: Configuration | None = None,
    **extra: Any,
) -> AsyncIterator[RunningBot]:
    """A real bot as the tests run it: the offline investigator, every progress step sent, no recovery
    or expiry loop of its own (a test runs those itself). `extra` goes to running_bot as it is."""
    async with running_bot(
        url,
        settings or slack.settings(signing_secret=SECRET),
        configuration=configuration or Configuration(investigator="offline"),
        approval_settings=policy or approval_settings(),
        progress_interval=0.0,
        progress_rate=None,
        recover=False,
        expiry_interval=None,
        **extra,
    ) as running:
        yield running


def scenario(customer_id: str) -> dict[str, Any]:
    for path in sorted(SCENARIOS.glob("S*.json")):
        data = json.loads(path.read_text())
        if data["customer_id"] == customer_id:
            return data
    raise LookupError(customer_id)


def first_scenario(*, action: str, single_approver: bool | None = None) -> dict[str, Any]:
    """The first scenario with this expected action (and, for credits, one or two approvers needed)."""
    for path in sorted(SCENARIOS.glob("S*.json")):
        data = json.loads(path.read_text())
        truth = data["truth"]
        if truth["expected_action"] != action:
            continue
        if single_approver is None or (Decimal(truth["overcharge"]) < Decimal("300.00")) == single_approver:
            return data
    raise LookupError(action)


# ---- Block Kit --------------------------------------------------------------------------------------------


def assert_valid_blocks(blocks: list[dict[str, Any]], surface: str = "message") -> None:
    """slack_sdk's block models take every block back unchanged, and Slack's limits hold."""
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        assert parsed.to_dict() == block
    budget = CARD_BLOCKS_JSON_BUDGET if surface == "message" else None
    assert block_problems(blocks, surface, budget) == []  # type: ignore[arg-type]


def assert_valid_view(view: Mapping[str, Any]) -> None:
    assert_valid_blocks(list(view["blocks"]), "home" if view["type"] == "home" else "modal")
    assert view_problems(view) == []


def all_text(blocks: Iterable[Mapping[str, Any]]) -> str:
    """Every piece of text in the blocks, joined (what a person would read)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            if isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(list(blocks))
    return "\n".join(found)


def buttons(message: StoredMessage | Mapping[str, Any]) -> list[str]:
    blocks = message.blocks if isinstance(message, StoredMessage) else message.get("blocks") or []
    return [
        e["text"]["text"]
        for b in blocks
        if b.get("type") == "actions"
        for e in b.get("elements", [])
        if e.get("type") == "button"
    ]


# ---- the scene --------------------------------------------------------------------------------------------


def mention(
    slack: SlackRecorder, words: str, *, user: str = SUPPORT, channel: str = CHANNEL
) -> dict[str, Any]:
    """A person types `@BillSleuth <words>` in the channel (kept by the recorder); Slack sends the event."""
    typed = slack.post_user_message(channel, p.mention_text(words), user=user)
    return p.app_mention(typed.text, user=user, channel=channel, ts=typed.ts)


def bot_replies(slack: SlackRecorder, channel: str, thread_ts: str) -> list[StoredMessage]:
    return [m for m in slack.replies(channel, thread_ts) if m.user == slack.workspace.bot_user_id]


@dataclass(frozen=True)
class OpenedCase:
    scenario: dict[str, Any]
    thread_ts: str  # the mention's ts: the case's thread
    card_ts: str  # the bot's message in that thread (progress, then the card)
    case_id: str
    credit_note_id: str | None


async def open_case(
    slack: SlackRecorder,
    client: SignedClient,
    bot: RunningBot,
    sc: dict[str, Any],
    *,
    user: str = SUPPORT,
) -> OpenedCase:
    """Mention the bot with a scenario's complaint and wait for the result in the thread."""
    event = mention(slack, f"{sc['customer_id']} {sc['question']}", user=user)
    assert (await client.send(event)).status == 200
    await bot.settled()
    thread = event["event"]["ts"]
    (message,) = bot_replies(slack, CHANNEL, thread)
    async with bot.runtime.engine.connect() as conn:
        row = (await conn.execute(select(schema.cases).where(schema.cases.c.message_ts == message.ts))).one()
        note = (
            await conn.execute(
                select(schema.credit_notes.c.id).where(schema.credit_notes.c.case_id == row.id)
            )
        ).scalar()
    return OpenedCase(sc, thread, message.ts, row.id, note)


def card_of(slack: SlackRecorder, opened: OpenedCase) -> StoredMessage:
    return slack.message(CHANNEL, opened.card_ts)


def snapshot(message: StoredMessage) -> dict[str, Any]:
    """The message as a person's Slack client shows it right now (later updates do not change it)."""
    return copy.deepcopy(message.to_slack())


async def outbox_delivered(bot: RunningBot, timeout: float = 10.0) -> None:
    """Wait until the bot has delivered every change its outbox holds: the rows go only after their
    redraws, approver notices and Home refreshes are out."""
    deadline = time.monotonic() + timeout
    while await count(bot, schema.outbox):
        if time.monotonic() > deadline:
            raise TimeoutError("the outbox was not delivered in time")
        await asyncio.sleep(0.05)


async def count(bot: RunningBot, table: Any, *where: Any) -> int:
    async with bot.runtime.engine.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(table).where(*where))).scalar_one()


# ---- `billsleuth bot` as processes ------------------------------------------------------------------------

BILLSLEUTH = Path(sys.executable).with_name("billsleuth")


def bot_env(db_url: str, slack: SlackRecorder) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    env.pop("PORT", None)
    env.update(
        DATABASE_URL=db_url,
        SLACK_API_URL=slack.api_url,
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        BILLSLEUTH_APPROVERS=",".join(FINANCE),
        BILLSLEUTH_INVESTIGATOR="offline",
    )
    return env


@contextlib.contextmanager
def bot_processes(
    db_url: str, slack: SlackRecorder, count: int, **extra_env: str
) -> Iterator[list[tuple[subprocess.Popen, str]]]:
    started: list[tuple[subprocess.Popen, str]] = []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen(
                [str(BILLSLEUTH), "bot", "--http", "--port", str(port)],
                env=bot_env(db_url, slack) | extra_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            started.append((process, f"http://127.0.0.1:{port}"))
        yield started
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()


async def eventually(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the bots did not get there in time")
        await asyncio.sleep(0.05)


async def consent_to_policy_change(
    slack: SlackRecorder, client: SignedClient, bot: RunningBot, approver: str
) -> None:
    """A current approver approves the pending policy change on its card (the bot's DM to them): a change
    that widens power — a bot restarted with a higher limit, say — holds only from then on."""
    channel = dm_channel(approver)

    def pending() -> list[StoredMessage]:
        return [m for m in slack.messages(channel) if m.text.startswith("Policy change #") and buttons(m)]

    await slack.wait_until(lambda: bool(pending()))
    card = pending()[-1]
    click = p.click(snapshot(card), user=approver, channel=channel, action_id=POLICY_APPROVE_ACTION_ID)
    assert (await client.send(click)).status == 200
    await bot.settled()
