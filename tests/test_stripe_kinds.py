"""Issue 29's Done-when, end to end: a Stripe account holding one customer per fault kind that has a meaning
on Stripe and one whose bill is right (scenarios.stripe_kinds), served by the Stripe stand-in, syncs with
`billsleuth stripe sync`, and `audit --all` finds exactly the injected overcharges; a re-sync changes
nothing. (The refused preview and the tampered webhook are tests/test_stripe_issuing.py's and
tests/test_stripe_webhook.py's.)"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scenarios.stripe_kinds import NO_ERROR, STRIPE_KINDS, StripeDataset, stripe_dataset
from tests.stripe_stand_in import retry_without_waiting
from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.server import API_KEY, StripeStandIn
from tests.test_ledger_import import audit_findings
from tests.test_stripe_sync import _sync

DATASET = stripe_dataset()
STRIPE_ID = re.compile(r"^(cus|in|sub|si|pi|inpay|il|di|evt|price|prod|txr)_[0-9A-Za-z]{14,24}$")


def injected(dataset: StripeDataset) -> list[tuple[str, str, str, str]]:
    return sorted(
        (s.customer_id, s.truth.invoice_ids[0], s.truth.root_cause, f"{s.truth.overcharge:.2f}")
        for s in dataset.scenarios
        if s.kind != NO_ERROR
    )


def test_the_account_speaks_stripe_ids_only() -> None:
    """Every id is shaped as Stripe's; nothing of the seed's (C-0001, INV-0001-05, SUB-, PAY-, EV-) leaks."""
    said = json.dumps(DATASET.account.objects, ensure_ascii=False)
    assert not re.search(r"\b(C|INV|SUB|PAY|EV)-\d{4}", said)
    for resource, objects in DATASET.account.objects.items():
        for obj in objects:
            assert STRIPE_ID.match(obj["id"]) or resource == "coupon", obj["id"]
    assert [s.kind for s in DATASET.scenarios] == [*STRIPE_KINDS, NO_ERROR]


@pytest.fixture
async def stand_in(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[StripeStandIn]:
    retry_without_waiting(monkeypatch)
    account = StripeAccount()
    described = DATASET.account.description()
    # The stand-in takes an invoice's lines as a plain list and makes Stripe's list object of them.
    described["invoice"] = [inv | {"lines": inv["lines"]["data"]} for inv in described["invoice"]]
    account.load(described)
    async with StripeStandIn(account) as server:
        monkeypatch.setenv("STRIPE_API_KEY", API_KEY)
        monkeypatch.setenv("BILLSLEUTH_STRIPE_API_BASE", server.url)
        yield server


async def test_the_account_syncs_and_audit_finds_exactly_the_injected_overcharges(
    db_url: str, stand_in: StripeStandIn
) -> None:
    first: dict[str, Any] = await asyncio.to_thread(_sync)
    assert first["skipped"] == {}
    assert first["counts"]["customer"]["added"] == len(DATASET.scenarios)
    assert audit_findings(db_url) == injected(DATASET)
    again: dict[str, Any] = await asyncio.to_thread(_sync)
    assert all(c["added"] == c["changed"] == 0 for c in again["counts"].values()), again["counts"]
