"""billsleuth doctor against a real database and the recording Slack server."""

from __future__ import annotations

import os

from bot.slack_testing.recorder import SlackRecorder
from scenarios.extra_kinds import SCENARIOS_PER_SEED
from tests.cli import Done, billsleuth
from tests.openai_stub import OpenAIStub


def doctor(env: dict[str, str]) -> Done:
    return billsleuth("doctor", env=env)


async def test_doctor_reports_what_to_fix_and_passes_when_configured(seeded_db_url: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    base["DATABASE_URL"] = seeded_db_url
    bare = doctor(base)
    assert bare.returncode == 1
    assert "SLACK_BOT_TOKEN" in bare.stdout and "nobody can approve" in bare.stdout
    async with SlackRecorder() as slack:
        env = {
            **base,
            "SLACK_API_URL": slack.api_url,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_SIGNING_SECRET": "s3cret",
            "BILLSLEUTH_APPROVERS": "U0FIN0001",
        }
        import asyncio

        ready = await asyncio.to_thread(doctor, env)
        assert ready.returncode == 0, ready.stdout
        assert "✓ slack auth.test" in ready.stdout and f"{SCENARIOS_PER_SEED} customers" in ready.stdout
        assert "✓ activity log: 0 rows, chain intact" in ready.stdout
        assert "✓ findings digest: off (set BILLSLEUTH_SWEEP_CHANNEL to post one daily)" in ready.stdout
        sweeping = {**env, "BILLSLEUTH_SWEEP_CHANNEL": "C0SWEEP", "BILLSLEUTH_SWEEP_HOUR": "7"}
        daily = await asyncio.to_thread(doctor, sweeping)
        assert "✓ findings digest: daily to C0SWEEP at 07:00 UTC" in daily.stdout, daily.stdout
        bad_hour = await asyncio.to_thread(doctor, {**sweeping, "BILLSLEUTH_SWEEP_HOUR": "25"})
        assert bad_hour.returncode == 1
        assert "✗ findings digest: BILLSLEUTH_SWEEP_HOUR must be a UTC hour from 0 to 23" in bad_hour.stdout
        assert slack.calls("auth.test")
        wrong_token = await asyncio.to_thread(doctor, {**env, "SLACK_BOT_TOKEN": "xoxb-wrong"})
        assert wrong_token.returncode == 1 and "auth.test" in wrong_token.stdout


def test_doctor_warns_while_anyone_may_open_cases_and_see_their_cards(db_url: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    env = {**base, "DATABASE_URL": db_url, "BILLSLEUTH_APPROVERS": "U0FIN0001"}
    open_to_all = doctor(env).stdout
    warning = "BILLSLEUTH_SUPPORT is empty: any member of the workspace can open cases and see their cards"
    assert f"! support: {warning}" in open_to_all
    assert "→ set BILLSLEUTH_SUPPORT=U0SUPPORT1,U0SUPPORT2 (support staff's Slack member IDs)" in open_to_all
    guarded = doctor({**env, "BILLSLEUTH_SUPPORT": "U0SUPPORT1"}).stdout
    assert "✓ support: 1 support member(s) and the approvers open cases and read notes" in guarded


def test_doctor_fails_on_a_broken_activity_chain(db_url: str) -> None:
    import psycopg

    with psycopg.connect(db_url) as conn:
        for entity in ("K-1", "K-2"):
            conn.execute(
                "INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id) "
                "VALUES ('user', 'U1', 'case.opened', 'case', %s)",
                (entity,),
            )
    with psycopg.connect(db_url) as conn:
        conn.execute("SET session_replication_role = replica")  # around the append-only trigger
        conn.execute("UPDATE activity_log SET actor_id = 'U0MALLORY' WHERE id = 1")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    result = doctor({**env, "DATABASE_URL": db_url})
    assert result.returncode == 1
    assert "✗ activity log: 2 rows, chain broken at row 1" in result.stdout


async def test_doctor_shows_the_model_and_the_case_time_limit(db_url: str) -> None:
    import asyncio

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    async with OpenAIStub([]) as stub:
        model = {
            **env,
            "DATABASE_URL": db_url,
            "OPENAI_API_KEY": stub.api_key,
            "OPENAI_BASE_URL": stub.base_url,
            "BILLSLEUTH_MODEL": "stub-model",
        }
        default = await asyncio.to_thread(doctor, model)
        set_ = await asyncio.to_thread(doctor, {**model, "BILLSLEUTH_CASE_TIMEOUT": "45"})
        bad = await asyncio.to_thread(doctor, {**model, "BILLSLEUTH_CASE_TIMEOUT": "two minutes"})
    shown = "✓ model endpoint: llm investigator, model stub-model; a case escalates after {} s"
    assert shown.format(120) + " (BILLSLEUTH_CASE_TIMEOUT)" in default.stdout
    assert shown.format(45) in set_.stdout
    assert bad.returncode == 1
    assert "✗ investigator: BILLSLEUTH_CASE_TIMEOUT must be a number of seconds like 120" in bad.stdout
