"""Rules change only with consent, and loudly (issue 25 item 4): a change that widens power — from `policy
apply`, a bot start or `budget raise` — is a pending policy change until a current approver other than its
proposer approves it in Slack (a signed click through the real Bolt app); a change that narrows power
applies at once; every step is an activity row and a message in Slack."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import psycopg

from agent.model.budget import month_of
from approvals.config import ApprovalSettings
from bot.cards.ids import POLICY_APPROVE_ACTION_ID, POLICY_REJECT_ACTION_ID
from bot.config import SlackSettings
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder, StoredMessage
from bot.slack_testing import payloads as p
from bot.slack_testing.recorder import dm_channel
from tests.bot.helpers import FINANCE, SECRET, all_text, buttons, offline_bot, snapshot
from tests.cli import Done, billsleuth_async

ALICE, BOB, CAROL = FINANCE
FINANCE_CHANNEL = "C0FINANCE"
APPROVERS = "BILLSLEUTH_APPROVERS"


def shell(db_url: str, **variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    return {**env, "DATABASE_URL": db_url, "BILLSLEUTH_INVESTIGATOR": "offline", **variables}


async def cli(env: dict[str, str], *args: str) -> Done:
    """`billsleuth` (tests/cli.py: in this process, as a process would see it), off the loop the bot
    serves on; what these tests prove is the policy's path through the store, not the process boundary."""
    return await billsleuth_async(*args, env=env)


def stored(db_url: str) -> dict[str, str]:
    with psycopg.connect(db_url) as conn:
        return dict(conn.execute("SELECT name, value FROM policy").fetchall())


def activity(db_url: str, *actions: str) -> list[tuple[str, str, dict[str, Any]]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT action, actor_id, details FROM activity_log WHERE action = ANY(%s) ORDER BY id",
            (list(actions),),
        ).fetchall()
    return [(action, actor, details) for action, actor, details in rows]


def policy_cards(slack: SlackRecorder, channel: str) -> list[StoredMessage]:
    return [m for m in slack.messages(channel) if m.text.startswith("Policy change #")]


def in_finance_channel(slack: SlackRecorder) -> SlackSettings:
    return slack.settings(signing_secret=SECRET).model_copy(update={"finance_channel": FINANCE_CHANNEL})


async def click(
    client: SignedClient, bot: RunningBot, card: StoredMessage | dict[str, Any], user: str, action_id: str
) -> None:
    """A signed click on the card as `user` sees it (a StoredMessage now, or a snapshot taken earlier)."""
    message = {**snapshot(card), "channel": card.channel} if isinstance(card, StoredMessage) else card
    payload = p.click(message, user=user, channel=message["channel"], action_id=action_id)
    assert (await client.send(payload)).status == 200
    await bot.settled()


def refusals_for(slack: SlackRecorder, user: str) -> list[str]:
    return [e.text for e in slack.ephemerals(user)]


