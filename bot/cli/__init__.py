"""The `billsleuth` command. Parsers import argparse and the standard library; each command imports its
heavy third-party modules lazily, so `billsleuth --help` and `dry-run` start in well under a second."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from bot.cli.common import CommandError, fail

# Each module defines add_parser(subparsers); the handler it sets is run with the parsed args.
COMMAND_MODULES = (
    "bot.cli.cmd_db",
    "bot.cli.cmd_dry_run",
    "bot.cli.cmd_audit",
    "bot.cli.cmd_sweep",
    "bot.cli.cmd_seed",
    "bot.cli.cmd_ledger",
    "bot.cli.cmd_stripe",
    "bot.cli.cmd_cases",
    "bot.cli.cmd_activity",
    "bot.cli.cmd_policy",
    "bot.cli.cmd_costs",
    "bot.cli.cmd_doctor",
    "bot.cli.cmd_demo",
    "bot.cli.cmd_bot",
    "bot.cli.cmd_mcp",
    "bot.cli.cmd_eval",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="billsleuth",
        description="BillSleuth: investigate billing disputes; settle them with approved credit notes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.handler(args)
    except CommandError as error:
        fail(str(error), error.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as error:
        known = known_failure(error)
        if known is None:
            raise
        fail(*known)
    return int(code or 0)


def known_failure(error: Exception) -> tuple[str, int] | None:
    """Failures people cause and can fix (a wrong DATABASE_URL, a database that is down) as one line."""
    kind, module = type(error).__name__, type(error).__module__
    if kind == "DatabaseUrlError":
        return str(error), 2
    if kind == "OperationalError" and module.startswith(("sqlalchemy", "psycopg")):
        cause = getattr(error, "orig", None) or error
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else kind
        return f"cannot reach the database ({first}); check DATABASE_URL or run `billsleuth doctor`", 1
    return None


if __name__ == "__main__":
    sys.exit(main())
