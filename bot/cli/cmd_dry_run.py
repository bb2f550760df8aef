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

    data = _read_json(args.file)
    try:
        invoices = dry_run.run(dry_run.parse_request(data))
    except BillingError as error:
        raise CommandError(str(error)) from None
    print_json({"invoices": [dry_run.invoice_json(inv) for inv in invoices]})
    return 0


def _read_json(path: Path) -> object:
    """The file's JSON, or a CommandError saying in one line why it cannot be read as JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CommandError(f"{path} is a directory, not a JSON file") from None
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise CommandError(f"{path} is not UTF-8 text (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise CommandError(f"{path} is not valid JSON: {error.msg} at line {error.lineno}") from None
    except RecursionError:  # the decoder recurses once per level of arrays and objects
        raise CommandError(f"{path} is nested too deeply to read as JSON") from None
