"""Sends signed payloads to the app's /slack/events URL, as Slack's servers would."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from bot.slack_testing.payloads import RETRY_NUM_HEADER, RETRY_REASON_HEADER, encode, sign


@dataclass(frozen=True)
class Delivery:
    """The app's answer to one request."""

    status: int
    body: str
    headers: Mapping[str, str]
    elapsed: float  # seconds from sending to the complete response

    def json(self) -> Any:
        return json.loads(self.body)


class SignedClient:
    """POSTs payloads to one URL with Slack's signature headers. Use as `async with SignedClient(...)`."""

    def __init__(self, url: str, signing_secret: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self.signing_secret = signing_secret
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SignedClient:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self,
        payload: Mapping[str, Any],
        *,
        timestamp: int | None = None,
        secret: str | None = None,
        retry_num: int | None = None,
    ) -> Delivery:
        """Encode the payload as Slack would and sign it (with another `secret` or `timestamp` to test
        what the app refuses). `retry_num` adds Slack's retry headers, as on a redelivered event."""
        body, content_type = encode(payload)
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {"Content-Type": content_type, **sign(body, secret or self.signing_secret, ts)}
        if retry_num is not None:
            headers[RETRY_NUM_HEADER] = str(retry_num)
            headers[RETRY_REASON_HEADER] = "http_timeout"
        return await self.send_raw(body, headers)

    async def send_raw(self, body: str, headers: Mapping[str, str]) -> Delivery:
        if self._session is None:
            raise RuntimeError("SignedClient is not open: use it as `async with SignedClient(...)`")
        started = time.perf_counter()
        async with self._session.post(self.url, data=body.encode(), headers=dict(headers)) as response:
            text = await response.text()
        return Delivery(response.status, text, dict(response.headers), time.perf_counter() - started)


async def deliver(url: str, payload: Mapping[str, Any], signing_secret: str, **options: Any) -> Delivery:
    """One signed request in its own session."""
    async with SignedClient(url, signing_secret) as client:
        return await client.send(payload, **options)
