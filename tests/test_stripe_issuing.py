"""Issuing an approved note in Stripe (BILLSLEUTH_BILLING_SYSTEM=stripe) against the Stripe stand-in, with
the official SDK as the client: preview first, then exactly one credit note, whatever fails or crashes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals import IssueRefused, Rule, get_credit_note, issue
from approvals import issuing as issuing_module
from approvals.stripe_issuing import STRIPE_FAILED, credit_note_params, idempotency_key, in_minor_units
from engine import schema as t
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_approvals import ALICE, FULL, SETTINGS, activity, add_ledger, approve, draft

IN_STRIPE = SETTINGS.model_copy(update={"billing_system": "stripe"})
CUSTOMER = "C-0001"


def _stripe_account(*, currency: str = "usd", total: int = 17490) -> StripeAccount:
    """The tiny ledger's first invoice as Stripe holds it: 174.90 paid on a Pro line."""
    account = StripeAccount()
    account.load(
        {
            "customer": [{"id": CUSTOMER, "name": "Acme"}],
            "invoice": [
                {
                    "id": FULL,
                    "customer": CUSTOMER,
                    "status": "paid",
                    "currency": currency,
                    "lines": [{"id": "il_pro", "amount": total, "description": "Pro"}],
                }
            ],
        }
    )
    return account


@pytest.fixture
async def stripe_ledger(db: AsyncEngine) -> AsyncEngine:
    """The tiny ledger, its first invoice imported from Stripe (so its id is Stripe's)."""
    await add_ledger(db)
    async with db.begin() as conn:
        await conn.execute(update(t.invoices).where(t.invoices.c.id == FULL).values(source="stripe"))
    return db


