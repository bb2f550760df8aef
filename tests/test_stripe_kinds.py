"""Issue 29's Done-when, end to end: a Stripe account holding one customer per fault kind that has a meaning
on Stripe and one whose bill is right (scenarios.stripe_kinds), served by the Stripe stand-in, syncs with
`billsleuth stripe sync`; `audit --all` finds exactly the injected overcharges; a re-sync changes nothing;
a Slack mention about an overcharged customer gets the evidence card, and two finance approvals in Slack
create exactly one Stripe credit note (right invoice, amount, reason, refund, idempotency key), whose
create, retried after its answer was lost, sends the same key and makes nothing new. (A refused preview and
a tampered webhook are tests/test_stripe_issuing.py's and tests/test_stripe_webhook.py's.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from approvals import get_credit_note
from approvals.config import ApprovalSettings
from approvals.queries import note_row_in
from approvals.stripe_issuing import idempotency_key
from bot.cards import APPROVE_ACTION_ID
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from scenarios.stripe_kinds import NO_ERROR, STRIPE_KINDS, StripeDataset, StripeScenario, stripe_dataset
from scenarios.stripe_price_book import StripeAccount as StripeObjects
from tests.bot.helpers import CHANNEL, FINANCE, SECRET, all_text, bot_replies, buttons, mention, offline_bot
from tests.cli import billsleuth_async
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_stripe_sync import _sync

DATASET = stripe_dataset()
STRIPE_ID = re.compile(r"^(cus|in|sub|si|pi|inpay|il|di|evt|price|prod|txr)_[0-9A-Za-z]{14,24}$")
TWO_APPROVALS = Decimal("300.00")
POLICY = ApprovalSettings(
    approvers=frozenset(FINANCE),
    two_person_threshold=TWO_APPROVALS,
    billing_system="stripe",
    credit_method="refund",
)


def injected(dataset: StripeDataset) -> list[tuple[str, str, str, str]]:
    return sorted(
        (s.customer_id, s.truth.invoice_ids[0], s.truth.root_cause, f"{s.truth.overcharge:.2f}")
        for s in dataset.scenarios
        if s.kind != NO_ERROR
    )


async def audit_findings(url: str) -> list[tuple[str, str, str, str]]:
    """`billsleuth audit --all --json`, in this process (tests/cli.py)."""
    done = await billsleuth_async("audit", "--all", "--json", env={**os.environ, "DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["findings"]
    return sorted((f["customer_id"], f["invoice_id"], f["root_cause"], f["overcharge"]) for f in found)


def test_the_account_speaks_stripe_ids_only() -> None:
    """Every id is shaped as Stripe's; nothing of the seed's (C-0001, INV-0001-05, SUB-, PAY-, EV-) leaks."""
    said = json.dumps(DATASET.account.objects, ensure_ascii=False)
    assert not re.search(r"\b(C|INV|SUB|PAY|EV)-\d{4}", said)
    for resource, objects in DATASET.account.objects.items():
        for obj in objects:
            assert STRIPE_ID.match(obj["id"]) or resource == "coupon", obj["id"]
    assert [s.kind for s in DATASET.scenarios] == [*STRIPE_KINDS, NO_ERROR]


def load(stand_in: StripeAccount, account: StripeObjects) -> None:
    """Put the account's objects in the stand-in (those it holds already are replaced by theirs)."""
    described = account.description()
    # The stand-in takes an invoice's lines as a plain list and makes Stripe's list object of them.
    described["invoice"] = [inv | {"lines": inv["lines"]["data"]} for inv in described.get("invoice", [])]
    stand_in.load(described)


@pytest.fixture
async def stand_in(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[StripeStandIn]:
    """Stripe as it was when BillSleuth was connected (before the first plan or seat change)."""
    retry_without_waiting(monkeypatch)
    account = StripeAccount()
    load(account, DATASET.account.as_of(DATASET.connected_at))
    async with StripeStandIn(account) as server:
        monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", server.url)
        yield server


def _needing_two_approvals() -> StripeScenario:
    return next(s for s in DATASET.scenarios if s.truth.overcharge >= TWO_APPROVALS)


async def test_the_account_syncs_audits_and_two_slack_approvals_make_one_stripe_credit_note(
    db_url: str, stand_in: StripeStandIn
) -> None:
    connected: dict[str, Any] = await asyncio.to_thread(_sync)
    assert connected["skipped"] == {} and connected["counts"]["invoice"]["added"] > 0
    load(stand_in.account, DATASET.account)  # months later: the changes came as events, then invoices
    first: dict[str, Any] = await asyncio.to_thread(_sync)
    assert first["skipped"] == {}
    assert first["counts"]["subscription_event"]["added"] >= len(DATASET.account.objects["event"])
    assert await audit_findings(db_url) == injected(DATASET)
    again: dict[str, Any] = await asyncio.to_thread(_sync)
    assert all(c["added"] == c["changed"] == 0 for c in again["counts"].values()), again["counts"]

    sc = _needing_two_approvals()
    invoice_id, cents = sc.truth.invoice_ids[0], int(sc.truth.overcharge * 100)
    async with (
        SlackRecorder() as slack,
        offline_bot(db_url, slack, policy=POLICY) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        event = mention(slack, f"{sc.customer_id} {sc.question}")
        assert (await client.send(event)).status == 200
        await bot.settled()
        (card,) = bot_replies(slack, CHANNEL, event["event"]["ts"])
        shown = all_text(card.blocks)
        assert invoice_id in shown and f"{sc.truth.overcharge:.2f}" in shown and "Approve" in buttons(card)
        # Stripe creates the note but its answer is lost: the SDK's retry carries the same key.
        stand_in.drop_after("credit_notes.create")
        for approver in FINANCE[:2]:
            click = p.click(card.to_slack(), user=approver, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
            assert (await client.send(click)).status == 200
            await bot.settled()
            assert (stand_in.account.all("credit_note") == []) == (approver == FINANCE[0])
        engine = bot.runtime.engine
        async with engine.connect() as conn:
            note_id = (
                await conn.execute(
                    select(schema.credit_notes.c.id).where(schema.credit_notes.c.invoice_id == invoice_id)
                )
            ).scalar_one()
            row = await note_row_in(conn, note_id)
        note = await get_credit_note(engine, note_id)
    (created,) = stand_in.account.all("credit_note")
    assert (note.status, note.stripe_credit_note_id) == ("issued", created["id"])
    creates = stand_in.calls("credit_notes.create")
    assert [c.idempotency_key for c in creates] == [idempotency_key(row)] * 2
    assert {k: creates[0].params[k] for k in ("invoice", "amount", "reason", "refund_amount")} == {
        "invoice": invoice_id,
        "amount": str(cents),
        "reason": "duplicate" if "duplicate" in sc.kind else "order_change",
        "refund_amount": str(cents),
    }
    assert created["metadata"]["billsleuth_credit_note"] == note_id
