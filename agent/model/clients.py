"""This process's model clients: one `AsyncOpenAI` per endpoint, key and timeout, shared by every case.

A client owns a connection pool: one per case paid a TCP (and TLS) handshake per case and threw the pool
away after it. The pool's connections belong to the event loop that opened them (httpx on anyio), and the
openai SDK does not track loops; the CLI runs each command in its own `asyncio.run` and tests may start
loops of their own. So clients are kept per running loop: a loop never gets a client whose connections
another loop opened. `case_service` holds the registry while it is open; when the last holder on a loop
leaves (the bot's shutdown, the end of a command) that loop's clients are closed.

The openai SDK is imported only when a client is first built: read commands never pay for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from agent.graph.configuration import Configuration

# base URL, a digest of the API key (never the key itself in a key someone might print), timeout, retries
ClientKey = tuple[str | None, str, float, int]


@dataclass
class _LoopClients:
    clients: dict[ClientKey, AsyncOpenAI] = field(default_factory=dict)
    holders: int = 0


# Weak: a loop that is gone (an `asyncio.run` that returned) takes its entry with it.
_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()


def _this_loop() -> _LoopClients:
    loop = asyncio.get_running_loop()
    clients = _BY_LOOP.get(loop)
    if clients is None:
        clients = _BY_LOOP[loop] = _LoopClients()
    return clients


def client_key(configuration: Configuration) -> ClientKey:
    key = hashlib.sha256((configuration.openai_key() or "").encode()).hexdigest()
    return (configuration.base_url, key, configuration.request_timeout_s, configuration.max_retries)


def model_client(configuration: Configuration) -> AsyncOpenAI:
    """The shared client for this configuration's endpoint on the running loop, built on first use.

    Raises openai.OpenAIError when no client can be built (no API key anywhere)."""
    from openai import AsyncOpenAI

    registry = _this_loop()
    key = client_key(configuration)
    client = registry.clients.get(key)
    if client is None or client.is_closed():
        client = registry.clients[key] = AsyncOpenAI(
            api_key=configuration.openai_key(),
            base_url=configuration.base_url,
            timeout=configuration.request_timeout_s,
            max_retries=configuration.max_retries,
        )
    return client


@asynccontextmanager
async def model_clients_held() -> AsyncIterator[None]:
    """Keep this loop's clients open for the block; the last holder to leave closes them."""
    registry = _this_loop()
    registry.holders += 1
    try:
        yield
    finally:
        registry.holders -= 1
        if registry.holders == 0:
            await close_model_clients()


async def close_model_clients() -> None:
    """Close the running loop's clients (their connections); the next use builds new ones."""
    registry = _this_loop()
    clients = list(registry.clients.values())
    registry.clients.clear()
    # return_exceptions: one client failing to close must not leave the others open
    await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
