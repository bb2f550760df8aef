"""The Stripe stand-in, driven by the official SDK the way BillSleuth drives Stripe: what it refuses as
Stripe would, idempotency, pagination, injected failures the SDK retries, a connection dropped after work."""

from __future__ import annotations

import pytest
import stripe

from engine.stripe_api import StripeSettings, stripe_client
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    retry_without_waiting(monkeypatch)


def _account() -> StripeAccount:
    account = StripeAccount()
    account.load(
        {
            "customer": [{"id": "cus_A", "name": "Acme", "email": "billing@acme.test"}],
            "invoice": [
                {
                    "id": "in_paid",
                    "customer": "cus_A",
                    "status": "paid",
                    "currency": "usd",
                    "number": "ACME-0001",
                    "lines": [{"id": "il_seat", "amount": 3000}, {"id": "il_addon", "amount": 1500}],
                },
                {"id": "in_open", "customer": "cus_A", "status": "open", "lines": [{"amount": 2000}]},
            ],
        }
    )
    return account


def _client(stand_in: StripeStandIn, retries: int = 0) -> stripe.StripeClient:
    settings = StripeSettings(api_key=API_KEY, api_base=stand_in.url)
    return stripe_client(settings, max_network_retries=retries)


async def test_preview_and_create_a_credit_note_shaped_as_stripes() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in)
        params = {
            "invoice": "in_paid",
            "lines": [{"type": "invoice_line_item", "invoice_line_item": "il_seat", "amount": 1200}],
            "refund_amount": 1200,
            "reason": "order_change",
            "memo": "Seat price corrected",
            "metadata": {"billsleuth_credit_note": "CN-0001"},
        }
        preview = await client.v1.credit_notes.preview_async(params)  # type: ignore[arg-type]
        assert (preview.amount, preview.total, stand_in.account.all("credit_note")) == (1200, 1200, [])
        note = await client.v1.credit_notes.create_async(params)  # type: ignore[arg-type]
        assert (note.object, note.status, note.type, note.amount) == (
            "credit_note",
            "issued",
            "post_payment",
            1200,
        )
        assert note.metadata["billsleuth_credit_note"] == "CN-0001"
        assert note.lines.data[0].invoice_line_item == "il_seat"
        assert note.refunds[0].amount_refunded == 1200
        fetched = await client.v1.credit_notes.retrieve_async(note.id)
        assert fetched.id == note.id
        created = stand_in.calls("credit_notes.create")[0]
        assert created.params["lines"][0]["amount"] == "1200"
        assert created.headers["Stripe-Version"] == stripe.api_version


async def test_a_parameter_stripe_does_not_know_is_refused_and_changes_nothing() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in)
        try:
            await client.v1.credit_notes.create_async({"invoice": "in_paid", "amount": 100, "colour": "red"})  # type: ignore[typeddict-unknown-key]
        except stripe.InvalidRequestError as refused:
            assert (refused.http_status, refused.param, refused.code) == (400, "colour", "parameter_unknown")
        else:
            raise AssertionError("an unknown parameter was accepted")
        try:
            await client.v1.credit_notes.create_async({"invoice": "in_paid", "amount": 100, "reason": "oops"})  # type: ignore[typeddict-item]
        except stripe.InvalidRequestError as refused:
            assert refused.param == "reason"
        else:
            raise AssertionError("a reason outside Stripe's enum was accepted")
        assert stand_in.account.all("credit_note") == []


async def test_paid_invoice_notes_must_say_where_the_money_goes_and_cannot_overcredit() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in)
        for params in (
            {"invoice": "in_paid", "amount": 500},  # paid: refund/credit/out-of-band must add up to 500
            {"invoice": "in_paid", "amount": 5000, "credit_amount": 5000},  # more than the invoice's 4500
        ):
            try:
                await client.v1.credit_notes.create_async(params)  # type: ignore[arg-type]
            except stripe.InvalidRequestError:
                pass
            else:
                raise AssertionError(f"Stripe would refuse {params}")
        note = await client.v1.credit_notes.create_async(
            {"invoice": "in_paid", "amount": 500, "credit_amount": 500}
        )
        assert note.customer_balance_transaction is not None
        assert stand_in.account.get("customer", "cus_A")["balance"] == -500  # type: ignore[index]
        open_note = await client.v1.credit_notes.create_async({"invoice": "in_open", "amount": 700})
        assert (open_note.type, stand_in.account.get("invoice", "in_open")["amount_remaining"]) == (
            "pre_payment",
            1300,
        )  # type: ignore[index]


