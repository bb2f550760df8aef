"""A case opened from the CLI is opened in a Slack user's name (`case open --as U…`): that person is told
by DM, through the bot's outbox, which OS account opened it; they decide nothing on it from any door (a
click on App Home, the slash command); and the approvers' notices skip them."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from approvals.identity import os_account
from bot.cards import APPROVE_ACTION_ID
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from bot.slack_testing.recorder import dm_channel
from tests.bot.helpers import FINANCE, SECRET, all_text, first_scenario, offline_bot
from tests.bot.test_policy_doors import cli, shell
from tests.bot.test_slash_and_home import slash

ALICE, BOB, CAROL = FINANCE


def dm_texts(slack: SlackRecorder, user: str) -> list[str]:
    return [all_text(m.blocks) + "\n" + m.text for m in slack.messages(dm_channel(user))]


def told(slack: SlackRecorder, user: str, needle: str) -> bool:
    return any(needle in text for text in dm_texts(slack, user))


def note_state(db_url: str, note_id: str) -> tuple[str, int]:
    with psycopg.connect(db_url) as conn:
        (status,) = conn.execute("SELECT status FROM credit_notes WHERE id = %s", (note_id,)).fetchone() or (
            "?",
        )
        (votes,) = conn.execute(
            "SELECT count(*) FROM approvals WHERE credit_note_id = %s", (note_id,)
        ).fetchone() or (0,)
    return status, votes


def refused_rules(db_url: str) -> list[tuple[str, str]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT actor_id, details FROM activity_log WHERE action = 'approval.refused' ORDER BY id"
        ).fetchall()
    return [(actor, details["rule"]) for actor, details in rows]


async def test_a_cli_opened_case_tells_its_requester_who_then_decides_nothing_in_slack(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    async with (
        offline_bot(ready_db_url, slack, outbox_poll=0.2) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        # ALICE is an approver: only being its requester keeps her from deciding this case.
        env = shell(ready_db_url, BILLSLEUTH_APPROVERS=",".join(FINANCE))
        opened = await cli(env, "case", "open", sc["customer_id"], sc["question"], "--as", ALICE, "--json")
        assert opened.returncode == 0, opened.stderr
        case = json.loads(opened.stdout)
        note_id = case["credit_note"]["id"]
        assert case["requester"] == ALICE

        # Told by DM, once, through the outbox: which OS account opened which case in her name.
        sentence = f"A case was opened in your name from the CLI by {os_account()}"
        await slack.wait_until(lambda: told(slack, ALICE, sentence))
        await slack.wait_until(lambda: told(slack, BOB, note_id) and told(slack, CAROL, note_id))
        await bot.settled()
        (dm,) = dm_texts(slack, ALICE)  # that DM, and no approver notice: she may not decide it
        assert case["case_id"] in dm and sc["customer_id"] in dm

        # Her click on App Home (a signed payload through the real Bolt app) is refused.
        assert (await client.send(p.app_home_opened(user=ALICE))).status == 200
        await bot.settled()
        home = slack.home(ALICE)
        assert home is not None
        block_id, element = p.find_element(home["blocks"], APPROVE_ACTION_ID, note_id)
        click = p.view_block_actions(user=ALICE, action=element, block_id=block_id, view=home)
        assert (await client.send(click)).status == 200
        await bot.settled()
        assert note_state(ready_db_url, note_id) == ("draft", 0)
        # The case has no card to be ephemeral under: the refusal comes to her DM with the app.
        assert told(slack, ALICE, "requester_cannot_approve")

        # And so is the slash command.
        ack, responses = await slash(slack, client, bot, f"approve {note_id}", ALICE)
        assert "requester_cannot_approve" in json.dumps([ack, responses])
        assert note_state(ready_db_url, note_id) == ("draft", 0)
        assert refused_rules(ready_db_url) == [(ALICE, "requester_cannot_approve")] * 2
        assert sum(sentence in text for text in dm_texts(slack, ALICE)) == 1  # the outbox told her once

        # Another approver decides it as always.
        assert (await client.send(p.app_home_opened(user=BOB))).status == 200
        await bot.settled()
        bob_home: dict[str, Any] = slack.home(BOB) or {}
        block_id, element = p.find_element(bob_home["blocks"], APPROVE_ACTION_ID, note_id)
        click = p.view_block_actions(user=BOB, action=element, block_id=block_id, view=bob_home)
        assert (await client.send(click)).status == 200
        await bot.settled()
        assert note_state(ready_db_url, note_id) == ("issued", 1)
