"""One person, one vote, at the CLI's door: a CLI caller is the process's real OS account (LOGNAME and USER
say nothing), a note counts one CLI vote per OS account whatever `--as` says, and `case open` names its
requester. The people are real OS accounts (tests/os_accounts.py), never an environment variable."""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg

from approvals.identity import os_account
from tests.bot.helpers import FINANCE, SUPPORT
from tests.os_accounts import OsAccount
from tests.os_accounts import run_cli as cli
from tests.test_cases import scenario

DOOR_OPEN = {"BILLSLEUTH_APPROVERS": ",".join(FINANCE), "BILLSLEUTH_CLI_DECISIONS": "on"}


def shell(db_url: str, **variables: str) -> dict[str, str]:
    """A shell's environment: this database, the CLI's door open, and whatever else it claims."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    env.update(DATABASE_URL=db_url, BILLSLEUTH_INVESTIGATOR="offline", **DOOR_OPEN)
    return {**env, **variables}


def votes(db_url: str, note_id: str) -> list[tuple[str, str]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT approver, source FROM approvals WHERE credit_note_id = %s ORDER BY id", (note_id,)
        ).fetchall()
    return [(approver, source) for approver, source in rows]


def refusals(db_url: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT details FROM activity_log WHERE action = 'approval.refused' ORDER BY id"
        ).fetchall()
    return [details for (details,) in rows]


def test_the_cli_identity_is_the_real_os_account_whatever_logname_and_user_say(
    seeded_db_url: str, second_os_account: OsAccount
) -> None:
    env = shell(seeded_db_url, LOGNAME="mallory", USER="mallory")
    sc = scenario("proration_missing_credit")
    opened = cli(env, "case", "open", sc["customer_id"], sc["question"], "--as", SUPPORT, "--json",
                 account=second_os_account)  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    with psycopg.connect(seeded_db_url) as conn:
        (opened_from,) = conn.execute(
            "SELECT opened_from FROM cases WHERE id = %s", (json.loads(opened.stdout)["case_id"],)
        ).fetchone() or (None,)
    assert opened_from == f"cli:{second_os_account.name}"


def test_two_as_from_one_os_account_count_once_and_the_note_is_not_issued(
    seeded_db_url: str, second_os_account: OsAccount, third_os_account: OsAccount
) -> None:
    """The reproduction: a 321.36 two-person note, `approve --as U1` then `--as U2` from one shell that calls
    itself mallory. One vote is counted, the second is refused and recorded, nothing is issued; a second
    real OS account then gives the second vote."""
    sc = scenario("proration_missing_credit")
    assert sc["truth"]["overcharge"] == "321.36"
    desk = shell(seeded_db_url)
    opened = cli(desk, "case", "open", sc["customer_id"], sc["question"], "--as", SUPPORT, "--json",
                 account=second_os_account)  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    note = json.loads(opened.stdout)["credit_note"]
    assert (note["amount"], note["needed"]) == ("321.36", 2)

    mallory = shell(seeded_db_url, LOGNAME="mallory", USER="mallory")
    first = cli(mallory, "approve", note["id"], "--as", FINANCE[0], "--json")
    assert first.returncode == 0, first.stderr
    second = cli(mallory, "approve", note["id"], "--as", FINANCE[1], "--json")
    assert second.returncode != 0
    (line,) = second.stderr.strip().splitlines()
    assert "one_vote_per_os_account" in line and f"OS account {os_account()}" in line
    me = f"cli:{os_account()}"
    assert votes(seeded_db_url, note["id"]) == [(FINANCE[0], me)]  # not mallory's, and only one
    (refusal,) = refusals(seeded_db_url)
    assert (refusal["rule"], refusal["source"]) == ("one_vote_per_os_account", me)
    shown = json.loads(cli(mallory, "case", "show", json.loads(opened.stdout)["case_id"], "--json").stdout)
    assert shown["status"] == "awaiting_approval"
    assert (shown["credit_note"]["status"], shown["credit_note"]["approvals"]) == ("draft", 1)

    # Another person (another real account) gives the second vote: two people, and the note is issued.
    approved = cli(desk, "approve", note["id"], "--as", FINANCE[1], "--json", account=third_os_account)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "issued"
    assert votes(seeded_db_url, note["id"]) == [
        (FINANCE[0], me),
        (FINANCE[1], f"cli:{third_os_account.name}"),
    ]


def test_case_open_needs_its_requester_and_writes_nothing_without_one(seeded_db_url: str) -> None:
    env = shell(seeded_db_url)
    sc = scenario("proration_missing_credit")
    for extra in ((), ("--as", "support-desk")):
        refused = cli(env, "case", "open", sc["customer_id"], sc["question"], *extra)
        assert refused.returncode == 2
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith("billsleuth: error:") and "--as" in line
    with psycopg.connect(seeded_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM cases").fetchone() == (0,)
