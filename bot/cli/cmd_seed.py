"""billsleuth seed [--seed N] [--scenarios DIR] [--force]"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bot.cli.common import CommandError


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "seed",
        help="rebuild the demo ledger and its ground-truth scenario files",
        description="Wipe the dataset (ledger, credit notes, cases, audit log) and rebuild it from a seed. "
        "Runs on an empty database or one it seeded before; a database holding an issued credit note or "
        "a ledger seed did not write needs --force. The activity log is always kept: a reseed that "
        "erases anything appends a ledger.reseeded row.",
    )
    parser.add_argument(
        "--seed", type=int, default=None, metavar="N", help="dataset seed (default: the committed dataset's)"
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        metavar="DIR",
        help="where S001.json … go (default: $BILLSLEUTH_HOME/scenarios)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="also erase issued credit notes, or a ledger that seed did not write",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from approvals.identity import os_account
    from bot.cli.common import ready_owner_database
    from engine.db import home
    from scenarios.generator import DEFAULT_SEED
    from scenarios.seed import ReseedRefused, seed_database

    url = ready_owner_database("billsleuth seed")
    directory = args.scenarios if args.scenarios is not None else home() / "scenarios"
    seed = DEFAULT_SEED if args.seed is None else args.seed
    if directory.exists() and not directory.is_dir():
        raise CommandError(f"--scenarios {directory} exists and is not a directory")
    try:
        result = asyncio.run(seed_database(url, seed, directory, force=args.force, actor=os_account()))
    except ReseedRefused as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(f"cannot write the scenario files to {directory}: {error.strerror}") from None
    print(result.summary())
    return 0
