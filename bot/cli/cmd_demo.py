"""billsleuth demo"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo", help="the whole Slack flow locally: mentions, cards, approvals, a rejection"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from agent.checkpoint import setup_checkpointer
    from bot.cli.common import CommandError, ready_database
    from bot.demo import run_demo
    from engine.db import home
    from scenarios.seed import ForeignDatabaseError, seed_database

    url = ready_database()
    scenarios_dir = home() / "scenarios"
    try:
        result = asyncio.run(seed_database(url, scenarios_dir=scenarios_dir))
    except ForeignDatabaseError as error:
        raise CommandError(
            f"{error} (the demo reseeds its own dataset; point DATABASE_URL elsewhere)"
        ) from None
    print(result.summary())
    scenarios = [
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(scenarios_dir.glob("S*.json"))
    ]

    async def go() -> None:
        await setup_checkpointer(url)
        await run_demo(url, home() / "demo", scenarios)

    asyncio.run(go())
    return 0
