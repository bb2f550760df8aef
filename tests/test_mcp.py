"""`billsleuth mcp`: the seven read-only tools to any MCP client, driven by the official SDK's own client —
over stdio (the client starts the command) and over streamable HTTP behind the bearer token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.graph.tool_context import ToolContext
from agent.graph.tools import READ_TOOLS, call_tool
from agent.model.investigator import model_tool_specs
from engine import schema
from tests.cli import billsleuth

BILLSLEUTH = Path(sys.executable).with_name("billsleuth")
CUSTOMER, INVOICE, OVERCHARGE = "C-0001", "INV-0001-05", "174.90"  # scenario S001
OTHERS_INVOICE = "INV-0002-03"  # C-0002's (scenario S002)
TOKEN = "s3cret-token-for-tests-0123456789abcdef"  # 32 characters at least, as the server requires
CLIENT = "acme-support-assistant"


def server_env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    return {**env, "DATABASE_URL": url, **extra}


@asynccontextmanager
async def stdio_session(url: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(BILLSLEUTH), args=["mcp"], env=server_env(url))
    with tempfile.TemporaryFile("w+") as errlog:  # the server's stderr, shown if the handshake fails
        try:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, client_info=types.Implementation(name=CLIENT, version="1")) as s,
            ):
                await s.initialize()
                yield s
        except BaseException:
            errlog.seek(0)
            print(errlog.read(), file=sys.stderr)
            raise


async def in_process(engine: AsyncEngine, customer: str, tool: str, args: dict[str, Any]) -> Any:
    """What the graph's own in-process call answers (the reference the MCP answer must equal)."""
    result = await call_tool(ToolContext(engine, "CASE-REF", customer, "agent:offline"), tool, args)
    return result.data if result.ok else result.error


async def mcp_rows(engine: AsyncEngine) -> list[Any]:
    log = schema.audit_log
    async with engine.connect() as conn:
        query = select(log).where(log.c.actor.like("mcp:%")).order_by(log.c.id)
        return list(await conn.execute(query))


def check_listing(listing: types.ListToolsResult) -> None:
    assert sorted(t.name for t in listing.tools) == sorted(READ_TOOLS)  # exactly the seven, no write tool
    assert len(listing.tools) == 7
    for tool in listing.tools:
        assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
        assert tool.annotations.destructive_hint is False
        assert next(iter(tool.input_schema["properties"])) == "customer_id"  # the first argument
        assert "customer_id" in tool.input_schema["required"]
        # The same registry the graph's model is offered: the same arguments, customer_id aside.
        offered = next(s for s in model_tool_specs() if s["function"]["name"] == tool.name)
        own = {k: v for k, v in tool.input_schema["properties"].items() if k != "customer_id"}
        assert own == offered["function"]["parameters"].get("properties", {})


async def check_recompute_and_refusals(session: ClientSession, engine: AsyncEngine) -> None:
    done = await session.call_tool("recompute_invoice", {"customer_id": CUSTOMER, "invoice_id": INVOICE})
    assert not done.is_error, done.content
    expected = await in_process(engine, CUSTOMER, "recompute_invoice", {"invoice_id": INVOICE})
    assert done.structured_content == expected
    assert done.structured_content["overcharge"] == OVERCHARGE

    foreign = await session.call_tool(
        "recompute_invoice", {"customer_id": CUSTOMER, "invoice_id": OTHERS_INVOICE}
    )
    refusal = await in_process(engine, CUSTOMER, "recompute_invoice", {"invoice_id": OTHERS_INVOICE})
    assert foreign.is_error
    assert [c.text for c in foreign.content] == [refusal]  # refused exactly as inside the graph
    assert refusal == f"{OTHERS_INVOICE} is not an invoice of customer {CUSTOMER}"

    # Any id the ledger holds is a valid argument, whatever its shape; an empty one is not an id at all.
    bad = await session.call_tool("get_invoice", {"customer_id": CUSTOMER, "invoice_id": ""})
    assert bad.is_error and "invalid arguments for get_invoice: invoice_id" in bad.content[0].text
    unknown = await session.call_tool("get_invoice", {"customer_id": CUSTOMER, "invoice_id": "nope"})
    assert unknown.is_error and unknown.content[0].text == f"nope is not an invoice of customer {CUSTOMER}"
    unscoped = await session.call_tool("list_invoices", {})
    assert unscoped.is_error and "customer_id" in unscoped.content[0].text
    write = await session.call_tool("draft_credit_note", {"customer_id": CUSTOMER, "invoice_id": INVOICE})
    assert write.is_error and "unknown tool 'draft_credit_note'" in write.content[0].text


