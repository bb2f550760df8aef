"""billsleuth demo"""

from __future__ import annotations

import argparse
import asyncio
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="the whole Slack flow locally: mentions, cards, approvals, a rejection",
        description="Plays the Slack flow in a database of its own on the same server (<database>_demo), "
        "reseeded each run, so it never touches the ledger, credit notes or activity log at DATABASE_URL.",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.database import SchemaNotReady, upgrade_all
    from approvals.identity import os_account
    from bot.cli.common import CommandError
    from bot.demo import run_demo
    from engine.db import home, owner_database_url
    from scenarios.seed import seed_database

    # The demo's database is its own whatever DATABASE_URL says, so it always brings it up to date.
    url = demo_database(owner_database_url())
    try:
        asyncio.run(upgrade_all(url))
    except SchemaNotReady as error:
        raise CommandError(str(error)) from None
    scenarios_dir = home() / "demo" / "scenarios"
    # The demo's own database: its notes are the previous demo run's, so reseeding them is expected.
    # Forced or not, its activity log is kept and the reseed appended to it.
    result = asyncio.run(seed_database(url, scenarios_dir=scenarios_dir, force=True, actor=os_account()))
    print(result.summary())
    scenarios = [
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(scenarios_dir.glob("S*.json"))
    ]

    asyncio.run(run_demo(url, home() / "demo", scenarios))
    return 0


def demo_database(url: str) -> str:
    """`<database>_demo` on the same server, created when missing: the demo's, never the user's data."""
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url

    from bot.cli.common import CommandError
    from engine.db import with_database

    libpq = url.replace("postgres://", "postgresql://", 1)
    name = f"{make_url(libpq).database or 'postgres'}"[:58] + "_demo"
    try:
        with psycopg.connect(libpq, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase:
        pass  # another demo created it meanwhile
    except psycopg.errors.InsufficientPrivilege as error:
        raise CommandError(
            f"the demo runs in a database of its own ({name}) and cannot create it: "
            f"{str(error).strip().splitlines()[0]}; create it, or grant CREATEDB"
        ) from None
    return with_database(libpq, name)