async def test_policy_apply_adding_an_approver_changes_nothing_until_a_second_approver_clicks(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    two = ApprovalSettings(approvers=frozenset({ALICE, BOB}))
    async with (
        offline_bot(ready_db_url, slack, settings=in_finance_channel(slack), policy=two) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        before = stored(ready_db_url)
        wider = shell(ready_db_url, **{APPROVERS: f"{ALICE},{BOB},{CAROL}"})
        applied = await cli(wider, "policy", "apply")
        assert applied.returncode == 0, applied.stderr
        assert "pending until another current approver approves it in Slack" in applied.stdout
        assert stored(ready_db_url) == before  # nothing changed yet
        shown = json.loads((await cli(wider, "policy", "show", "--json")).stdout)
        (pending,) = shown["pending"]
        assert pending["proposed_by"].startswith("cli:") and pending["changes"] == [
            {"variable": APPROVERS, "stored": f"{ALICE},{BOB}", "proposed": f"{ALICE},{BOB},{CAROL}"}
        ]
        assert bot.runtime.approval_settings.approvers == {ALICE, BOB}  # the running bot holds to it too

        # The card: old and new values, Approve and Reject, each behind a confirm dialog.
        await slack.wait_until(lambda: len(policy_cards(slack, FINANCE_CHANNEL)) == 1)
        (card,) = policy_cards(slack, FINANCE_CHANNEL)
        text = all_text(card.blocks)
        assert f"Policy change #{pending['id']}" in text and "pending" in text
        assert f"`{ALICE},{BOB}` → `{ALICE},{BOB},{CAROL}`" in text
        assert buttons(card) == ["Approve", "Reject"]
        assert all("confirm" in e for b in card.blocks if b["type"] == "actions" for e in b["elements"])

        as_first_drawn = {**snapshot(card), "channel": card.channel}
        # The person to be added cannot let themselves in.
        await click(client, bot, card, CAROL, POLICY_APPROVE_ACTION_ID)
        assert "not_an_approver" in refusals_for(slack, CAROL)[-1]
        assert stored(ready_db_url) == before

        # A current approver consents: it is in force, for the running bot at once.
        await click(client, bot, card, ALICE, POLICY_APPROVE_ACTION_ID)
        assert stored(ready_db_url)[APPROVERS] == f"{ALICE},{BOB},{CAROL}"
        assert bot.runtime.approval_settings.approvers == {ALICE, BOB, CAROL}
        await slack.wait_until(lambda: buttons(policy_cards(slack, FINANCE_CHANNEL)[0]) == [])
        card = policy_cards(slack, FINANCE_CHANNEL)[0]
        assert "approved" in all_text(card.blocks) and f"Approved by <@{ALICE}>" in all_text(card.blocks)

        # A stale click on the card as it was changes nothing and says why.
        await click(client, bot, as_first_drawn, BOB, POLICY_REJECT_ACTION_ID)
        assert "policy_change_decided" in refusals_for(slack, BOB)[-1]

    rows = activity(ready_db_url, "policy.proposed", "policy.changed", "policy.refused")
    assert [(action, details.get("rule")) for action, _, details in rows[1:]] == [
        ("policy.proposed", None),
        ("policy.refused", "not_an_approver"),
        ("policy.changed", None),
        ("policy.refused", "policy_change_decided"),
    ]
    changed = rows[3]
    assert changed[1] == ALICE and changed[2]["approved_by"] == ALICE
    assert changed[2]["old"] == {APPROVERS: f"{ALICE},{BOB}"}


async def test_removing_an_approver_applies_at_once_and_each_approver_hears_of_it(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    three = ApprovalSettings(approvers=frozenset(FINANCE))
    async with offline_bot(ready_db_url, slack, policy=three) as bot:
        narrower = shell(ready_db_url, **{APPROVERS: f"{ALICE},{BOB}"})
        applied = await cli(narrower, "policy", "apply")
        assert applied.returncode == 0, applied.stderr
        assert "applied" in applied.stdout
        assert stored(ready_db_url)[APPROVERS] == f"{ALICE},{BOB}"
        assert json.loads((await cli(narrower, "policy", "show", "--json")).stdout)["pending"] == []
        # Announced to the approvers in force now, by DM (no finance channel): no buttons, nothing to decide.
        await slack.wait_until(lambda: all(policy_cards(slack, dm_channel(u)) for u in (ALICE, BOB)))
        await slack.wait_until(lambda: bot.runtime.approval_settings.approvers == {ALICE, BOB})
        (card,) = policy_cards(slack, dm_channel(ALICE))
        assert buttons(card) == [] and "Applied at once" in all_text(card.blocks)
        assert policy_cards(slack, dm_channel(CAROL)) == []
    (_, (_, _, details)) = activity(ready_db_url, "policy.changed")
    assert details["old"] == {APPROVERS: ",".join(FINANCE)} and details["new"] == {
        APPROVERS: f"{ALICE},{BOB}"
    }
    assert activity(ready_db_url, "policy.proposed") == []


async def test_a_bot_start_that_widens_waits_a_rejection_changes_nothing_and_the_narrowing_part_applies(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = in_finance_channel(slack)
    first = ApprovalSettings(approvers=frozenset({ALICE, BOB}), hold_max_days=7)
    async with offline_bot(ready_db_url, slack, settings=settings, policy=first):
        pass
    # Its environment turns the CLI's door on (wider) and shortens the hold (narrower).
    second = ApprovalSettings(approvers=frozenset({ALICE, BOB}), hold_max_days=3, cli_decisions=True)
    async with (
        offline_bot(ready_db_url, slack, settings=settings, policy=second) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        assert (
            not bot.runtime.approval_settings.cli_decisions
            and bot.runtime.approval_settings.hold_max_days == 3
        )
        await slack.wait_until(lambda: len(policy_cards(slack, FINANCE_CHANNEL)) == 2)
        applied, pending = policy_cards(slack, FINANCE_CHANNEL)
        assert "BILLSLEUTH_HOLD_MAX_DAYS" in all_text(applied.blocks) and buttons(applied) == []
        assert "BILLSLEUTH_CLI_DECISIONS" in all_text(pending.blocks) and buttons(pending) == [
            "Approve",
            "Reject",
        ]
        await click(client, bot, pending, ALICE, POLICY_REJECT_ACTION_ID)
        await slack.wait_until(
            lambda: "Rejected by" in all_text(policy_cards(slack, FINANCE_CHANNEL)[1].blocks)
        )
    assert stored(ready_db_url)["BILLSLEUTH_CLI_DECISIONS"] == "off"
    assert stored(ready_db_url)["BILLSLEUTH_HOLD_MAX_DAYS"] == "3"
    (_, actor, details) = activity(ready_db_url, "policy.rejected")[0]
    assert actor == ALICE and details["new"] == {"BILLSLEUTH_CLI_DECISIONS": "on"}
    # The same environment starting again asks again, once: a pending proposal is not made twice.
    async with offline_bot(ready_db_url, slack, settings=settings, policy=second):
        pass
    async with offline_bot(ready_db_url, slack, settings=settings, policy=second):
        pass
    assert len(activity(ready_db_url, "policy.proposed")) == 2


async def test_a_budget_raise_waits_for_an_approver_who_did_not_propose_it(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    month = month_of()
    door_open = ApprovalSettings(
        approvers=frozenset({ALICE, BOB}), cli_decisions=True, model_budget=Decimal("1")
    )
    async with (
        offline_bot(ready_db_url, slack, settings=in_finance_channel(slack), policy=door_open) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        desk = shell(ready_db_url, **door_open.as_env())
        raised = await cli(desk, "budget", "raise", "80", "--as", ALICE, "--json")
        assert raised.returncode == 0, raised.stderr
        answer = json.loads(raised.stdout)
        assert (answer["status"], answer["old"], answer["new"], answer["month"]) == (
            "pending",
            "1",
            "80",
            month,
        )
        assert answer["policy_change"]["proposed_by"] == ALICE
        shown = json.loads((await cli(desk, "budget", "show", "--json")).stdout)
        assert shown["limit"] == "1.000000"  # not yet
        await slack.wait_until(lambda: len(policy_cards(slack, FINANCE_CHANNEL)) == 1)
        (card,) = policy_cards(slack, FINANCE_CHANNEL)
        assert f"the model budget for {month}" in all_text(card.blocks)
        await click(client, bot, card, ALICE, POLICY_APPROVE_ACTION_ID)
        assert "proposer_cannot_decide" in refusals_for(slack, ALICE)[-1]
        assert json.loads((await cli(desk, "budget", "show", "--json")).stdout)["limit"] == "1.000000"
        await click(client, bot, card, BOB, POLICY_APPROVE_ACTION_ID)
        shown = json.loads((await cli(desk, "budget", "show", "--json")).stdout)
        assert (shown["limit"], shown["limit_from"]) == ("80.000000", "raise")
    (_, actor, details) = activity(ready_db_url, "budget.raised")[0]
    assert actor == BOB and (details["old"], details["new"]) == ("1.000000", "80.000000")
    # A lower limit narrows: it applies at once, the CLI decisions door still needed.
    lower = await cli(shell(ready_db_url, **door_open.as_env()), "budget", "raise", "40", "--as", BOB)
    assert lower.returncode == 0 and "set to $40" in lower.stdout
    # Shutting the CLI's door narrows too (applied at once); a raise from the CLI is then refused.
    door_shut = shell(ready_db_url, **door_open.model_copy(update={"cli_decisions": False}).as_env())
    assert (await cli(door_shut, "policy", "apply")).returncode == 0
    shut = await cli(door_shut, "budget", "raise", "500", "--as", BOB)
    assert shut.returncode == 2 and "cli_decisions_off" in shut.stderr
    assert activity(ready_db_url, "budget.raised")[-1][2]["rule"] == "cli_decisions_off"
