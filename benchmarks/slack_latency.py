"""Slack latency: ack time under 20 concurrent mentions, mention → card, and click → card update.

The real Bolt app over HTTP on 127.0.0.1, the recording Slack Web API, the embedded Postgres (or
DATABASE_URL's server) with a freshly seeded copy of the default ledger, the offline investigator.
Prints figures; asserts nothing. Run: .venv/bin/python benchmarks/slack_latency.py [--mentions 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import psycopg

from agent.checkpoint import setup_checkpointer
from agent.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.cards import APPROVE_ACTION_ID
from bot.runtime import running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import migrate
from engine.db import database_url, with_database
from scenarios.generator import DEFAULT_SEED, generate
from scenarios.seed import seed_database

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
FINANCE = "U0FINANCE1"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<26} n={len(ms):<3} p50 {percentile(ms, 50):7.1f} ms   p99 {percentile(ms, 99):7.1f} ms"
        f"   max {max(ms):7.1f} ms   mean {statistics.fmean(ms):7.1f} ms"
    )


async def wait_until(predicate, timeout: float = 30.0) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > timeout:
            raise TimeoutError("the card did not arrive")
        await asyncio.sleep(0.002)
    return time.perf_counter()


def buttons(message) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        e.get("action_id")
        for b in message.blocks
        if b.get("type") == "actions"
        for e in b.get("elements", [])
    ]


async def bench(url: str, mentions: int) -> None:
    await setup_checkpointer(url)
    scenarios = [s for s in generate(DEFAULT_SEED) if s.truth.expected_action == "credit_note"]
    scenarios = [s for s in scenarios if s.truth.overcharge < Decimal("300.00")][:mentions]
    async with SlackRecorder() as slack:
        settings = ApprovalSettings(approvers=frozenset({FINANCE}))
        async with (
            running_bot(
                url,
                slack.settings(signing_secret=SECRET),
                configuration=Configuration(investigator="offline"),
                approval_settings=settings,
                recover=False,
                expiry_interval=None,
            ) as bot,
            SignedClient(bot.url, SECRET) as client,
        ):
            bot_user = slack.workspace.bot_user_id

            def card(thread: str):  # type: ignore[no-untyped-def]
                found = [m for m in slack.replies(CHANNEL, thread) if m.user == bot_user]
                return found[0] if found and APPROVE_ACTION_ID in buttons(found[0]) else None

            async def one_mention(sc) -> tuple[float, float, str]:  # type: ignore[no-untyped-def]
                typed = slack.post_user_message(
                    CHANNEL, p.mention_text(f"{sc.ledger.customer.id} {sc.question}"), user="U0SUPPORT1"
                )
                event = p.app_mention(typed.text, user="U0SUPPORT1", channel=CHANNEL, ts=typed.ts)
                sent = time.perf_counter()
                delivery = await client.send(event)
                assert delivery.status == 200, delivery
                arrived = await wait_until(lambda: card(typed.ts) is not None)
                return delivery.elapsed, arrived - sent, typed.ts

            started = time.perf_counter()
            results = await asyncio.gather(*(one_mention(sc) for sc in scenarios))
            wall = time.perf_counter() - started
            acks = [r[0] for r in results]
            cards = [r[1] for r in results]

            click_acks: list[float] = []
            updates: list[float] = []
            for _, _, thread in results:
                message = card(thread)
                sent = time.perf_counter()
                delivery = await client.send(
                    p.click(message.to_slack(), user=FINANCE, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
                )
                click_acks.append(delivery.elapsed)
                updated = await wait_until(lambda t=thread: not buttons(slack.replies(CHANNEL, t)[0]))
                updates.append(updated - sent)
            await bot.settled(timeout=60)

    print(f"{mentions} concurrent mentions (offline investigator), all cards posted in {wall:.2f} s")
    print(summary("ack (mention)", acks))
    print(summary("mention → evidence card", cards))
    print(summary("ack (Approve click)", click_acks))
    print(summary("click → card updated", updates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mentions", type=int, default=20)
    args = parser.parse_args()
    server = database_url()
    name = f"bench_slack_{int(time.time())}"
    with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    url = with_database(server, name)
    try:
        migrate.upgrade(url)
        with tempfile.TemporaryDirectory() as files:
            asyncio.run(seed_database(url, scenarios_dir=Path(files)))
        asyncio.run(bench(url, args.mentions))
    finally:
        with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
