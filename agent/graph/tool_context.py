"""Who calls the read-only tools and what their calls leave behind: the case, customer and actor a call is
scoped to, the ledger read once per case run, and the audit_log rows (one per call, written at once or in
a batch). The tools themselves and their registry are agent/graph/tools.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import schema
from engine.db import reading
from engine.diff import InvoiceCheck
from engine.model import CustomerLedger, PriceBook

log = logging.getLogger(__name__)

ProgressCallback = Callable[[dict[str, Any]], None]


class ToolError(Exception):
    """A tool refused the call (bad arguments, unknown or foreign id): the caller sees the message."""


@dataclass
class LedgerCache:
    """The customer's ledger, the price book and the re-billed history, as read once in a case run."""

    ledger: CustomerLedger | None = None
    book: PriceBook | None = None
    checks: dict[str, InvoiceCheck] | None = None


@dataclass
class ToolContext:
    """Who is calling the tools, for which case and customer, and what the calls have read so far.

    Used bare, each call's audit row is written at once. Inside `async with tools:` the rows of the
    block's calls are written together when it ends (one INSERT instead of one round trip per call),
    also when the block fails. With `connection`, the ledger is read on the caller's connection instead
    of a pooled one; audit rows are always committed on their own, so no caller's rollback can erase them.
    """

    engine: AsyncEngine
    case_id: str | None  # None: a call from outside any case (an MCP client)
    customer_id: str
    actor: str  # "agent:offline", "agent:llm", "system:verify", "approver:U123"
    on_progress: ProgressCallback | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # this run's trail, in order
    # One case run reads one ledger: load it once, not once per tool call (shared across the run's nodes).
    cache: LedgerCache = field(default_factory=lambda: LedgerCache(), repr=False)
    connection: AsyncConnection | None = field(default=None, repr=False)
    _unrecorded: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _batching: int = field(default=0, init=False, repr=False)

    async def __aenter__(self) -> ToolContext:
        self._batching += 1
        return self

    async def __aexit__(self, failure: type[BaseException] | None, *_: object) -> None:
        self._batching -= 1
        if self._batching:
            return
        try:
            await self.record_calls()
        except Exception:
            if failure is None:
                raise
            # The block's own error is the one to report; the rows stay buffered for a later write.
            log.exception("could not write the audit rows of %d tool call(s)", len(self._unrecorded))

    async def record_calls(self) -> None:
        """Write the audit rows of the calls made since the last write (a no-op when there are none).
        On failure the rows stay buffered, so a later call can still write them."""
        rows = list(self._unrecorded)
        if not rows:
            return
        # Autocommit: the rows are one statement, so one round trip instead of BEGIN / INSERT / COMMIT.
        async with self.engine.connect() as pooled:
            conn = await pooled.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(insert(schema.audit_log), rows)
        del self._unrecorded[: len(rows)]

    async def audit(self, result: ToolResult) -> None:
        """Put one call on the audit trail: written at once, or with the block's others (`async with`)."""
        # Outside a case no case row names the customer the call was scoped to: its row says so itself.
        args = result.args if self.case_id is not None else {"customer_id": self.customer_id, **result.args}
        self._unrecorded.append(
            {
                "at": datetime.now(UTC),  # when the call was made, not when its batch was written
                "case_id": self.case_id,
                "actor": self.actor,
                "tool": result.tool,
                "args": args,
                "ok": result.ok,
                "result_digest": _digest(result.data if result.ok else {"error": result.error}),
            }
        )
        if not self._batching:
            await self.record_calls()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """The caller's connection when one was given, else a pooled one for the block."""
        if self.connection is not None:
            yield self.connection
        else:
            async with reading(self.engine) as conn:
                yield conn

    @property
    def cached_ledger(self) -> CustomerLedger | None:
        return self.cache.ledger


@dataclass(frozen=True)
class ToolResult:
    tool: str
    args: dict[str, Any]
    ok: bool
    data: Any = None
    error: str | None = None

    def for_model(self) -> str:
        return json.dumps(self.data if self.ok else {"error": self.error}, ensure_ascii=False)


def _digest(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