def check_audit_rows(rows: list[Any]) -> None:
    assert [(r.actor, r.tool, r.ok) for r in rows] == [
        (f"mcp:{CLIENT}", "recompute_invoice", True),
        (f"mcp:{CLIENT}", "recompute_invoice", False),
        (f"mcp:{CLIENT}", "get_invoice", False),
        (f"mcp:{CLIENT}", "get_invoice", False),
        (f"mcp:{CLIENT}", "list_invoices", False),
        (f"mcp:{CLIENT}", "draft_credit_note", False),
    ]
    assert all(r.case_id is None for r in rows)  # outside any case: the row names its customer instead
    assert rows[0].args == {"customer_id": CUSTOMER, "invoice_id": INVOICE}
    assert rows[1].args == {"customer_id": CUSTOMER, "invoice_id": OTHERS_INVOICE}


async def test_an_mcp_client_over_stdio_gets_the_graphs_tools_figures_and_refusals(
    seeded_db_url: str, seeded_db: AsyncEngine
) -> None:
    async with stdio_session(seeded_db_url) as session:
        check_listing(await session.list_tools())
        await check_recompute_and_refusals(session, seeded_db)
    check_audit_rows(await mcp_rows(seeded_db))


def billsleuth_json(url: str, *args: str) -> Any:
    done = billsleuth(*args, "--json", env=server_env(url))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_over_mcp_recompute_invoice_gives_the_figures_billsleuth_show_gives(seeded_db_url: str) -> None:
    case = billsleuth_json(
        seeded_db_url, "case", "open", CUSTOMER, "why were we charged in September?", "--as", "U0SUPPORT1"
    )
    note = case["credit_note"]
    assert note is not None and note["invoice_id"] == INVOICE
    shown = billsleuth_json(seeded_db_url, "show", note["id"])["recompute"]
    async with stdio_session(seeded_db_url) as session:
        done = await session.call_tool("recompute_invoice", {"customer_id": CUSTOMER, "invoice_id": INVOICE})
    assert not done.is_error, done.content
    figures = done.structured_content
    assert figures is not None
    shared = set(shown) & set(figures)
    assert {"billed_total", "should_bill", "paid_total", "overcharge", "line_diffs"} <= shared
    assert {key: figures[key] for key in shared} == {key: shown[key] for key in shared}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server(seeded_db_url: str) -> Iterator[str]:
    port = free_port()
    env = server_env(seeded_db_url, BILLSLEUTH_MCP_TOKEN=TOKEN)
    server = subprocess.Popen(
        [str(BILLSLEUTH), "mcp", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"billsleuth mcp --http did not start: {server.communicate()[0]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        try:
            stopped = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            raise
    assert stopped == 0, server.communicate()[0]  # SIGTERM: a clean shutdown, not a death by signal


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_over_http_the_token_is_required_and_then_the_tools_answer(
    http_server: str, seeded_db: AsyncEngine
) -> None:
    async with httpx2.AsyncClient(timeout=30) as raw:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            refused = await raw.post(http_server, json=INITIALIZE, headers={**ACCEPT, **headers})
            assert refused.status_code == 401, (headers, refused.text)
            assert refused.headers["www-authenticate"].startswith("Bearer")
        assert await mcp_rows(seeded_db) == []  # nothing ran for them

    authorised = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with (
        authorised,
        streamable_http_client(http_server, http_client=authorised) as (read, write),
        ClientSession(read, write, client_info=types.Implementation(name=CLIENT, version="1")) as session,
    ):
        await session.initialize()
        check_listing(await session.list_tools())
        await check_recompute_and_refusals(session, seeded_db)
    check_audit_rows(await mcp_rows(seeded_db))

    # A client of the 2026-07-28 protocol has no initialize handshake: its name rides each request.
    modern = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with (
        modern,
        Client(
            streamable_http_client(http_server, http_client=modern),
            client_info=types.Implementation(name="modern-assistant", version="2"),
        ) as client,
    ):
        assert client.session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        done = await client.call_tool("recompute_invoice", {"customer_id": CUSTOMER, "invoice_id": INVOICE})
        assert done.structured_content["overcharge"] == OVERCHARGE
    assert [(r.actor, r.tool) for r in (await mcp_rows(seeded_db))[6:]] == [
        ("mcp:modern-assistant", "recompute_invoice")
    ]


def test_http_without_a_token_refuses_to_start_in_one_line(seeded_db_url: str) -> None:
    for blank in ({}, {"BILLSLEUTH_MCP_TOKEN": "  "}):
        done = billsleuth("mcp", "--http", env=server_env(seeded_db_url, **blank))
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            "billsleuth: error: --http needs BILLSLEUTH_MCP_TOKEN: the bearer token every client must send "
            "(not set)"
        ]
        assert done.stdout == ""


def test_a_token_shorter_than_32_characters_refuses_to_start_in_one_line(seeded_db_url: str) -> None:
    done = billsleuth("mcp", "--http", env=server_env(seeded_db_url, BILLSLEUTH_MCP_TOKEN="t" * 31))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "billsleuth: error: BILLSLEUTH_MCP_TOKEN must be at least 32 characters, it has 31 "
        "(make one with: openssl rand -hex 32)"
    ]
    assert done.stdout == ""
    assert "t" * 31 not in done.stderr


