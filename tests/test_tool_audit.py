"""Tool calls on the audit trail: written at once when used bare, together at the end of an `async with`
block, in call order, and never lost or allowed to hide the block's own error when the write fails."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.graph.tool_context import LedgerCache, ToolContext
from agent.graph.tools import call_tool
from engine import schema
from engine.db import create_engine, with_database

CUSTOMER = "C-0001"


async def audit_rows(engine: AsyncEngine) -> list[Any]:
    log = schema.audit_log
    async with engine.connect() as conn:
        return list(await conn.execute(select(log).order_by(log.c.id)))


async def test_a_bare_call_is_on_the_trail_at_once(seeded_db: AsyncEngine) -> None:
    tools = ToolContext(seeded_db, "CASE-0001", CUSTOMER, "agent:offline")
    await call_tool(tools, "list_invoices", {})
    assert [(r.tool, r.actor, r.case_id, r.ok) for r in await audit_rows(seeded_db)] == [
        ("list_invoices", "agent:offline", "CASE-0001", True)
    ]


async def test_a_block_writes_its_calls_together_at_its_end_in_call_order(seeded_db: AsyncEngine) -> None:
    async with ToolContext(seeded_db, "CASE-0001", CUSTOMER, "agent:offline") as tools:
        await call_tool(tools, "get_customer", {})
        await call_tool(tools, "get_invoice", {"invoice_id": "INV-9999-01"})  # not theirs: refused
        await call_tool(tools, "list_payments", {})
        assert await audit_rows(seeded_db) == []
    rows = await audit_rows(seeded_db)
    assert [(r.tool, r.ok) for r in rows] == [
        ("get_customer", True),
        ("get_invoice", False),
        ("list_payments", True),
    ]
    assert rows[1].args == {"invoice_id": "INV-9999-01"}
    assert [r.at for r in rows] == sorted(r.at for r in rows)
    assert rows[0].at < rows[2].at  # each row has its call's own time, not the batch's


async def test_a_failed_write_keeps_the_rows_and_does_not_hide_the_blocks_error(
    seeded_db: AsyncEngine, seeded_db_url: str
) -> None:
    warm = ToolContext(seeded_db, "CASE-0001", CUSTOMER, "agent:offline")
    await call_tool(warm, "recompute_invoice", {"invoice_id": "INV-0001-05"})  # fills the cache
    unreachable = create_engine(with_database(seeded_db_url, "no_such_database"))
    cache = LedgerCache(warm.cache.ledger, warm.cache.book)
    tools = ToolContext(unreachable, "CASE-0002", CUSTOMER, "agent:offline", cache=cache)
    try:
        with pytest.raises(RuntimeError, match="the node failed"):
            async with tools:
                assert (await call_tool(tools, "list_invoices", {})).ok  # read from the cache
                raise RuntimeError("the node failed")
    finally:
        await unreachable.dispose()
    tools.engine = seeded_db  # the database is back: the buffered row is still there to write
    await tools.record_calls()
    assert [(r.case_id, r.tool) for r in await audit_rows(seeded_db)] == [
        ("CASE-0001", "recompute_invoice"),
        ("CASE-0002", "list_invoices"),
    ]
