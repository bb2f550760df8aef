"""`billsleuth bot --http` as a separate process, the way Slack meets it: a free port to serve on, and a
wait until it answers its health check. Used by the two-process tests and the latency benchmark."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from typing import Any

import aiohttp

from bot.server import HEALTH_PATH


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_until_serving(base_url: str, process: subprocess.Popen[Any], timeout: float = 300) -> None:
    """Poll `base_url` + /healthz until it answers 200; fail at once (with what the bot printed, when its
    output is captured) if the process exits first. `timeout` only guards against a bot that hangs: on a
    2-core machine shared by several test runs a start took over 60 s."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                printed = process.stdout.read() if process.stdout else ""
                raise RuntimeError(f"the bot exited before serving: {printed or 'no output captured'}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(base_url + HEALTH_PATH) as answer:
                    if answer.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{base_url} did not start within {timeout}s")
