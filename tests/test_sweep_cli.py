"""`billsleuth sweep` end to end: the console script's entry on the seeded ledger (two posts at once: the
installed script, twice), posting to the recording Slack Web API server."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime

from sqlalchemy import func, select

from bot.slack_testing import SlackRecorder
from engine import schema
from engine.db import create_engine
from scenarios.dataset import generate
from scenarios.generator import DEFAULT_SEED
from tests import cli
from tests.cli import Done, billsleuth_async
from tests.test_audit_cli import BILLSLEUTH, as_rows, billsleuth, injected

SWEEP_CHANNEL = "C0SWEEP"
FINDINGS = len(injected())  # every overcharge in the default dataset
CUSTOMERS = len(generate(DEFAULT_SEED))
FIELDS = {"customer_id", "invoice_id", "root_cause", "overcharge", "currency", "first_seen", "posted"}


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The command in this process (tests/cli.py), off the loop the recording server answers on."""
    done = await billsleuth_async(*args, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr


async def run_process(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The command in a process of its own: for two commands at once."""
    process = await asyncio.create_subprocess_exec(
        BILLSLEUTH,
        *args,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


def posting_env(slack: SlackRecorder) -> dict[str, str]:
    return {
        "SLACK_API_URL": slack.api_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "BILLSLEUTH_SWEEP_CHANNEL": SWEEP_CHANNEL,
    }


async def posted_count(url: str) -> int:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            sf = schema.sweep_findings.c
            query = select(func.count()).where(sf.posted_at.is_not(None))
            return (await conn.execute(query)).scalar_one()
    finally:
        await engine.dispose()


def test_json_lists_every_current_finding_with_when_it_was_first_seen(seeded_db_url: str) -> None:
    done = billsleuth("sweep", "--json")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) == {"as_of", "findings"} and output["as_of"] == "2026-10-15"
    assert as_rows(output) == injected()
    for finding in output["findings"]:
        assert set(finding) == FIELDS
        assert finding["posted"] is False and finding["currency"] == "USD"
        datetime.fromisoformat(finding["first_seen"])
    again = json.loads(billsleuth("sweep", "--json").stdout)
    assert again == output  # seen again: first_seen is kept, nothing added


def test_an_invoice_with_an_open_note_is_not_listed(seeded_db_url: str) -> None:
    opened = billsleuth(
        "case", "open", "C-0011", "Why was INV-0011-03 so high?", "--as", "U0SUPPORT1", "--json"
    )
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["credit_note"]["invoice_id"] == "INV-0011-03"
    output = json.loads(billsleuth("sweep", "--json").stdout)
    listed = {f["invoice_id"] for f in output["findings"]}
    assert "INV-0011-03" not in listed and len(listed) == len(injected()) - 1


def test_the_text_summary_counts_and_totals(seeded_db_url: str) -> None:
    done = billsleuth("sweep")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"sweep as of 2026-10-15: {CUSTOMERS} customers, {FINDINGS} findings "
        f"({FINDINGS} not in any digest yet)"
    )
    assert lines[1].startswith(f"  USD: {FINDINGS} findings, overcharge ")


def test_post_needs_a_channel_and_a_token(seeded_db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "BILLSLEUTH_SWEEP"))}
    done = billsleuth_env(env, "sweep", "--post")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "billsleuth: error: --post needs SLACK_BOT_TOKEN and BILLSLEUTH_SWEEP_CHANNEL (not set)"
    ]
    bad = billsleuth_env(
        {**env, "SLACK_BOT_TOKEN": "xoxb-1", "BILLSLEUTH_SWEEP_CHANNEL": "#sweep"}, "sweep", "--post"
    )
    assert bad.returncode == 2 and "BILLSLEUTH_SWEEP_CHANNEL must be a channel id" in bad.stderr


def billsleuth_env(env: dict[str, str], *args: str) -> Done:
    return cli.billsleuth(*args, env=env)


async def test_post_sends_one_digest_and_a_second_post_sends_nothing(seeded_db_url: str) -> None:
    async with SlackRecorder() as slack:
        code, out, err = await run("sweep", "--post", env=posting_env(slack))
        assert code == 0, err
        assert out.splitlines()[-1] == f"posted a digest of {FINDINGS} findings to {SWEEP_CHANNEL}"
        (digest,) = slack.messages(SWEEP_CHANNEL)
        assert digest.text == f"Findings sweep: {FINDINGS} new overcharges"
        code, out, err = await run("sweep", "--post", "--json", env=posting_env(slack))
        assert code == 0, err
        assert all(f["posted"] for f in json.loads(out)["findings"])
        assert len(slack.messages(SWEEP_CHANNEL)) == 1
    assert await posted_count(seeded_db_url) == FINDINGS


async def test_a_failed_post_marks_nothing_posted(seeded_db_url: str) -> None:
    async with SlackRecorder() as slack:
        slack.fail_next("chat.postMessage", "channel_not_found")
        code, _, err = await run("sweep", "--post", env=posting_env(slack))
        assert code == 1 and "channel_not_found" in err and "nothing was marked posted" in err
        assert await posted_count(seeded_db_url) == 0
        code, _, err = await run("sweep", "--post", env=posting_env(slack))
        assert code == 0, err
        assert len(slack.messages(SWEEP_CHANNEL)) == 1


async def test_two_posts_at_once_list_each_finding_once(seeded_db_url: str) -> None:
    async with SlackRecorder() as slack:
        two = (run_process("sweep", "--post", env=posting_env(slack)) for _ in range(2))
        results = await asyncio.gather(*two)
        assert [code for code, _, _ in results] == [0, 0], results
        assert len(slack.messages(SWEEP_CHANNEL)) == 1
        assert sorted(out.splitlines()[-1] for _, out, _ in results) == [
            "nothing new to post: no digest",
            f"posted a digest of {FINDINGS} findings to {SWEEP_CHANNEL}",
        ]
