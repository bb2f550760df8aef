"""The fault kinds as a Stripe account: one customer per kind that has a meaning on Stripe, plus one whose
bill is right, each with its complaint and its ground truth in Stripe's ids.

Each customer is drawn as the dataset's are (scenarios.generator: the correct ledger from the reference
engine, one fault injected, the invoices paid, a complaint), then said as Stripe's objects
(scenarios.stripe_account). `billsleuth eval` scores one Stripe-sourced row per kind on it: the objects
go through engine.stripe_sync's own mapping, read from memory (OfflineStripe: no HTTP), and are imported
with source "stripe" like a sync's.

BillSleuth is taken to have been connected to the account before the first plan or seat change
(`connected_at`): a sync then, and one now. It has to be: Stripe tells a change in two places only, a
`customer.subscription.updated` event (kept 30 days, read by the sync going forward) and the proration
pair on the next invoice, and three kinds break exactly that pair (proration_missing_credit drops the
credit, quantity_change_ignored both lines), so an account first read long after the change cannot tell
them from a subscription that always had its current plan and seats.

Two kinds have no meaning on Stripe, and are left out:
- timezone_change_date: the fault dates a plan change by its UTC day instead of the customer's; Stripe
  dates nothing by day, it prorates between instants, so there is no day to get wrong;
- expired_tax_rate: a Stripe tax rate has no validity window (one is archived and another made), so "a rate
  applied after it expired" is not something an invoice can say. For the same reason the customers are in
  CN, SG and DE, whose rates did not change while these subscriptions ran (the US rate did).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import date
from types import SimpleNamespace
from typing import Any

from approvals.stripe_ledger import sync_stripe
from engine.db import create_engine
from engine.profiles import STRIPE
from scenarios.faults import INJECTORS, ScenarioLedger, Truth
from scenarios.generator import AS_OF, DEFAULT_SEED, benign_truth, complaint, correct_ledger
from scenarios.stripe_account import StripeAccount, render

STRIPE_KINDS: tuple[str, ...] = (
    "duplicate_invoice",
    "duplicate_charge",
    "cancel_not_respected",
    "wrong_plan_price",
    "coupon_not_applied",
    "wrong_tax_region",
    "quantity_change_ignored",
    "proration_missing_credit",
    "proration_wrong_days",
    "coupon_wrong_base",
)
NOT_IN_STRIPE: dict[str, str] = {
    "timezone_change_date": "Stripe prorates between instants: no local day to get wrong",
    "expired_tax_rate": "a Stripe tax rate has no validity window",
}
NO_ERROR = "no_error"
COUNTRIES = ["CN", "SG", "DE"]
# Another region's rate must cost more than the customer's own: DE's 19 % is the dearest.
COUNTRIES_FOR = {"wrong_tax_region": ["CN", "SG"]}
FIRST_INDEX = 901  # customers' names end in -901 on: apart from the dataset's


@dataclass(frozen=True)
class StripeScenario:
    id: str  # ST01 …
    kind: str  # the fault injected, or no_error
    customer_id: str  # Stripe's (cus_…)
    question: str
    truth: Truth  # invoice ids in Stripe's


@dataclass(frozen=True)
class StripeDataset:
    account: StripeAccount
    scenarios: list[StripeScenario]
    # When BillSleuth was connected: its first sync read the account as it stood then (account.as_of),
    # just before the first plan or seat change, so every change came to it going forward.
    connected_at: int


def _connected_at(account: StripeAccount) -> int:
    changes = [
        e["created"] for e in account.objects["event"] if e["data"]["previous_attributes"].get("items")
    ]
    return min(changes, default=max(o["created"] for o in account.objects["invoice"])) - 1


def _drawn(seed: int, index: int, kind: str) -> tuple[ScenarioLedger, Truth, str]:
    rng = random.Random(f"stripe:{seed}:{index}:{kind}")
    countries = COUNTRIES_FOR.get(kind, COUNTRIES)
    ledger = correct_ledger(rng, index, kind if kind != NO_ERROR else "tax_line", countries, STRIPE)
    truth = INJECTORS[kind](ledger) if kind != NO_ERROR else benign_truth("tax_line", ledger)
    ledger.pay_all()
    return ledger, truth, complaint(kind, truth, ledger, rng)


def stripe_dataset(seed: int = DEFAULT_SEED, as_of: date = AS_OF) -> StripeDataset:
    """The account and its scenarios: the kinds in STRIPE_KINDS' order, then the no-error customer."""
    kinds = [*STRIPE_KINDS, NO_ERROR]
    drawn = [_drawn(seed, FIRST_INDEX + n, kind) for n, kind in enumerate(kinds)]
    account = render([ledger for ledger, _, _ in drawn], as_of)
    scenarios = []
    for n, (kind, (ledger, truth, question)) in enumerate(zip(kinds, drawn, strict=True), start=1):
        in_stripe = replace(truth, invoice_ids=[account.ids[i] for i in truth.invoice_ids], other_findings=())
        customer_id = account.ids[ledger.customer.id]
        scenarios.append(StripeScenario(f"ST{n:02d}", kind, customer_id, question, in_stripe))
    return StripeDataset(account, scenarios, _connected_at(account))


# ---- the account read from memory, as engine.stripe_sync reads Stripe ----

COLLECTIONS = {
    "products": "product",
    "prices": "price",
    "coupons": "coupon",
    "tax_rates": "tax_rate",
    "customers": "customer",
    "subscriptions": "subscription",
    "invoices": "invoice",
    "credit_notes": "credit_note",
    "refunds": "refund",
    "events": "event",
}


class _Listed:
    def __init__(self, objects: Iterable[dict[str, Any]]) -> None:
        self.objects = list(objects)

    def auto_paging_iter(self) -> Iterator[dict[str, Any]]:
        return iter(self.objects)


class _Service:
    """One collection's list and retrieve, as the SDK's (newest first; `created` and `types` filters)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def list(self, params: dict[str, Any] | None = None) -> _Listed:
        params = params or {}
        since = (params.get("created") or {}).get("gte")
        types = params.get("types")
        chosen = [
            obj
            for obj in self.objects
            if (since is None or obj.get("created", 0) >= since)
            and (types is None or obj.get("type") in types)
        ]
        return _Listed(sorted(chosen, key=lambda obj: obj.get("created", 0), reverse=True))

    def retrieve(self, object_id: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return next(obj for obj in self.objects if obj["id"] == object_id)


class OfflineStripe:
    """A stand-in for stripe.StripeClient over an account held in memory: what engine.stripe_sync.fetch
    calls (`client.v1.<collection>.list(…).auto_paging_iter()`, `.retrieve(id)`), nothing more."""

    def __init__(self, account: StripeAccount) -> None:
        self.v1 = SimpleNamespace(
            **{name: _Service(account.objects.get(resource, [])) for name, resource in COLLECTIONS.items()}
        )


async def import_dataset(libpq_url: str, dataset: StripeDataset, actor: str) -> None:
    """Write the account into the ledger at this URL as `billsleuth stripe sync` would (the same mapping,
    loader and checks, source "stripe"), read from memory instead of over HTTP: synced once when
    BillSleuth was connected, and once more now."""
    engine = create_engine(libpq_url)
    try:
        for account in (dataset.account.as_of(dataset.connected_at), dataset.account):
            await sync_stripe(engine, OfflineStripe(account), actor=actor)  # type: ignore[arg-type]
    finally:
        await engine.dispose()