@pytest.fixture
async def stand_in(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[StripeStandIn]:
    retry_without_waiting(monkeypatch)
    async with StripeStandIn(_stripe_account()) as server:
        monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", server.url)
        yield server


async def _approved(db: AsyncEngine) -> str:
    note_id = await draft(db, FULL, "174.90")
    await approve(db, note_id, ALICE)
    return note_id


def _stripe_notes(stand_in: StripeStandIn) -> list[dict[str, Any]]:
    return stand_in.account.all("credit_note")


async def test_an_approved_note_is_previewed_then_created_once_in_stripe(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    method, parameter = "customer_balance", "credit_amount"
    note_id = await _approved(stripe_ledger)
    outcome = await issue(stripe_ledger, note_id, IN_STRIPE.model_copy(update={"credit_method": method}))
    (created,) = _stripe_notes(stand_in)
    assert outcome.changed and created["id"] in outcome.message
    calls = [call.operation_id for call in stand_in.requests]
    assert calls == ["credit_notes.list", "invoices.retrieve", "credit_notes.preview", "credit_notes.create"]
    (create,) = stand_in.calls("credit_notes.create")
    note = await get_credit_note(stripe_ledger, note_id)
    assert create.params == {
        "invoice": FULL,
        "amount": "17490",
        parameter: "17490",  # the customer paid it all: all of it goes back the policy's way
        "reason": "order_change",  # cancel_not_respected
        "memo": note.memo,
        "metadata": {"billsleuth_credit_note": note_id, "billsleuth_case": "case-1"},
    }
    assert create.idempotency_key == f"billsleuth-credit-note-{note_id}-{note.args_hash[:32]}"
    assert stand_in.calls("credit_notes.preview")[0].params == create.params
    assert (note.status, note.stripe_credit_note_id, note.stripe_error) == ("issued", created["id"], None)
    assert note.summary()["stripe_url"] == f"https://dashboard.stripe.com/test/credit_notes/{created['id']}"
    issued_row = (await activity(stripe_ledger))[-1]
    assert issued_row.action == "credit_note.issued"
    assert issued_row.details["stripe_credit_note_id"] == created["id"]
    assert issued_row.details["credit_method"] == method
    again = await issue(stripe_ledger, note_id, IN_STRIPE)
    assert not again.changed and len(stand_in.requests) == 4  # issued already: Stripe is not asked again


@pytest.mark.parametrize(
    ("method", "paid", "credited", "expected"),
    [
        ("refund", 17490, 0, {"refund_amount": 17490}),
        ("customer_balance", 17490, 0, {"credit_amount": 17490}),
        ("out_of_band", 17490, 0, {"out_of_band_amount": 17490}),
        # Stripe counts 10000 of the payment credited already: only the rest goes back, and the remainder
        # of the note lowers what is still due
        ("refund", 17490, 10000, {"refund_amount": 7490}),
        ("refund", 0, 0, {}),  # nothing paid: the note only lowers what is due
    ],
)
def test_the_paid_part_goes_back_the_way_the_policy_says(
    method: str, paid: int, credited: int, expected: dict[str, int]
) -> None:
    note = SimpleNamespace(
        id="CN-0001",
        invoice_id=FULL,
        amount=Decimal("174.90"),
        currency="USD",
        reason="duplicate",
        memo="",
        case_id=None,
    )
    invoice = SimpleNamespace(amount_paid=paid, post_payment_credit_notes_amount=credited)
    params = credit_note_params(note, invoice, method)  # type: ignore[arg-type]
    metadata = {"billsleuth_credit_note": "CN-0001"}
    base = {"invoice": FULL, "amount": 17490, "reason": "duplicate", "metadata": metadata}
    assert params == {**base, **expected}


def test_amounts_go_to_stripe_in_minor_units() -> None:
    assert (in_minor_units(Decimal("174.90"), "USD"), in_minor_units(Decimal("12000"), "JPY")) == (
        17490,
        12000,
    )
    with pytest.raises(ValueError):
        in_minor_units(Decimal("0.001"), "USD")


async def test_stripe_failing_leaves_the_note_approved_and_the_retry_sends_the_same_key(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    note_id = await _approved(stripe_ledger)
    stand_in.fail_next("credit_notes.create", 500, times=3)  # the first try and both of the SDK's retries
    with pytest.raises(IssueRefused) as refused:
        await issue(stripe_ledger, note_id, IN_STRIPE)
    assert refused.value.rule == Rule.STRIPE_UNAVAILABLE
    assert "APIError (HTTP 500)" in refused.value.message
    waiting = await get_credit_note(stripe_ledger, note_id)
    assert (waiting.status, waiting.stripe_error) == ("approved", refused.value.message)
    async with stripe_ledger.connect() as conn:  # the bot is told to redraw the card, which shows the error
        changes = (await conn.execute(select(t.outbox.c.change).where(t.outbox.c.entity_id == note_id))).all()
    assert (STRIPE_FAILED,) in changes
    assert _stripe_notes(stand_in) == []
    outcome = await issue(stripe_ledger, note_id, IN_STRIPE)
    (created,) = _stripe_notes(stand_in)
    assert outcome.changed
    keys = {call.idempotency_key for call in stand_in.calls("credit_notes.create")}
    assert keys == {idempotency_key(await _row(stripe_ledger, note_id))}
    issued = await get_credit_note(stripe_ledger, note_id)
    assert (issued.status, issued.stripe_credit_note_id, issued.stripe_error) == (
        "issued",
        created["id"],
        None,
    )


async def test_a_create_whose_answer_was_lost_is_answered_again_by_its_key(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    """Stripe created the note and the connection dropped before its answer: the SDK's retry carries the
    same key and Stripe hands back the same credit note, creating nothing."""
    note_id = await _approved(stripe_ledger)
    stand_in.drop_after("credit_notes.create")
    await issue(stripe_ledger, note_id, IN_STRIPE)
    (created,) = _stripe_notes(stand_in)
    creates = stand_in.calls("credit_notes.create")
    assert len(creates) == 2 and creates[0].idempotency_key == creates[1].idempotency_key
    assert (await get_credit_note(stripe_ledger, note_id)).stripe_credit_note_id == created["id"]


async def test_a_note_stripe_made_before_a_crash_is_found_again_not_made_twice(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stripe made the credit note, then the process died before the note committed as issued (here: the
    activity row fails). The next try finds Stripe's note by its metadata and adopts it."""
    note_id = await _approved(stripe_ledger)
    real_record = issuing_module.activity.record

    async def crash(*args: Any, **kwargs: Any) -> None:
        raise ConnectionResetError("the process died here")

    monkeypatch.setattr(issuing_module.activity, "record", crash)
    with pytest.raises(ConnectionResetError):
        await issue(stripe_ledger, note_id, IN_STRIPE)
    monkeypatch.setattr(issuing_module.activity, "record", real_record)
    assert (await get_credit_note(stripe_ledger, note_id)).status == "approved"
    (made,) = _stripe_notes(stand_in)
    await issue(stripe_ledger, note_id, IN_STRIPE)
    assert _stripe_notes(stand_in) == [made] and len(stand_in.calls("credit_notes.create")) == 1
    assert (await get_credit_note(stripe_ledger, note_id)).stripe_credit_note_id == made["id"]
    assert (await activity(stripe_ledger))[-1].details["found_in_stripe"] is True


async def test_a_preview_that_differs_refuses_and_creates_nothing(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    note_id = await _approved(stripe_ledger)
    stand_in.account.get("invoice", FULL)["currency"] = "eur"  # type: ignore[index]
    with pytest.raises(IssueRefused) as refused:
        await issue(stripe_ledger, note_id, IN_STRIPE)
    assert refused.value.rule == Rule.STRIPE_PREVIEW_DIFFERS
    assert "€174.90" in refused.value.message or "174.90 EUR" in refused.value.message
    assert stand_in.calls("credit_notes.create") == []
    stand_in.account.get("invoice", FULL).update(currency="usd", total=10000)  # type: ignore[union-attr]
    with pytest.raises(IssueRefused) as refused:  # Stripe itself refuses to credit more than the invoice
        await issue(stripe_ledger, note_id, IN_STRIPE)
    assert refused.value.rule == Rule.STRIPE_PREVIEW_DIFFERS and "Stripe refuses" in refused.value.message
    assert (await get_credit_note(stripe_ledger, note_id)).status == "approved"
    assert _stripe_notes(stand_in) == []


async def test_only_a_stripe_invoice_can_be_credited_in_stripe(
    db: AsyncEngine, stand_in: StripeStandIn
) -> None:
    await add_ledger(db)  # the tiny ledger as seeded: no invoice came from Stripe
    note_id = await _approved(db)
    with pytest.raises(IssueRefused) as refused:
        await issue(db, note_id, IN_STRIPE)
    assert refused.value.rule == Rule.NOT_A_STRIPE_INVOICE
    assert stand_in.requests == []


async def test_a_voided_stripe_note_for_this_note_stops_issuing(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    note_id = await _approved(stripe_ledger)
    stand_in.account.add(
        "credit_note",
        invoice=FULL,
        status="void",
        metadata={"billsleuth_credit_note": note_id},
        livemode=False,
    )
    with pytest.raises(IssueRefused) as refused:
        await issue(stripe_ledger, note_id, IN_STRIPE)
    assert refused.value.rule == Rule.STRIPE_NOTE_VOIDED
    assert stand_in.calls("credit_notes.create") == []


async def test_the_ledger_billing_system_never_calls_stripe(
    stripe_ledger: AsyncEngine, stand_in: StripeStandIn
) -> None:
    note_id = await _approved(stripe_ledger)
    await issue(stripe_ledger, note_id, SETTINGS)
    note = await get_credit_note(stripe_ledger, note_id)
    assert (note.status, note.stripe_credit_note_id, stand_in.requests) == ("issued", None, [])
    assert "stripe_credit_note_id" not in note.summary()


async def _row(db: AsyncEngine, note_id: str) -> Any:
    from approvals.queries import note_row_in

    async with db.connect() as conn:
        return await note_row_in(conn, note_id)
