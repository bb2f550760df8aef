"""billsleuth mcp [--http [--port N]]

The seven read-only tools over the Model Context Protocol for any MCP client (agent/mcp_server.py): stdio
by default, the client starting this command; `--http` serves streamable HTTP on 127.0.0.1 behind the
bearer token BILLSLEUTH_MCP_TOKEN and refuses to start without one.
"""

from __future__ import annotations

import argparse
import asyncio

from bot.cli.common import CommandError

DEFAULT_PORT = 3100


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mcp",
        help="serve the read-only tools over MCP (stdio; --http: 127.0.0.1 behind BILLSLEUTH_MCP_TOKEN)",
        description="Serve BillSleuth's seven read-only tools to any MCP client. Each tool takes "
        "customer_id first; every call is audited as mcp:<client name>. Default: stdio (add this command "
        "to the client's configuration). --http: streamable HTTP at http://127.0.0.1:PORT/mcp; every "
        "request needs 'Authorization: Bearer $BILLSLEUTH_MCP_TOKEN'.",
    )
    parser.add_argument(
        "--http", action="store_true", help="streamable HTTP on 127.0.0.1 (needs BILLSLEUTH_MCP_TOKEN)"
    )
    parser.add_argument(
        "--port", type=int, metavar="N", help=f"HTTP port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.mcp_server import (
        McpSettings,
        NoToken,
        PortInUse,
        require_token,
        serve_http,
        serve_stdio,
    )
    from bot.cli.common import ready_database
    from engine.logcontext import setup_logging
    from engine.settings import SettingsError

    if args.port is not None and not args.http:
        raise CommandError("--port needs --http (stdio has no port)")
    port = DEFAULT_PORT if args.port is None else args.port
    if not 1 <= port <= 65535:
        raise CommandError(f"--port must be from 1 to 65535, got {port}")
    try:
        setup_logging()  # to stderr: on stdio, stdout carries the protocol and nothing else
        token = require_token(McpSettings.from_env()) if args.http else ""
    except (SettingsError, NoToken) as error:  # refused before touching the database
        raise CommandError(str(error)) from None
    url = ready_database()
    if args.http:
        try:
            asyncio.run(serve_http(url, port, token, on_ready=_announce))
        except PortInUse as error:
            raise CommandError(str(error), 1) from None
    else:
        asyncio.run(serve_stdio(url))
    return 0


def _announce(where: str) -> None:
    print(f"BillSleuth MCP server at {where} (Authorization: Bearer $BILLSLEUTH_MCP_TOKEN)", flush=True)
