"""The read-only tools over the Model Context Protocol (`billsleuth mcp`), with the official `mcp` SDK.

The server lists exactly the specs of `agent.graph.tools.READ_TOOLS`, the registry the graph's model is
offered, each annotated read-only; a call runs through `call_tool_for_customer`, so it gets the graph's
argument validation, customer scoping and audit row (actor `mcp:<the client's name from its clientInfo>`).
Nothing that writes is in that registry, so nothing that writes can be listed or called here.

stdio by default (the client starts the process); `--http` serves streamable HTTP on 127.0.0.1 and every
request must carry `Authorization: Bearer $BILLSLEUTH_MCP_TOKEN` (without a token it will not start).
The SDK is imported inside the functions: `doctor` reads the settings without loading it.
"""

from __future__ import annotations

import errno
import hmac
import json
import logging
import re
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import Field, SecretStr, field_validator

from agent.graph.tools import READ_TOOLS, ToolSpec, call_tool_for_customer
from engine.settings import EnvSettings, SettingsError

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.auth.provider import AccessToken
    from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

TOKEN = "BILLSLEUTH_MCP_TOKEN"
HOST = "127.0.0.1"  # loopback only: put a reverse proxy (TLS) in front to reach it from elsewhere
PATH = "/mcp"
UNKNOWN_CLIENT = "unknown"


# A bearer token is the only thing between the port and the ledger: short ones can be guessed or typed by
# hand (a password, a word); 32 characters is what `openssl rand -hex 16` gives at the least.
MIN_TOKEN_LENGTH = 32


class McpSettings(EnvSettings):
    token: SecretStr | None = Field(None, validation_alias=TOKEN)

    @field_validator("token", mode="before")
    @classmethod
    def _long_enough(cls, value: object) -> object:
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if isinstance(text, str) and text.strip() and len(text.strip()) < MIN_TOKEN_LENGTH:
            raise SettingsError(
                f"{TOKEN} must be at least {MIN_TOKEN_LENGTH} characters, it has {len(text.strip())} "
                "(make one with: openssl rand -hex 32)"
            )
        return value


class NoToken(Exception):
    """`--http` without BILLSLEUTH_MCP_TOKEN: the server would be open to anyone who can reach the port."""


class PortInUse(Exception):
    """Another process listens on the port `--http` was asked to serve on."""


def listening_socket(port: int) -> socket.socket:
    """The server's socket on HOST:port, bound before anything starts, so that a port in use is one line
    (uvicorn, left to bind it, logs the error and exits from inside its task with a traceback)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
    try:
        sock.bind((HOST, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"cannot serve MCP on {HOST}:{port}: the port is in use; choose another with --port"
            ) from None
        raise
    return sock


def actor_for(client_name: str | None) -> str:
    """`mcp:<client name>` for the audit row; the name is what the client says it is (clientInfo.name),
    an attribution, not an authentication: kept to printable characters and 64 of them."""
    name = re.sub(r"[^\x21-\x7e]+", "-", (client_name or "").strip())[:64].strip("-")
    return f"mcp:{name or UNKNOWN_CLIENT}"


def _client_name(ctx: ServerRequestContext[Any]) -> str | None:
    # The initialize handshake's clientInfo, or (2026-07-28 requests) the envelope's: the SDK fills both.
    params = ctx.session.client_params
    return params.client_info.name if params is not None else None


def _tool(spec: ToolSpec) -> types.Tool:
    import mcp_types as types

    return types.Tool(
        name=spec.name,
        description=f"{spec.description} Read-only; customer_id scopes the call: another customer's "
        "invoice is refused.",
        input_schema=spec.parameters(customer_first=True),
        annotations=types.ToolAnnotations(
            title=spec.name.replace("_", " ").capitalize(),
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )


def build_server(engine: AsyncEngine) -> Server[Any]:
    """The low-level SDK server over the read-only registry; every call reads the ledger afresh."""
    import mcp_types as types
    from mcp.server import Server

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec) for spec in READ_TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        actor = actor_for(_client_name(ctx))
        result = await call_tool_for_customer(engine, actor, params.name, params.arguments or {})
        if not result.ok:  # refused as inside the graph: the caller reads why, the trail has the row
            return types.CallToolResult(content=[types.TextContent(text=result.error or "")], is_error=True)
        text = json.dumps(result.data, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result.data)

    return Server(
        "billsleuth",
        version=_version(),
        instructions="BillSleuth's read-only billing tools: a customer's ledger, invoices, payments, "
        "subscription events, the price book, and recompute_invoice (billed vs what the billing rules "
        "say). Every tool takes customer_id first; every call is audited.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("billsleuth")
    except PackageNotFoundError:
        return ""


async def serve_stdio(url: str) -> None:
    """Serve one client over this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    from engine.db import create_engine

    engine = create_engine(url)
    try:
        server = build_server(engine)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await engine.dispose()


class StaticToken:
    """The SDK's bearer check against the one configured token (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        if not hmac.compare_digest(token.encode(), self._token):
            return None
        return AccessToken(token=token, client_id="billsleuth-mcp", scopes=[])


def _graceful_server_class() -> type:
    import signal
    from contextlib import contextmanager

    import uvicorn

    class GracefulServer(uvicorn.Server):
        """uvicorn re-raises SIGTERM once it has shut down, killing the process before the embedded
        Postgres is stopped at exit; this one shuts down the same way and then simply returns."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

    return GracefulServer


def require_token(settings: McpSettings) -> str:
    token = settings.token.get_secret_value() if settings.token else ""
    if not token:
        raise NoToken(f"--http needs {TOKEN}: the bearer token every client must send (not set)")
    return token


async def serve_http(url: str, port: int, token: str, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve streamable HTTP at http://127.0.0.1:PORT/mcp; a request without the token gets 401.
    `on_ready` is told the URL once the port is listening."""
    import asyncio

    import uvicorn
    from mcp.server.auth.settings import AuthSettings

    from engine.db import create_engine

    sock = listening_socket(port)
    engine = create_engine(url)
    try:
        app = build_server(engine).streamable_http_app(
            streamable_http_path=PATH,
            host=HOST,  # the SDK then refuses Host/Origin headers that are not loopback (DNS rebinding)
            token_verifier=StaticToken(token),
            # The SDK's bearer check is configured through its OAuth settings; no authorization server is
            # run or advertised (no resource_server_url), the issuer is only this server's own address.
            auth=AuthSettings(issuer_url=f"http://{HOST}:{port}", resource_server_url=None),
        )
        config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on")
        server = _graceful_server_class()(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if server.started and on_ready is not None:
            on_ready(f"http://{HOST}:{port}{PATH}")
        await serving
    finally:
        sock.close()
        await engine.dispose()
