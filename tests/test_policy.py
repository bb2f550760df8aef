"""The policy in force is stored in the database: stored on first use, shown, applied on purpose (audited),
enforced over a shell's own environment (which warns), and shown apart by doctor. And the OS account that
opened a case from the CLI cannot decide it from the CLI under any --as."""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg
import pytest

from approvals.config import ApprovalSettings, SettingsError
from approvals.identity import os_account
from tests.bot.helpers import FINANCE, SUPPORT, first_scenario
from tests.cli import billsleuth
from tests.os_accounts import OsAccount, run_cli

APPROVERS = "BILLSLEUTH_APPROVERS"


def shell(db_url: str, **variables: str) -> dict[str, str]:
    """A shell's environment: this database, these settings. Who runs it is the process's OS account."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    env.update(DATABASE_URL=db_url, BILLSLEUTH_INVESTIGATOR="offline")
    return {**env, **variables}


def cli(env: dict[str, str], *args: str, account: OsAccount | None = None) -> Any:
    """In this process as this test's OS account; in a process of its own as another `account`."""
    if account is not None:
        return run_cli(env, *args, account=account)
    return billsleuth(*args, env=env)


def policy_rows(db_url: str) -> list[tuple[str, dict[str, Any]]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT actor_id, details FROM activity_log WHERE action = 'policy.changed' ORDER BY id"
        ).fetchall()
    return [(actor, details) for actor, details in rows]


