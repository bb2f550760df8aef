"""`POST /stripe/webhook` (issue 29 item 2): events signed with Stripe's real scheme (HMAC-SHA256 of
`timestamp.payload` under the endpoint's secret) update the ledger through the Stripe sync, each event
once; a tampered, mis-signed or stale one gets 400 and changes nothing."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import time
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.flows.stripe_webhook import poll_events, receive
from bot.server.transport import STRIPE_WEBHOOK_PATH, build_web_app
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_stripe_sync import OCT_1, _account

SECRET = "whsec_billsleuth_test"


def signed(payload: str, secret: str = SECRET, at: int | None = None) -> str:
    at = int(time.time()) if at is None else at
    digest = hmac.new(secret.encode(), f"{at}.{payload}".encode(), hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def _event(event_id: str, event_type: str, obj: dict[str, Any]) -> str:
    event = {"id": event_id, "object": "event", "type": event_type, "created": int(time.time())}
    return json.dumps(
        event | {"api_version": "2026-06-24.dahlia", "data": {"object": obj}, "livemode": False}
    )


async def _counts(db: AsyncEngine) -> tuple[int, int]:
    async with db.connect() as conn:
        invoices = (await conn.execute(text("SELECT count(*) FROM invoices"))).scalar_one()
        imports = (
            await conn.execute(text("SELECT count(*) FROM activity_log WHERE action = 'ledger.imported'"))
        ).scalar_one()
    return invoices, imports


async def test_signed_events_update_the_ledger_once_and_bad_ones_change_nothing(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    retry_without_waiting(monkeypatch)
    monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", SECRET)
    app = SimpleNamespace(stripe_webhook=functools.partial(receive, db))
    runner = web.AppRunner(build_web_app(app))  # type: ignore[arg-type]
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}{STRIPE_WEBHOOK_PATH}"  # type: ignore[union-attr]
    try:
        async with StripeStandIn(_account()) as stand_in, aiohttp.ClientSession() as http:
            monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
            paid = _event("evt_paid", "invoice.paid", {"id": "in_sep", "object": "invoice"})

            async def post(body: str, signature: str | None) -> int:
                headers = {"Content-Type": "application/json"}
                if signature is not None:
                    headers["Stripe-Signature"] = signature
                async with http.post(url, data=body.encode(), headers=headers) as answer:
                    return answer.status

            refused = [
                await post(paid, None),
                await post(paid, signed(paid, secret="whsec_someone_else")),
                await post(paid.replace("in_sep", "in_aug"), signed(paid)),  # tampered after signing
                await post(paid, signed(paid, at=int(time.time()) - 301)),  # older than 300 s
            ]
            assert refused == [400, 400, 400, 400]
            assert await _counts(db) == (0, 0)
            assert stand_in.requests == []  # nothing was even read

            assert await post(paid, signed(paid)) == 200
            assert await _counts(db) == (5, 1)
            assert await post(paid, signed(paid)) == 200  # Stripe delivers it again: handled once
            assert await _counts(db) == (5, 1)
            ignored = _event("evt_other", "payout.paid", {"id": "po_1", "object": "payout"})
            assert await post(ignored, signed(ignored)) == 200
            assert await _counts(db) == (5, 1)
    finally:
        await runner.cleanup()


async def test_socket_mode_reads_the_events_api_instead_with_the_same_dedupe(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    retry_without_waiting(monkeypatch)
    monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
    account = _account()
    account.add("event", type="invoice.paid", data={"object": {"id": "in_sep"}}, created=OCT_1)
    account.add("event", type="payout.paid", data={"object": {"id": "po_1"}}, created=OCT_1 + 1)
    async with StripeStandIn(account) as stand_in:
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
        assert await poll_events(db) == 1  # the billing event; the payout is not the ledger's
        assert await _counts(db) == (5, 1)
        assert await poll_events(db) == 0  # claimed: no second sync, no second activity row
        assert await _counts(db) == (5, 1)
        # A later event about an object Stripe no longer has (a deleted draft): handled, nothing to write.
        later = account.add(
            "event", type="invoice.updated", data={"object": {"id": "in_gone"}}, created=OCT_1 + 2
        )
        assert await poll_events(db) == 1
        assert await _counts(db) == (5, 2)
        async with db.connect() as conn:
            claimed = await conn.execute(
                text("SELECT count(*) FROM slack_events WHERE event_id = :key"),
                {"key": "stripe:" + later["id"]},
            )
            assert claimed.scalar_one() == 1
