"""billsleuth dry-run FILE.json"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bot.cli.common import CommandError, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "dry-run", help="the invoices the billing rules produce for a subscription, as JSON"
    )
    parser.add_argument("file", type=Path, metavar="FILE.json", help="customer, subscription, events, until")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from engine import dry_run
    from engine.model import BillingError

    try:
        data = json.loads(args.file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"no such file: {args.file}") from None
    except json.JSONDecodeError as error:
        raise CommandError(f"{args.file} is not valid JSON: {error.msg} at line {error.lineno}") from None
    try:
        invoices = dry_run.run(dry_run.parse_request(data))
    except BillingError as error:
        raise CommandError(str(error)) from None
    print_json({"invoices": [dry_run.invoice_json(inv) for inv in invoices]})
    return 0
