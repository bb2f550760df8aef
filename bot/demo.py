"""`billsleuth demo`: the whole Slack flow on this machine, with nothing to set up.

The real Bolt app serves HTTP on 127.0.0.1 against a local recording Slack Web API server, on the embedded
Postgres with the offline investigator; the demo drives it with correctly signed Slack payloads the way
Slack would deliver them, prints each message as a person would read it, and saves the Block Kit JSON
under $BILLSLEUTH_HOME/demo/ (paste it into Block Kit Builder).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import select

from agent.auditor.sweep import run_findings_sweep
from agent.graph.configuration import Configuration
from approvals.activity import USER
from approvals.config import ApprovalSettings
from approvals.seals import DAILY, verify_anchor
from bot.cards import APPROVE_ACTION_ID, REJECT_ACTION_ID, REJECT_REASON_ACTION_ID, REJECT_REASON_BLOCK_ID
from bot.cards.ids import REQUEST_CHANGES_ACTION_ID, SWEEP_OPEN_CASE_ACTION_ID
from bot.cards.text import render_blocks
from bot.flows.digest import post_findings_digest
from bot.flows.seals import seal_now
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from bot.slack_testing.recorder import dm_channel
from engine import schema
from engine.db import libpq_url_of

SECRET = "demo-signing-secret-0123456789abcdef"
CHANNEL = "C0BILLING"
SWEEP_CHANNEL = "C0SWEEP"
SUPPORT = "U0SUPPORT1"
FINANCE = ("U0FINANCE1", "U0FINANCE2")
OUTSIDER = "U0SALES001"
THRESHOLD = Decimal("300.00")
BUTTON_LABELS = {
    APPROVE_ACTION_ID: "Approve",
    REJECT_ACTION_ID: "Reject",
    REQUEST_CHANGES_ACTION_ID: "Request changes",
}

Say = Callable[[str], None]


@dataclass
class Scene:
    """One demo run: the recorder, the bot, a signed client, and where the Block Kit JSON goes."""

    slack: SlackRecorder
    bot: RunningBot
    client: SignedClient
    out_dir: Path
    say: Say
    saved: list[Path] = field(default_factory=list)

    async def deliver(self, payload: dict[str, Any]) -> None:
        delivery = await self.client.send(payload)
        if delivery.status != 200:
            raise RuntimeError(f"the app answered HTTP {delivery.status}: {delivery.body!r}")
        await self.bot.settled(timeout=60)

    async def mention(self, words: str) -> str:
        typed = self.slack.post_user_message(CHANNEL, p.mention_text(words), user=SUPPORT)
        self.say(f"\n>>> @{SUPPORT} in #{CHANNEL}: @BillSleuth {words}")
        await self.deliver(p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts))
        return typed.ts

    def bot_messages(self, thread_ts: str) -> list[Any]:
        bot_user = self.slack.workspace.bot_user_id
        return [m for m in self.slack.replies(CHANNEL, thread_ts) if m.user == bot_user]

    def show(self, label: str, message: Any) -> None:
        shown = render_blocks(message.blocks) if message.blocks else message.text
        self.say(f"\n┌─ {label}\n" + "\n".join("│ " + line for line in shown.splitlines()))
        path = self.out_dir / f"{len(self.saved) + 1:02d}-{label.lower().replace(' ', '-')[:48]}.json"
        path.write_text(
            json.dumps({"blocks": message.blocks}, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        self.saved.append(path)

    async def click(self, thread_ts: str, user: str, action_id: str) -> None:
        """A click on the newest message of the thread that has this button."""
        message = next(m for m in reversed(self.bot_messages(thread_ts)) if action_id in json.dumps(m.blocks))
        self.say(f"\n>>> @{user} clicks {BUTTON_LABELS[action_id]}")
        await self.deliver(p.click(message.to_slack(), user=user, channel=CHANNEL, action_id=action_id))

    async def reply_in_thread(self, thread_ts: str, words: str) -> None:
        typed = self.slack.post_user_message(
            CHANNEL, p.mention_text(words), user=SUPPORT, thread_ts=thread_ts
        )
        self.say(f"\n>>> @{SUPPORT} in the thread: @BillSleuth {words}")
        event = p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts, thread_ts=thread_ts)
        await self.deliver(event)

    async def direct_messages(self, user: str, count: int) -> list[Any]:
        """The bot's DMs to `user`, once there are `count` (the outbox sends them a moment after a change)."""
        await self.slack.wait_until(lambda: len(self.slack.messages(dm_channel(user))) >= count, timeout=10)
        return self.slack.messages(dm_channel(user))

    async def submit_reason(self, user: str, words: str) -> None:
        modal = self.slack.views("modal")[-1].view
        self.say(f'    (a modal opens; @{user} types "{words}")')
        values = {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: words}}
        await self.deliver(p.view_submission(modal, user=user, values=values))

    def ephemerals_for(self, user: str) -> list[str]:
        return [e.text for e in self.slack.ephemerals(user)]


