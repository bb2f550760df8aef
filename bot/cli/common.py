"""What every command shares: one-line errors, JSON output, a ready database."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, NoReturn, TypeVar

from approvals.identity import cli_source

T = TypeVar("T")


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
    """The database URL the runtime uses once the schema and checkpoint tables are current (every command
    but the owner's starts here): DATABASE_URL, checked, refusing in one line; on the embedded server its
    runtime login, after upgrading as the owner when behind."""
    from agent.database import SchemaNotReady, ensure_ready

    # DATABASE_URL as engine.db.DatabaseSettings takes it (blank is unset), without importing pydantic
    # and SQLAlchemy with engine.db: a sweep over the ledger needs neither.
    url = os.environ.get("DATABASE_URL", "").strip()
    try:
        if url:
            asyncio.run(ensure_ready(url))
            return url
        from agent.database import ready_embedded
        from engine.db import database_url

        return asyncio.run(ready_embedded(database_url()))
    except SchemaNotReady as error:
        raise CommandError(str(error)) from None


def ready_owner_database(command: str | None) -> str:
    """The schema owner's URL (BILLSLEUTH_OWNER_DATABASE_URL, else DATABASE_URL, else the embedded
    server's) once the schema is current. For a `command` that rebuilds the dataset, a login that does
    not own the schema is refused in one line before anything is written (None: `eval`, which only reads
    the source and creates its own scratch databases)."""
    import psycopg

    from agent.database import SchemaNotReady, ensure_ready, require_owner
    from engine.db import owner_database_url

    url = owner_database_url()

    async def check() -> None:
        await ensure_ready(url)
        if command is None:
            return
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await require_owner(conn, command)

    try:
        asyncio.run(check())
    except SchemaNotReady as error:
        raise CommandError(str(error)) from None
    return url


def on_database(work: Callable[[Any], Awaitable[T]]) -> T:
    """Run `work(engine)` on the ready database, the engine disposed of after. A setting that cannot be
    read (say, a stored policy value someone broke by hand) is a one-line error."""
    from engine.db import create_engine
    from engine.settings import SettingsError

    url = ready_database()

    async def go() -> T:
        engine = create_engine(url)
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(go())
    except SettingsError as error:
        raise CommandError(str(error)) from None


def warn(message: str) -> None:
    print(f"billsleuth: warning: {message}", file=sys.stderr)


def warn_policy_differences(differences: Sequence[Any]) -> None:
    """This shell's environment disagrees with the stored policy: say so, and that the stored one holds."""
    for difference in differences:
        warn(f"the stored policy is enforced, not this environment: {difference.describe()}")


def run_operation(request: object, *, as_json: bool, render: object = None) -> int:
    """Run one bot.grammar request against the ready database and print its result."""
    from agent.cases.service import COMMAND, case_service
    from bot.flows.operations import execute
    from bot.grammar import OperationError
    from engine.settings import SettingsError

    url = ready_database()

    async def go() -> object:
        async with case_service(url, policy=COMMAND, actor=cli_source()) as service:
            warn_policy_differences(service.policy_differences)
            return await execute(service, request)  # type: ignore[arg-type]

    try:
        result = asyncio.run(go())
    except (OperationError, SettingsError) as error:  # any package's settings
        raise CommandError(str(error)) from None
    if as_json:
        print_json(result.payload)  # type: ignore[attr-defined]
    elif callable(render):
        print(render(result))
    else:
        print(result.message)  # type: ignore[attr-defined]
    return 0
