"""A Stripe subscription's plan and seat changes (issue 29 item 2): from invoices' proration lines for the
past and `customer.subscription.updated`'s `previous_attributes` going forward, one event per change, the
create event carrying the configuration before the first change, and a re-sync changing nothing."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.cli import main
from engine import stripe_history
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_stripe_sync import AUG_1, DAY, OCT_1, SEPT_1, _paid, _sync

HOUR = 3600
START = AUG_1 + 16 * HOUR  # 09:00 in Los Angeles, the US customer's zone: local days are UTC's days
MONTHLY = {"interval": "month", "interval_count": 1, "usage_type": "licensed"}


@pytest.fixture(autouse=True)
def _stripe_env(monkeypatch: pytest.MonkeyPatch) -> None:
    retry_without_waiting(monkeypatch)
    monkeypatch.setenv("STRIPE_API_KEY", API_KEY)


def _line(
    line_id: str, price: str, quantity: int, amount: int, period: tuple[int, int], proration: bool = False
) -> dict[str, Any]:
    return {
        "id": line_id,
        "amount": amount,
        "quantity": quantity,
        "description": f"{quantity} × {price}",
        "period": {"start": period[0], "end": period[1]},
        "parent": {
            "type": "subscription_item_details",
            "subscription_item_details": {
                "subscription": "sub_h",
                "subscription_item": "si_h",
                "proration": proration,
            },
        },
        "pricing": {
            "type": "price_details",
            "price_details": {"price": price, "product": "prod_team"},
            "unit_amount_decimal": str(abs(amount) // quantity),
        },
    }


def _invoice(invoice_id: str, created: int, lines: list[dict[str, Any]]) -> dict[str, Any]:
    subtotal = sum(line["amount"] for line in lines)
    tax = (subtotal * 3 + 50) // 100  # 3 %, on the recurring line (the mapping adds a rate's taxes up)
    lines[0]["taxes"] = [
        {"amount": tax, "tax_behavior": "exclusive", "tax_rate_details": {"tax_rate": "txr_us"}}
    ]
    return {
        "id": invoice_id,
        "customer": "cus_h",
        "status": "paid",
        "currency": "usd",
        "created": created,
        "parent": {"type": "subscription_details", "subscription_details": {"subscription": "sub_h"}},
        "status_transitions": {"finalized_at": created},
        "lines": lines,
        "total_taxes": [{"amount": tax}],
        "payments": _paid("pi_" + invoice_id, subtotal + tax, created + 60),
    }


def _account(price: str, quantity: int) -> StripeAccount:
    """One US customer whose subscription (one item, si_h) started on August 1st and is now on `price` ×
    `quantity`, billed for August on Team."""
    account = StripeAccount()
    account.load(
        {
            "product": [{"id": "prod_team", "name": "Team"}],
            "price": [
                {"id": "price_team", "product": "prod_team", "unit_amount": 3900, "currency": "usd"}
                | {"recurring": MONTHLY},
                {"id": "price_pro", "product": "prod_team", "unit_amount": 9900, "currency": "usd"}
                | {"recurring": MONTHLY, "nickname": "pro"},
            ],
            "tax_rate": [
                {"id": "txr_us", "country": "US", "percentage": 3, "inclusive": False, "created": AUG_1 - DAY}
            ],
            "customer": [{"id": "cus_h", "name": "Heron", "currency": "usd", "address": {"country": "US"}}],
            "subscription": [
                {
                    "id": "sub_h",
                    "customer": "cus_h",
                    "status": "active",
                    "start_date": START,
                    "billing_cycle_anchor": START,
                    "cancel_at": None,
                    "canceled_at": None,
                    "discounts": [],
                    "items": {
                        "object": "list",
                        "data": [
                            {"id": "si_h", "price": {"id": price}, "quantity": quantity}
                            | {
                                "current_period_start": SEPT_1 + 16 * HOUR,
                                "current_period_end": OCT_1 + 16 * HOUR,
                            }
                        ],
                    },
                }
            ],
        }
    )
    return account


AUGUST = (START, SEPT_1 + 16 * HOUR)
SEPTEMBER = (SEPT_1 + 16 * HOUR, OCT_1 + 16 * HOUR)


def _json_of(argv: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


async def _events(db: AsyncEngine) -> list[tuple[str, str, str, dict[str, Any]]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT id, type, effective_at AT TIME ZONE 'UTC', payload FROM subscription_events "
                "WHERE subscription_id = 'sub_h' ORDER BY effective_at, id"
            )
        )
        return [(r[0], r[1], r[2].isoformat(), r[3]) for r in rows]


async def test_a_past_upgrade_comes_from_the_next_invoices_proration_pair_and_audits_clean(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Team → Pro on August 16th (16 of August's 31 days left), billed on September's invoice: the
    rules' own prorations by the day equal Stripe's here, so audit has nothing to say about the change."""
    changed_at = START + 15 * DAY
    account = _account("price_pro", 1)
    account.add(
        "invoice", **_invoice("in_aug", START + HOUR, [_line("il_aug", "price_team", 1, 3900, AUGUST)])
    )
    left = (changed_at, AUGUST[1])
    september = [
        _line("il_sep", "price_pro", 1, 9900, SEPTEMBER),
        _line("il_unused", "price_team", 1, -2013, left, proration=True),  # 3900 × 16/31
        _line("il_remaining", "price_pro", 1, 5110, left, proration=True),  # 9900 × 16/31
    ]
    account.add("invoice", **_invoice("in_sep", SEPT_1 + 17 * HOUR, september))
    async with StripeStandIn(account) as stand_in:
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
        first = await asyncio.to_thread(_sync)
        assert first["counts"]["subscription_event"]["added"] == 2
        assert await _events(db) == [
            ("sub_h:create", "create", "2026-08-01T16:00:00", {"plan_id": "price_team", "quantity": 1}),
            (
                "il_remaining:change",
                "upgrade",
                "2026-08-16T16:00:00",
                {"to_plan": "price_pro", "to_quantity": 1},
            ),
        ]
        # `audit --all` (in-process: the CLI way, without a second interpreter's start-up)
        audit = await asyncio.to_thread(_json_of, ["audit", "--all", "--json"])
        assert audit["findings"] == []  # without the upgrade, September's Pro would be an overcharge
        again = await asyncio.to_thread(_sync, "--since", "2026-07-01")  # the invoices read again
        assert all(c["added"] == c["changed"] == 0 for c in again["counts"].values()), again["counts"]