def pick(scenarios: list[dict[str, Any]], *, credit: bool, two_person: bool = False, skip: int = 0) -> dict:
    found = [
        sc
        for sc in scenarios
        if (sc["truth"]["expected_action"] == "credit_note") == credit
        and (not credit or (Decimal(sc["truth"]["overcharge"]) >= THRESHOLD) == two_person)
        and not (credit and sc["truth"]["variant"] == "quantity_change_ignored")
    ]
    return found[skip]


async def play(scene: Scene, scenarios: list[dict[str, Any]]) -> None:
    say = scene.say
    single = pick(scenarios, credit=True)
    say("\n=== 1. An overcharge: investigation, evidence card, one finance approval ===")
    thread = await scene.mention(f"{single['customer_id']} {single['question']}")
    scene.show("Evidence card", scene.bot_messages(thread)[0])
    (notice,) = await scene.direct_messages(FINANCE[0], 1)
    scene.show(f"Direct message to @{FINANCE[0]}", notice)
    await scene.click(thread, OUTSIDER, APPROVE_ACTION_ID)
    say("    (only the clicker sees:) " + scene.ephemerals_for(OUTSIDER)[-1])
    await scene.click(thread, FINANCE[0], APPROVE_ACTION_ID)
    messages = scene.bot_messages(thread)
    scene.show("Card after approval", messages[0])
    scene.show("Reply for the customer (issued)", messages[-1])
    (other,) = await scene.direct_messages(FINANCE[1], 1)
    await scene.slack.wait_until(lambda: "Decided" in render_blocks(other.blocks), timeout=10)
    scene.show(f"The direct message to @{FINANCE[1]}, once decided", other)

    double = pick(scenarios, credit=True, two_person=True)
    say(f"\n=== 2. {double['truth']['overcharge']} is over {THRESHOLD}: two finance users must approve ===")
    thread = await scene.mention(f"{double['customer_id']} {double['question']}")
    await scene.click(thread, FINANCE[0], APPROVE_ACTION_ID)
    scene.show("Card with one of two approvals", scene.bot_messages(thread)[0])
    await scene.click(thread, FINANCE[0], APPROVE_ACTION_ID)
    say("    (only the clicker sees:) " + scene.ephemerals_for(FINANCE[0])[-1])
    await scene.click(thread, FINANCE[1], APPROVE_ACTION_ID)
    messages = scene.bot_messages(thread)
    scene.show("Card after the second approval", messages[0])
    scene.show("Reply for the customer (issued, two approvals)", messages[-1])

    rejected = pick(scenarios, credit=True, skip=1)
    say("\n=== 3. Finance rejects a draft with a reason ===")
    thread = await scene.mention(f"{rejected['customer_id']} {rejected['question']}")
    await scene.click(thread, FINANCE[1], REJECT_ACTION_ID)
    await scene.submit_reason(FINANCE[1], "Sales agreed this price with the customer in writing")
    messages = scene.bot_messages(thread)
    scene.show("Card after rejection", messages[0])
    scene.show("Rewritten reply for the customer", messages[-1])

    doubted = pick(scenarios, credit=True, skip=2)
    say("\n=== 4. Finance asks a question first: Request changes, the answer, a new round ===")
    thread = await scene.mention(f"{doubted['customer_id']} {doubted['question']}")
    await scene.click(thread, FINANCE[0], REQUEST_CHANGES_ACTION_ID)
    await scene.submit_reason(FINANCE[0], "Did the customer keep using the product after the change?")
    card, question = scene.bot_messages(thread)[-2:]
    scene.show("Card sent back", card)
    scene.show("The question, in the thread", question)
    await scene.reply_in_thread(
        thread, "No: they stopped on the day they changed plans, nobody logged in after."
    )
    scene.show("A new round: a new card", scene.bot_messages(thread)[-1])
    await scene.click(thread, FINANCE[0], APPROVE_ACTION_ID)
    scene.show("Reply for the customer (issued in round 2)", scene.bot_messages(thread)[-1])

    benign = pick(scenarios, credit=False)
    say("\n=== 5. A correct bill: explained, nothing to credit ===")
    thread = await scene.mention(f"{benign['customer_id']} {benign['question']}")
    scene.show("Explanation", scene.bot_messages(thread)[0])

    say("\n=== 6. No customer id: the bot asks ===")
    thread = await scene.mention("why did you charge me 89.00 in May?")
    scene.show("Question back", scene.bot_messages(thread)[0])

    named = pick(scenarios, credit=True, skip=3)
    name = await customer_name(scene, named["customer_id"])
    say(f"\n=== 7. A customer named, not numbered: {name} is found by name ===")
    thread = await scene.mention(f"Hi, this is {name}. {named['question']}")
    scene.show("Evidence card (the customer found by name)", scene.bot_messages(thread)[0])
    await play_findings_digest(scene)
    await play_seal(scene)


