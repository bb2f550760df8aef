"""A case whose approved note is issued in Stripe (stored policy BILLSLEUTH_BILLING_SYSTEM=stripe), on the
seeded ledger with the offline investigator and the Stripe stand-in: Stripe failing keeps the case waiting,
the sweep tries again with the same key, and the case, its JSON and the reply name the Stripe credit note."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select, update

from agent.cases.service import case_service
from agent.graph.configuration import Configuration
from engine import schema
from engine.db import create_engine
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_cases import open_and_approve, scenario, settings


@pytest.fixture
async def stand_in(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[StripeStandIn]:
    retry_without_waiting(monkeypatch)
    async with StripeStandIn() as server:
        monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", server.url)
        yield server


async def _from_stripe(db_url: str, invoice_id: str, account: StripeAccount) -> None:
    """The invoice as if `stripe sync` had imported it: source stripe in the ledger, and in Stripe paid."""
    engine = create_engine(db_url)
    invoices, payments = schema.invoices.c, schema.payments.c
    async with engine.begin() as conn:
        await conn.execute(update(schema.invoices).where(invoices.id == invoice_id).values(source="stripe"))
        row = (await conn.execute(select(invoices.total, invoices.currency, invoices.customer_id).where(
            invoices.id == invoice_id))).one()  # fmt: skip
        paid = (await conn.execute(select(func.sum(payments.amount)).where(
            payments.invoice_id == invoice_id, payments.status == "succeeded"))).scalar_one()  # fmt: skip
    await engine.dispose()
    cents = int(row.total * 100)
    account.add("customer", id=row.customer_id)
    account.add(
        "invoice",
        id=invoice_id,
        customer=row.customer_id,
        currency=row.currency.lower(),
        status="paid",
        lines=[{"amount": cents}],
        amount_paid=min(cents, int(paid * 100)),
    )


async def test_stripe_failing_keeps_the_case_waiting_and_the_sweep_issues_one_stripe_note(
    seeded_db_url: str, stand_in: StripeStandIn
) -> None:
    sc = scenario("cancel_not_respected")  # 174.90 on one invoice
    await _from_stripe(seeded_db_url, sc["truth"]["invoice_ids"][0], stand_in.account)
    in_stripe = settings().model_copy(update={"billing_system": "stripe"})
    offline = Configuration(investigator="offline")
    stand_in.fail_next("credit_notes.create", 503, times=3)  # the first try and the SDK's two retries
    async with case_service(seeded_db_url, offline, in_stripe) as service:
        case = await open_and_approve(service, sc)
        assert (case["status"], case["credit_note"]["status"]) == ("awaiting_approval", "approved")
        assert case["escalation_reason"] is None
        assert stand_in.account.all("credit_note") == []
        assert (await service.sweep()).settled == [case["case_id"]]
        final = await service.show_case(case["case_id"])
    (created,) = stand_in.account.all("credit_note")
    assert final["status"] == "issued" and final["credit_note"]["stripe_credit_note_id"] == created["id"]
    assert created["id"] in final["reply"]["customer_message"]
    assert final["credit_note"]["stripe_url"] in final["reply"]["internal_note"]
    assert created["metadata"]["billsleuth_case"] == case["case_id"]
    assert len({call.idempotency_key for call in stand_in.calls("credit_notes.create")}) == 1
