"""billsleuth doctor"""

from __future__ import annotations

import argparse
import asyncio


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("doctor", help="what is configured and reachable, and what to fix")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from bot.doctor import run_checks

    checks = asyncio.run(run_checks())
    for check in checks:
        print(check.line())
    failed = [c for c in checks if c.level == "fail"]
    print(f"\n{len(failed)} problem(s) to fix" if failed else "\nReady.")
    return 1 if failed else 0