async def play_seal(scene: Scene) -> None:
    """The activity log's head sealed in Slack (the bot does it daily and after policy changes), and the
    command an auditor runs with it."""
    scene.say("\n=== 9. History sealed outside the database ===")
    seal = await seal_now(scene.bot.runtime, DAILY)
    if seal is None:
        return
    posted = scene.slack.messages(dm_channel(FINANCE[0]))[-1]
    scene.show(f"Activity log seal, to @{FINANCE[0]}", posted)
    report = await verify_anchor(scene.bot.runtime.engine, seal)
    scene.say(f"\n>>> an auditor: billsleuth activity verify --anchor {seal.line()}\n{report.line()}")


async def play_findings_digest(scene: Scene) -> None:
    """`billsleuth sweep --post` (the bot does it daily): the overcharges nobody reported, and a case
    opened from the digest."""
    scene.say("\n=== 8. Overcharges nobody reported yet: the findings digest ===")
    runtime = scene.bot.runtime
    result = await run_findings_sweep(libpq_url_of(runtime.engine))
    posted = await post_findings_digest(
        runtime.client, runtime.engine, SWEEP_CHANNEL, result, actor_type=USER, actor_id="demo"
    )
    if posted is None:
        scene.say("(nothing new since the last digest)")
        return
    digest = scene.slack.message(SWEEP_CHANNEL, posted.ts)
    scene.show("Findings digest", digest)
    scene.say(f"\n>>> @{SUPPORT} clicks Open case on the largest")
    click = p.click(
        digest.to_slack(), user=SUPPORT, channel=SWEEP_CHANNEL, action_id=SWEEP_OPEN_CASE_ACTION_ID
    )
    await scene.deliver(click)
    bot_user = scene.slack.workspace.bot_user_id
    card = [m for m in scene.slack.replies(SWEEP_CHANNEL, posted.ts) if m.user == bot_user][-1]
    scene.show("Case from the digest, in its thread", card)


async def customer_name(scene: Scene, customer_id: str) -> str:
    async with scene.bot.runtime.service.engine.connect() as conn:
        query = select(schema.customers.c.name).where(schema.customers.c.id == customer_id)
        return str((await conn.execute(query)).scalar_one())


async def run_demo(
    database_url: str, out_dir: Path, scenarios: list[dict[str, Any]], say: Say = print
) -> Scene:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    async with SlackRecorder() as slack:
        approvals = ApprovalSettings(approvers=frozenset(FINANCE), two_person_threshold=THRESHOLD)
        async with (
            running_bot(
                database_url,
                slack.settings(signing_secret=SECRET),
                configuration=Configuration(investigator="offline"),
                approval_settings=approvals,
                recover=False,
                expiry_interval=None,
            ) as bot,
            SignedClient(bot.url, SECRET) as client,
        ):
            say(f"BillSleuth is serving {bot.url}; Slack Web API calls go to the recorder at {slack.api_url}")
            scene = Scene(slack, bot, client, out_dir, say)
            await play(scene, scenarios)
            methods = ("chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "views.publish")
            counts = {m: len(slack.calls(m)) for m in methods}
            say(
                f"\nSlack Web API calls: {counts['chat.postMessage']} posts, {counts['chat.update']} edits, "
                f"{counts['chat.postEphemeral']} ephemeral, {counts['views.open']} modals, "
                f"{counts['views.publish']} App Home refreshes"
            )
            say(f"Block Kit JSON of each card: {out_dir}/ (paste into Block Kit Builder)")
            return scene