async def test_changes_going_forward_come_from_events_once_and_keep_the_create(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a first sync on Team × 2: 2 → 5 seats on August 10th with proration_behavior none (only the
    event says so), then Team → Pro on August 20th, which the event says first and September's proration
    pair says again a sync later: one event each, and the create stays Team × 2."""
    account = _account("price_team", 2)
    account.add(
        "invoice", **_invoice("in_aug", START + HOUR, [_line("il_aug", "price_team", 2, 7800, AUGUST)])
    )
    async with StripeStandIn(account) as stand_in:
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
        await asyncio.to_thread(_sync)
        seats = account.change_subscription("sub_h", START + 9 * DAY, quantity=5)
        upgrade = account.change_subscription("sub_h", START + 19 * DAY, price="price_pro")
        previous = upgrade["data"]["previous_attributes"]["items"]["data"][0]
        assert (previous["price"]["id"], previous["quantity"]) == ("price_team", 5)  # Stripe's shape

        second = await asyncio.to_thread(_sync)
        assert second["counts"]["subscription_event"] == {"added": 2, "changed": 0, "unchanged": 1}
        assert "customer.subscription.updated" in stand_in.calls("events.list")[-1].params["types"]
        expected = [
            ("sub_h:create", "create", "2026-08-01T16:00:00", {"plan_id": "price_team", "quantity": 2}),
            (seats["id"] + ":change", "quantity_change", "2026-08-10T16:00:00", {"to_quantity": 5}),
            (
                upgrade["id"] + ":change",
                "upgrade",
                "2026-08-20T16:00:00",
                {"to_plan": "price_pro", "to_quantity": 5},
            ),
        ]
        assert await _events(db) == expected

        left = (START + 19 * DAY, AUGUST[1])
        september = [
            _line("il_sep", "price_pro", 5, 49500, SEPTEMBER),
            _line("il_unused", "price_team", 5, -7548, left, proration=True),
            _line("il_remaining", "price_pro", 5, 19161, left, proration=True),
        ]
        account.add("invoice", **_invoice("in_sep", SEPT_1 + 17 * HOUR, september))
        third = await asyncio.to_thread(_sync)
        assert third["counts"]["invoice"]["added"] == 1
        assert third["counts"]["subscription_event"]["added"] == 0  # the upgrade the event already named
        assert await _events(db) == expected
        fourth = await asyncio.to_thread(_sync)
        assert all(c["added"] == c["changed"] == 0 for c in fourth["counts"].values()), fourth["counts"]


def test_both_sources_in_one_sync_make_one_event_the_stripe_events() -> None:
    event = {
        "id": "evt_1",
        "type": "customer.subscription.updated",
        "created": START + 19 * DAY,
        "data": {
            "object": {
                "id": "sub_h",
                "items": {"data": [{"id": "si_h", "price": {"id": "price_pro"}, "quantity": 5}]},
            },
            "previous_attributes": {
                "items": {"data": [{"id": "si_h", "price": {"id": "price_team"}, "quantity": 5}]}
            },
        },
    }
    left = (START + 19 * DAY, AUGUST[1])
    invoice = _invoice(
        "in_sep",
        SEPT_1,
        [
            _line("il_unused", "price_team", 5, -7548, left, proration=True),
            _line("il_remaining", "price_pro", 5, 19161, left, proration=True),
        ],
    )
    invoice["lines"] = {"data": invoice["lines"]}
    changes = [
        *stripe_history.from_invoice(invoice, {"sub_h": ["si_h"]}),
        stripe_history.from_event(event),
    ]
    assert [c.id for c in changes if c] == ["il_remaining:change", "evt_1:change"]
    found = stripe_history.history(
        [c for c in changes if c], {}, {"sub_h": "US"}, {"price_team": 3900, "price_pro": 9900}
    )
    assert [(e["id"], e["event_type"], e["payload"]) for e in found.events] == [
        ("evt_1:change", "upgrade", {"to_plan": "price_pro", "to_quantity": 5})
    ]
    assert found.initial == {"sub_h": ("price_team", 5)}
