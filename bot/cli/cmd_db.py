"""billsleuth db upgrade"""

from __future__ import annotations

import argparse
import asyncio


def add_parser(sub: argparse._SubParsersAction) -> None:
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = db_sub.add_parser("upgrade", help="bring the schema (and graph checkpoint tables) up to date")
    upgrade.set_defaults(handler=run_upgrade)


def run_upgrade(args: argparse.Namespace) -> int:
    from agent.database import SchemaNotReady, upgrade_all
    from bot.cli.common import CommandError
    from engine import migrate
    from engine.db import owner_database_url

    url = owner_database_url()  # the schema owner's: only it may change the schema
    before = migrate.current_revision(url)
    try:
        asyncio.run(upgrade_all(url))
    except SchemaNotReady as error:
        raise CommandError(str(error)) from None
    after = migrate.current_revision(url)
    print(f"schema at {after}" + (f" (was {before or 'empty'})" if before != after else " (already current)"))
    return 0
