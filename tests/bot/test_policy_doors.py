"""Who decides, and from where: the bot's start proposes the stored policy (audited; what widens power waits
for consent, tests/bot/test_policy_changes.py); CLI votes are judged by that stored policy whatever the
shell's environment says, and refused unless it opens the CLI's door; every vote records its door
(slack:<team id> or cli:<os account>), and a CLI vote says so on the card."""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg
from sqlalchemy import select

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from approvals.identity import os_account
from bot.cards import APPROVE_ACTION_ID
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SECRET,
    all_text,
    card_of,
    first_scenario,
    open_case,
    snapshot,
)
from tests.cli import Done, billsleuth_async

ALICE, BOB, _ = FINANCE
ME = os_account()  # who runs this test's CLI commands: cli:<ME> on their votes
OPTIONS: dict[str, Any] = dict(
    configuration=Configuration(investigator="offline"), recover=False, expiry_interval=None
)


def shell(db_url: str, **variables: str) -> dict[str, str]:
    """A shell's environment: this database, these settings. Who runs it is the process's real OS account
    (ME), whatever LOGNAME says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    env.update(DATABASE_URL=db_url, BILLSLEUTH_INVESTIGATOR="offline")
    return {**env, **variables}


async def cli(env: dict[str, str], *args: str) -> Done:
    """`billsleuth` (tests/cli.py), off the loop the bot serves on."""
    return await billsleuth_async(*args, env=env)


async def sources(bot: RunningBot, credit_note_id: str) -> list[tuple[str, str | None]]:
    votes = schema.approvals.c
    async with bot.runtime.engine.connect() as conn:
        rows = await conn.execute(
            select(votes.approver, votes.source)
            .where(votes.credit_note_id == credit_note_id)
            .order_by(votes.id)
        )
        return [(r.approver, r.source) for r in rows]


def activity(db_url: str, action: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT details FROM activity_log WHERE action = %s ORDER BY id", (action,)
        ).fetchall()
    return [details for (details,) in rows]


async def test_each_bot_start_proposes_its_policy_and_every_change_is_audited_old_and_new(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = slack.settings(signing_secret=SECRET)
    two = ApprovalSettings(approvers=frozenset(FINANCE[:2]))
    three = ApprovalSettings(approvers=frozenset(FINANCE), cli_decisions=True)
    async with running_bot(ready_db_url, settings, approval_settings=two, **OPTIONS):
        pass
    (first,) = activity(ready_db_url, "policy.changed")
    assert first["why"] == "bot start" and first["old"]["BILLSLEUTH_APPROVERS"] is None
    assert first["new"]["BILLSLEUTH_APPROVERS"] == ",".join(sorted(FINANCE[:2]))
    # A start that widens power proposes; until an approver consents the stored policy holds, here too.
    async with running_bot(ready_db_url, settings, approval_settings=three, **OPTIONS) as bot:
        assert bot.runtime.approval_settings == two
    (proposed,) = activity(ready_db_url, "policy.proposed")
    assert proposed["why"] == "bot start"
    assert proposed["old"] == {
        "BILLSLEUTH_APPROVERS": ",".join(sorted(FINANCE[:2])),
        "BILLSLEUTH_CLI_DECISIONS": "off",
    }
    assert proposed["new"] == {
        "BILLSLEUTH_APPROVERS": ",".join(sorted(FINANCE)),
        "BILLSLEUTH_CLI_DECISIONS": "on",
    }
    assert len(activity(ready_db_url, "policy.changed")) == 1
    # A start that narrows power applies at once.
    one = ApprovalSettings(approvers=frozenset(FINANCE[:1]))
    async with running_bot(ready_db_url, settings, approval_settings=one, **OPTIONS) as bot:
        assert bot.runtime.approval_settings == one
    _, second = activity(ready_db_url, "policy.changed")
    assert second["old"] == {"BILLSLEUTH_APPROVERS": ",".join(sorted(FINANCE[:2]))}
    assert second["new"] == {"BILLSLEUTH_APPROVERS": FINANCE[0]}
    async with running_bot(ready_db_url, settings, approval_settings=one, **OPTIONS):
        pass
    assert len(activity(ready_db_url, "policy.changed")) == 2  # the same policy again is no change
    with psycopg.connect(ready_db_url) as conn:
        stored = dict(conn.execute("SELECT name, value FROM policy").fetchall())
    assert stored == one.as_env()


async def test_a_cli_vote_under_a_stale_environment_is_judged_by_the_stored_policy(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    door_open = ApprovalSettings(approvers=frozenset(FINANCE), cli_decisions=True)
    sc = first_scenario(action="credit_note", single_approver=True)
    async with (
        running_bot(
            ready_db_url, slack.settings(signing_secret=SECRET), approval_settings=door_open, **OPTIONS
        ) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        opened = await open_case(slack, client, bot, sc)
        note_id = opened.credit_note_id or ""
        # This shell's environment adds an outsider to the approvers: the stored list holds, and it warns.
        stale = shell(
            ready_db_url, BILLSLEUTH_APPROVERS=",".join([*FINANCE, OUTSIDER]),
            BILLSLEUTH_CLI_DECISIONS="on",
        )  # fmt: skip
        outsider = await cli(stale, "approve", note_id, "--as", OUTSIDER)
        assert outsider.returncode != 0
        warning, error = outsider.stderr.strip().splitlines()
        assert "warning" in warning and "BILLSLEUTH_APPROVERS" in warning and OUTSIDER in warning
        assert "not_an_approver" in error
        assert await sources(bot, note_id) == []
        approved = await cli(stale, "approve", note_id, "--as", ALICE, "--json")
        assert approved.returncode == 0, approved.stderr
        assert json.loads(approved.stdout)["status"] == "issued"
        assert await sources(bot, note_id) == [(ALICE, f"cli:{ME}")]
        # The bot's outbox brings a change made elsewhere to the card.
        await slack.wait_until(lambda: f"via CLI by {ME}" in all_text(card_of(slack, opened).blocks))


async def test_cli_decisions_are_refused_unless_the_stored_policy_opens_the_door(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient, ready_db_url: str
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    opened = await open_case(slack, client, bot, sc)
    note_id = opened.credit_note_id or ""
    # The bot started with the door shut (the default); a shell that says "on" cannot open it.
    says_on = shell(ready_db_url, BILLSLEUTH_APPROVERS=",".join(FINANCE), BILLSLEUTH_CLI_DECISIONS="on")
    for args in (("approve", note_id, "--as", ALICE), ("reject", note_id, "--as", ALICE, "-m", "no")):
        refused = await cli(says_on, *args)
        assert refused.returncode != 0
        assert "BILLSLEUTH_CLI_DECISIONS" in refused.stderr and "cli_decisions_off" in refused.stderr
    assert await sources(bot, note_id) == []
    refusals = activity(ready_db_url, "approval.refused")
    assert [r["rule"] for r in refusals] == ["cli_decisions_off", "cli_decisions_off"]
    assert {r["source"] for r in refusals} == {f"cli:{ME}"}
    # The same person in Slack decides as always; the vote records the workspace it came from.
    card = snapshot(card_of(slack, opened))
    assert (
        await client.send(p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID))
    ).status == 200
    await bot.settled()
    assert await sources(bot, note_id) == [(ALICE, f"slack:{slack.workspace.team_id}")]
    assert "via CLI" not in all_text(card_of(slack, opened).blocks)


async def test_a_slash_command_vote_records_its_workspace(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=False)
    opened = await open_case(slack, client, bot, sc)
    note_id = opened.credit_note_id or ""
    payload = p.slash_command(
        f"approve {note_id}", user=BOB, channel=CHANNEL, response_url=slack.response_url()
    )
    assert (await client.send(payload)).status == 200
    await bot.settled()
    assert await sources(bot, note_id) == [(BOB, f"slack:{slack.workspace.team_id}")]