async def test_same_idempotency_key_replays_and_other_parameters_are_an_idempotency_error() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in)
        params = {"invoice": "in_paid", "amount": 400, "out_of_band_amount": 400}
        first = await client.v1.credit_notes.create_async(params, {"idempotency_key": "cn-key-1"})  # type: ignore[arg-type]
        again = await client.v1.credit_notes.create_async(params, {"idempotency_key": "cn-key-1"})  # type: ignore[arg-type]
        assert again.id == first.id
        assert again.last_response.headers["Idempotent-Replayed"] == "true"
        assert len(stand_in.account.all("credit_note")) == 1
        try:
            await client.v1.credit_notes.create_async(
                {**params, "amount": 401, "out_of_band_amount": 401}, {"idempotency_key": "cn-key-1"}
            )
        except stripe.IdempotencyError as refused:
            assert refused.http_status == 400
        else:
            raise AssertionError("a reused key with other parameters was accepted")
        assert len(stand_in.account.all("credit_note")) == 1


async def test_lists_page_newest_first_and_the_sdk_auto_pages() -> None:
    account = StripeAccount()
    account.load({"customer": [{"id": f"cus_{number:03d}"} for number in range(25)]})
    async with StripeStandIn(account) as stand_in:
        client = _client(stand_in)
        first = await client.v1.customers.list_async({"limit": 10})
        assert (first.data[0].id, first.has_more) == ("cus_024", True)
        every = [customer.id async for customer in first.auto_paging_iter()]
        assert every == [f"cus_{number:03d}" for number in reversed(range(25))]
        starts = [call.params.get("starting_after") for call in stand_in.calls("customers.list")]
        assert starts == [None, "cus_015", "cus_005"]


async def test_429_and_500_are_retried_by_the_sdk_with_the_same_key_and_a_drop_replays() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in, retries=3)
        stand_in.fail_next("credit_notes.create", 500)
        stand_in.fail_next("credit_notes.create", 429, headers={"Stripe-Should-Retry": "true"})
        stand_in.drop_after("credit_notes.create")
        note = await client.v1.credit_notes.create_async(
            {"invoice": "in_paid", "amount": 300, "refund_amount": 300}
        )
        calls = stand_in.calls("credit_notes.create")
        assert [call.status for call in calls] == [500, 429, 200, 200]
        assert (
            len({call.idempotency_key for call in calls}) == 1
        )  # the SDK's own key, kept across its retries
        assert [credit_note["id"] for credit_note in stand_in.account.all("credit_note")] == [note.id]


async def test_a_429_without_stripe_should_retry_is_not_retried() -> None:
    async with StripeStandIn(_account()) as stand_in:
        client = _client(stand_in, retries=3)
        stand_in.fail_next("invoices.retrieve", 429)
        try:
            await client.v1.invoices.retrieve_async("in_paid")
        except stripe.RateLimitError:
            pass
        else:
            raise AssertionError("the 429 did not reach the caller")
        assert len(stand_in.calls("invoices.retrieve")) == 1


async def test_unknown_paths_and_wrong_keys_are_refused() -> None:
    async with StripeStandIn(_account()) as stand_in:
        wrong_key = stripe_client(StripeSettings(api_key="sk_test_wrong", api_base=stand_in.url))
        try:
            await wrong_key.v1.invoices.retrieve_async("in_paid")
        except stripe.AuthenticationError:
            pass
        else:
            raise AssertionError("a wrong key was accepted")
        try:
            await _client(stand_in).v1.invoices.retrieve_async("in_missing")
        except stripe.InvalidRequestError as refused:
            assert (refused.http_status, refused.code) == (404, "resource_missing")
        else:
            raise AssertionError("a missing invoice was found")
