"""What every command shares: one-line errors, JSON output, a ready database."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from typing import Any, NoReturn


class CommandError(Exception):
    """Bad input or a refused action: printed as one line, exit code non-zero, nothing written."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, exit_code: int = 2) -> NoReturn:
    print(f"billsleuth: error: {message}", file=sys.stderr)
    raise SystemExit(exit_code)


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return f"{value:.2f}"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, default=_default)


def print_json(data: Any) -> None:
    print(dumps(data))


def ready_database() -> str:
    """The database URL, with the schema upgraded first if it is behind (every command does this)."""
    from engine import migrate
    from engine.db import database_url

    url = database_url()
    migrate.ensure_current(url)
    return url