def shown(env: dict[str, str]) -> dict[str, Any]:
    result = cli(env, "policy", "show", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_the_settings_have_one_canonical_text_form_that_reads_back_equal() -> None:
    settings = ApprovalSettings.from_env(
        {
            APPROVERS: " U0FIN0002,U0FIN0001 ",
            "BILLSLEUTH_SUPPORT": "U0SUPPORT1",
            "BILLSLEUTH_DAILY_CREDIT_LIMIT": "5000,JPY:750000",
            "BILLSLEUTH_CLI_DECISIONS": "ON",
        }
    )
    assert settings.as_env()[APPROVERS] == "U0FIN0001,U0FIN0002"
    assert settings.as_env()["BILLSLEUTH_CLI_DECISIONS"] == "on"
    assert settings.support == frozenset({"U0SUPPORT1"}) and settings.cli_decisions
    assert ApprovalSettings.from_env(settings.as_env()) == settings
    assert not ApprovalSettings.from_env({}).cli_decisions  # the door is shut by default
    with pytest.raises(SettingsError, match="BILLSLEUTH_CLI_DECISIONS"):
        ApprovalSettings.from_env({"BILLSLEUTH_CLI_DECISIONS": "yes please"})


def test_the_first_command_stores_its_policy_and_show_prints_it(db_url: str) -> None:
    env = shell(db_url, BILLSLEUTH_APPROVERS=FINANCE[0])
    before = shown(env)
    assert before["stored"] is False and before["policy"] is None
    assert before["environment"][APPROVERS] == FINANCE[0]
    assert policy_rows(db_url) == []  # showing changes nothing
    listed = cli(env, "list")
    assert listed.returncode == 0, listed.stderr
    assert "warning" not in listed.stderr
    after = shown(env)
    assert after["stored"] is True and after["differences"] == []
    assert after["policy"] == after["environment"]
    ((actor, details),) = policy_rows(db_url)
    assert actor == f"cli:{os_account()}" and details["why"] == "first use"
    assert details["new"][APPROVERS] == FINANCE[0] and details["old"][APPROVERS] is None
    text = cli(env, "policy", "show")
    assert text.returncode == 0 and f"{APPROVERS} = {FINANCE[0]}" in text.stdout


def test_a_shell_that_disagrees_warns_doctor_shows_it_and_apply_stores_it_on_purpose(db_url: str) -> None:
    first = shell(db_url, BILLSLEUTH_APPROVERS=FINANCE[0])
    assert cli(first, "list").returncode == 0  # stores FINANCE[0] as the policy
    # A shell that calls itself mallory: the record names its real OS account all the same.
    wider = shell(
        db_url, LOGNAME="mallory", USER="mallory", BILLSLEUTH_APPROVERS=f"{FINANCE[0]},{FINANCE[1]}"
    )
    differences = shown(wider)["differences"]
    assert differences == [
        {"variable": APPROVERS, "stored": FINANCE[0], "environment": f"{FINANCE[0]},{FINANCE[1]}"}
    ]
    listed = cli(wider, "list")
    assert listed.returncode == 0
    (warning,) = listed.stderr.strip().splitlines()
    assert warning.startswith("billsleuth: warning:") and APPROVERS in warning
    doctor = cli(wider, "doctor")
    assert "! policy: this environment differs from the stored policy" in doctor.stdout
    assert APPROVERS in doctor.stdout and "billsleuth policy apply" in doctor.stdout
    assert "✓ policy: the stored policy matches" in cli(first, "doctor").stdout
    assert len(policy_rows(db_url)) == 1  # nobody but the first command wrote it
    # An added approver widens power: apply proposes it, and nothing changes until another approver consents
    # in Slack (tests/bot/test_policy_changes.py clicks it through).
    applied = cli(wider, "policy", "apply")
    assert applied.returncode == 0, applied.stderr
    assert "pending until another current approver approves it in Slack" in applied.stdout
    assert len(policy_rows(db_url)) == 1
    (pending,) = shown(wider)["pending"]
    assert pending["proposed_by"] == f"cli:{os_account()}"
    assert pending["changes"] == [
        {"variable": APPROVERS, "stored": FINANCE[0], "proposed": f"{FINANCE[0]},{FINANCE[1]}"}
    ]
    assert len(shown(wider)["differences"]) == 1
    again = cli(wider, "policy", "apply")
    assert again.returncode == 0 and len(shown(wider)["pending"]) == 1  # the same proposal is not a second
    # Removing every approver narrows power: it applies at once (audited).
    nobody = shell(db_url, BILLSLEUTH_APPROVERS="")
    assert cli(nobody, "policy", "apply").returncode == 0
    (_, (actor, details)) = policy_rows(db_url)
    assert actor == f"cli:{os_account()}" and details["why"] == "policy apply"
    assert details["old"] == {APPROVERS: FINANCE[0]} and details["new"] == {APPROVERS: ""}
    assert shown(nobody)["differences"] == []
    assert shown(nobody)["pending"] == []  # the pending change was made on a list that is gone: superseded
    unchanged = cli(nobody, "policy", "apply")
    assert unchanged.returncode == 0 and "nothing changed" in unchanged.stdout
    assert len(policy_rows(db_url)) == 2  # an apply that changes nothing is not a change


def test_the_os_account_that_opened_a_case_cannot_decide_it_under_any_as(
    seeded_db_url: str, second_os_account: OsAccount
) -> None:
    door_open = {APPROVERS: ",".join(FINANCE), "BILLSLEUTH_CLI_DECISIONS": "on"}
    env = shell(seeded_db_url, **door_open)
    sc = first_scenario(action="credit_note", single_approver=True)
    desk = second_os_account  # the support desk's shell
    opened = cli(
        env, "case", "open", sc["customer_id"], sc["question"], "--as", SUPPORT, "--json", account=desk
    )
    assert opened.returncode == 0, opened.stderr
    case = json.loads(opened.stdout)
    note_id = case["credit_note"]["id"]
    for approver in FINANCE[:2]:  # a Slack id that is not the requester's does not help
        refused = cli(env, "approve", note_id, "--as", approver, account=desk)
        assert refused.returncode != 0 and "requester_cannot_approve" in refused.stderr
        assert f"cli:{desk.name}" in refused.stderr
    approved = cli(env, "approve", note_id, "--as", FINANCE[0], "--json")  # finance: this test's account
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "issued"
    (vote,) = json.loads(cli(env, "show", note_id, "--json").stdout)["approvals"]
    assert vote["approver"] == FINANCE[0] and vote["source"] == f"cli:{os_account()}"
    assert vote["via"] == f"via CLI by {os_account()}"