def test_http_on_a_port_in_use_refuses_in_one_line(seeded_db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = billsleuth(
            "mcp", "--http", "--port", str(port), env=server_env(seeded_db_url, BILLSLEUTH_MCP_TOKEN="t" * 32)
        )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"billsleuth: error: cannot serve MCP on 127.0.0.1:{port}: the port is in use; choose another with "
        "--port"
    )
    assert done.stdout == ""


async def test_a_call_outside_any_case_records_its_customer_on_the_trail(seeded_db: AsyncEngine) -> None:
    from agent.graph.tools import call_tool_for_customer

    result = await call_tool_for_customer(seeded_db, "mcp:x", "list_invoices", {"customer_id": CUSTOMER})
    assert result.ok and result.args == {}
    missing = await call_tool_for_customer(seeded_db, "mcp:x", "list_invoices", {"customer_id": "C-9999"})
    assert not missing.ok and "C-9999" in (missing.error or "")
    engine_rows = await mcp_rows(seeded_db)
    assert [(r.tool, r.ok, r.args) for r in engine_rows] == [
        ("list_invoices", True, {"customer_id": CUSTOMER}),
        ("list_invoices", False, {"customer_id": "C-9999"}),
    ]


def test_the_actor_is_the_clients_name_kept_printable() -> None:
    from agent.mcp_server import actor_for

    assert actor_for("Claude Desktop") == "mcp:Claude-Desktop"
    assert actor_for(None) == "mcp:unknown"
    assert actor_for("  ") == "mcp:unknown"
    assert actor_for("x" * 100) == "mcp:" + "x" * 64


def test_doctor_says_whether_http_can_start_and_never_shows_the_token(db_url: str) -> None:
    def doctor(**extra: str) -> str:
        return billsleuth("doctor", env=server_env(db_url, **extra)).stdout

    assert "✓ MCP tools: stdio only (set BILLSLEUTH_MCP_TOKEN to serve them over --http)" in doctor()
    with_token = doctor(BILLSLEUTH_MCP_TOKEN=TOKEN)
    assert "✓ MCP tools: stdio, and --http on 127.0.0.1 with BILLSLEUTH_MCP_TOKEN (set)" in with_token
    assert TOKEN not in with_token
