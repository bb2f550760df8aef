"""`billsleuth stripe sync` (issue 29 item 1) against the Stripe stand-in, the official SDK as the client:
an account's customers, prices, coupons, tax rates, subscriptions with items, invoices with their lines,
payments, refunds and credit notes land in the ledger through `ledger import`'s loader (source stripe,
Stripe's ids); what the ledger cannot hold is skipped and counted; `audit` finds the injected overcharge;
a re-sync changes nothing and reads only from where the last one stopped; a later change is picked up."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from datetime import date
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.auditor.run import audit_one
from bot.cli import main
from engine import stripe_map
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_ledger_import import audit_findings

SEPT_1 = 1_788_220_800  # 2026-09-01T00:00:00Z
AUG_1 = 1_785_542_400  # 2026-08-01T00:00:00Z
OCT_1 = 1_790_812_800  # 2026-10-01T00:00:00Z
DAY = 86_400


@pytest.fixture(autouse=True)
def _stripe_env(monkeypatch: pytest.MonkeyPatch) -> None:
    retry_without_waiting(monkeypatch)
    monkeypatch.setenv("STRIPE_API_KEY", API_KEY)


def _line(line_id: str, amount: int, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": line_id,
        "amount": amount,
        "quantity": extra.pop("quantity", 1),
        "description": extra.pop("description", "Team × 1"),
        "period": {"start": start, "end": end},
        "parent": {
            "type": "subscription_item_details",
            "subscription_item_details": {
                "subscription": "sub_us",
                "proration": False,
                "subscription_item": "si_1",
            },
        },
        "pricing": {"type": "price_details", "unit_amount_decimal": str(extra.pop("unit", amount))},
        **extra,
    }


def _paid(payment_intent: str, amount: int, at: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": "inpay_" + payment_intent,
                "amount_paid": amount,
                "status": "paid",
                "payment": {"type": "payment_intent", "payment_intent": payment_intent},
                "status_transitions": {"paid_at": at},
            }
        ],
    }


def _subscription_invoice(invoice_id: str, start: int, end: int, pi: str, created: int) -> dict[str, Any]:
    tax = {"amount": 117, "tax_behavior": "exclusive", "tax_rate_details": {"tax_rate": "txr_us"}}
    return {
        "id": invoice_id,
        "customer": "cus_us",
        "status": "paid",
        "currency": "usd",
        "created": created,
        "parent": {"type": "subscription_details", "subscription_details": {"subscription": "sub_us"}},
        "status_transitions": {"finalized_at": created},
        "lines": [_line(f"il_{invoice_id}", 3900, start, end, taxes=[tax])],
        "total_taxes": [{"amount": 117}],
        "payments": _paid(pi, 4017, created + 60),
    }


def _account() -> StripeAccount:
    """One US customer on a monthly plan (two items), billed August and September, September twice (the
    injected overcharge), one one-off invoice, a partial refund; a German customer with an inclusive tax;
    and a customer in a country the rules do not know (skipped)."""
    account = StripeAccount()
    monthly = {"interval": "month", "interval_count": 1, "usage_type": "licensed"}
    account.load(
        {
            "product": [{"id": "prod_team", "name": "Team"}],
            "price": [
                {"id": "price_team", "product": "prod_team", "unit_amount": 3900, "currency": "usd"}
                | {"recurring": monthly, "nickname": "monthly"},
                {"id": "price_addon", "product": "prod_team", "unit_amount": 500, "currency": "usd"}
                | {"recurring": monthly},
                {"id": "price_once", "product": "prod_team", "unit_amount": 25000, "currency": "usd"}
                | {"recurring": None, "type": "one_time"},
            ],
            "coupon": [{"id": "co_forever", "percent_off": 10, "duration": "forever", "currency": None}],
            "tax_rate": [
                {
                    "id": "txr_us",
                    "country": "US",
                    "percentage": 3,
                    "inclusive": False,
                    "created": AUG_1 - DAY,
                },
                {
                    "id": "txr_de",
                    "country": "DE",
                    "percentage": 19,
                    "inclusive": True,
                    "created": AUG_1 - DAY,
                },
            ],
            "customer": [
                {"id": "cus_us", "name": "Northwind", "email": "ap@northwind.test", "currency": "usd"}
                | {"address": {"country": "US"}},
                {"id": "cus_de", "name": "Kranich", "currency": "eur", "address": {"country": "DE"}},
                {"id": "cus_fr", "name": "Lumière", "currency": "eur", "address": {"country": "FR"}},
            ],
            "subscription": [
                {
                    "id": "sub_us",
                    "customer": "cus_us",
                    "status": "active",
                    "start_date": AUG_1 + 16 * 3600,
                    "billing_cycle_anchor": AUG_1 + 16 * 3600,
                    "cancel_at": None,
                    "canceled_at": None,
                    "ended_at": None,
                    "discounts": [],
                    "items": {
                        "object": "list",
                        "data": [
                            {"id": "si_1", "price": {"id": "price_team"}, "quantity": 1}
                            | {
                                "current_period_start": SEPT_1 + 16 * 3600,
                                "current_period_end": OCT_1 + 16 * 3600,
                            },
                            {"id": "si_2", "price": {"id": "price_addon"}, "quantity": 2}
                            | {
                                "current_period_start": SEPT_1 + 16 * 3600,
                                "current_period_end": OCT_1 + 16 * 3600,
                            },
                        ],
                    },
                }
            ],
        }
    )
    account.add(
        "invoice",
        **_subscription_invoice("in_aug", AUG_1 + 16 * 3600, SEPT_1 + 16 * 3600, "pi_aug", AUG_1 + 17 * 3600),
    )
    account.add(
        "invoice",
        **_subscription_invoice(
            "in_sep", SEPT_1 + 16 * 3600, OCT_1 + 16 * 3600, "pi_sep", SEPT_1 + 17 * 3600
        ),
    )
    account.add(
        "invoice",
        **_subscription_invoice(
            "in_sep_again", SEPT_1 + 16 * 3600, OCT_1 + 16 * 3600, "pi_sep2", SEPT_1 + 18 * 3600
        ),
    )
    account.add(
        "invoice",
        id="in_setup",
        customer="cus_us",
        status="paid",
        currency="usd",
        created=SEPT_1 + 20 * 3600,
        lines=[
            {"id": "il_setup", "amount": 25000, "quantity": 1, "description": "Onboarding", "parent": None}
        ],
        payments=_paid("pi_setup", 25000, SEPT_1 + 21 * 3600),
    )
    vat = {"amount": 1597, "tax_behavior": "inclusive", "tax_rate_details": {"tax_rate": "txr_de"}}
    account.add(
        "invoice",
        id="in_de",
        customer="cus_de",
        status="paid",
        currency="eur",
        created=SEPT_1 + 3600,
        lines=[
            {
                "id": "il_de",
                "amount": 10000,
                "quantity": 1,
                "description": "Add-on",
                "parent": None,
                "taxes": [vat],
            }
        ],
        payments=_paid("pi_de", 10000, SEPT_1 + 2 * 3600),
    )
    account.add(
        "invoice", id="in_fr", customer="cus_fr", status="paid", currency="eur", lines=[{"amount": 900}]
    )
    account.add("refund", status="succeeded")  # of a charge that paid nothing the ledger holds: skipped
    account.add("refund", id="re_part", amount=1000, currency="usd", charge="ch_x", payment_intent="pi_sep2")
    return account


def _sync(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["stripe", "sync", "--json", *args]) == 0
    return json.loads(out.getvalue())


async def test_an_account_syncs_audits_and_syncs_again_as_a_no_op(
    db: AsyncEngine, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with StripeStandIn(_account()) as stand_in:
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
        first = await asyncio.to_thread(_sync)
        assert first["counts"]["invoice"] == {"added": 5, "changed": 0, "unchanged": 0}
        assert first["counts"]["subscription"]["added"] == 1
        assert first["counts"]["refund"]["added"] == 1
        assert first["counts"]["payment"]["added"] == 5
        assert first["skipped"] == {"customer": 1, "invoice": 1, "plan": 1, "refund": 1}
        async with db.connect() as conn:
            items = (
                await conn.execute(
                    text("SELECT id, plan_id, quantity FROM subscription_items ORDER BY item_no")
                )
            ).all()
            sources = set((await conn.execute(text("SELECT DISTINCT source FROM invoices"))).scalars())
            one_off = (
                await conn.execute(text("SELECT subscription_id, total FROM invoices WHERE id = 'in_setup'"))
            ).one()
            de = (
                await conn.execute(
                    text("SELECT subtotal, tax, inclusive_tax, total FROM invoices WHERE id = 'in_de'")
                )
            ).one()
        assert [tuple(i) for i in items] == [("si_1", "price_team", 1), ("si_2", "price_addon", 2)]
        assert sources == {"stripe"}
        assert (one_off.subscription_id, str(one_off.total)) == (None, "250.00")
        assert [str(v) for v in de] == ["100.00", "15.97", "15.97", "100.00"]
        # The second September invoice is the extra copy; 10.00 of it came back already.
        assert audit_findings(db_url) == [("cus_us", "in_sep_again", "duplicate_invoice", "30.17")]

        again = await asyncio.to_thread(_sync)
        assert all(c["added"] == c["changed"] == 0 for c in again["counts"].values()), again["counts"]
        assert again["skipped"] == {"customer": 1, "plan": 1}  # the rest is before the cursor now
        later = stand_in.calls("invoices.list")[-1]
        assert later.params["created"] == {"gte": str(SEPT_1 + 20 * 3600)}

        # Later: the duplicate is refunded in full in Stripe, a new invoice is issued, and an older one is
        # voided (an event says so: it is read again though it is older than the cursor).
        account = stand_in.account
        account.add(
            "refund", amount=3017, currency="usd", payment_intent="pi_sep2", created=OCT_1 + 17 * 3600
        )
        account.add(
            "invoice",
            **_subscription_invoice(
                "in_oct", OCT_1 + 16 * 3600, OCT_1 + 31 * DAY, "pi_oct", OCT_1 + 17 * 3600
            ),
        )
        voided = account.get("invoice", "in_de")
        assert voided is not None
        voided["status"] = "void"
        account.add("event", type="invoice.voided", data={"object": voided}, created=OCT_1 + 18 * 3600)
        third = await asyncio.to_thread(_sync)
        assert third["counts"]["invoice"] == {"added": 1, "changed": 1, "unchanged": 1}  # in_setup again
        assert third["counts"]["refund"] == {"added": 1, "changed": 0, "unchanged": 1}
        assert stand_in.calls("invoices.retrieve")[-1].path == "/v1/invoices/in_de"
    async with db.connect() as conn:  # (in-process: the first audit above went the whole CLI way)
        left = await audit_one(conn, "cus_us", date(2026, 10, 1))
    assert left.findings == []  # refunded in full: nothing left to credit


def test_without_a_key_sync_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STRIPE_API_KEY")
    with pytest.raises(SystemExit) as exited:
        main(["stripe", "sync"])
    assert exited.value.code == 2
    assert (
        capsys.readouterr().err == "billsleuth: error: STRIPE_API_KEY is not set: Stripe cannot be reached\n"
    )


def test_a_credit_note_billsleuth_created_counts_once_as_ours() -> None:
    ours = {"id": "cn_1", "invoice": "in_1", "amount": 1200, "currency": "usd", "created": SEPT_1}
    ours |= {
        "metadata": {"billsleuth_credit_note": "CN-0007"},
        "refunds": [{"refund": "re_1", "amount_refunded": 1200}],
    }
    theirs = {**ours, "id": "cn_2", "metadata": {}, "refunds": [{"refund": "re_2", "amount_refunded": 500}]}
    assert stripe_map.credit_note(ours, "US") is None
    assert stripe_map.credit_note(theirs, "US")["id"] == "cn_2"  # type: ignore[index]
    assert stripe_map.refunds_of_notes([ours, theirs]) == {"re_1": "CN-0007", "re_2": "cn_2"}
    refund = {
        "id": "re_1",
        "amount": 1200,
        "currency": "usd",
        "payment_intent": "pi_1",
        "status": "succeeded",
    }
    mapped = stripe_map.refund(refund | {"created": SEPT_1}, "CN-0007")
    assert (mapped["payment_id"], mapped["credit_note_id"], mapped["amount"]) == ("pi_1", "CN-0007", "12.00")


def _discount(coupon_id: str, start: int) -> dict[str, Any]:
    discount = {"id": f"di_{coupon_id}_{start}", "object": "discount", "source": {"coupon": coupon_id}}
    return discount | {"start": start, "end": None}


async def test_a_coupon_is_held_when_it_began_with_its_subscription(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stripe sends a subscription's discounts as ids unless they are expanded: sync expands them and
    holds the coupon of one that began with the subscription. One added months later is not held: the
    rules count a coupon's months from the start, so the invoices before it would look short of it."""
    account = StripeAccount()
    monthly = {"interval": "month", "interval_count": 1, "usage_type": "licensed"}
    start = AUG_1 + 16 * 3600
    subscription = {"customer": "cus_us", "status": "active", "start_date": start, "created": start}
    subscription |= {"billing_cycle_anchor": start, "cancel_at": None, "canceled_at": None}

    def items(item_id: str) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": item_id, "price": {"id": "price_team"}, "quantity": 1}]}

    account.load(
        {
            "product": [{"id": "prod_team", "name": "Team"}],
            "price": [
                {"id": "price_team", "product": "prod_team", "unit_amount": 3900, "currency": "usd"}
                | {"recurring": monthly},
            ],
            "coupon": [{"id": "co_forever", "percent_off": 10, "duration": "forever", "currency": None}],
            "customer": [
                {"id": "cus_us", "name": "Northwind", "currency": "usd", "address": {"country": "US"}},
            ],
            "subscription": [
                subscription
                | {
                    "id": "sub_at_start",
                    "items": items("si_a"),
                    "discounts": [_discount("co_forever", start + 2)],
                },
                subscription
                | {"id": "sub_later", "items": items("si_b"), "discounts": [_discount("co_forever", OCT_1)]},
            ],
        }
    )
    async with StripeStandIn(account) as stand_in:
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", stand_in.url)
        assert (await asyncio.to_thread(_sync))["counts"]["subscription"]["added"] == 2
        (listed,) = stand_in.calls("subscriptions.list")
    assert listed.params["expand"] == ["data.discounts"]
    async with db.connect() as conn:
        rows = await conn.execute(text("SELECT id, coupon_id FROM subscriptions ORDER BY id"))
        assert [tuple(row) for row in rows] == [("sub_at_start", "co_forever"), ("sub_later", None)]
