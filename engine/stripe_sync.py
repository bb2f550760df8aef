"""`billsleuth stripe sync`: a Stripe account read with the official SDK and turned into one
`billsleuth-ledger/2` input (source "stripe", Stripe's ids), which `ledger import`'s own loader writes.

Every list is read with the SDK's auto-pagination (100 a page), and every call retries 429s, 5xx and
dropped connections as the SDK does (engine.stripe_api). The price book, customers and subscriptions are
read whole each time (everything else names them, and they are few); invoices (with their payments),
credit notes and refunds only from where the last sync stopped (`stripe_sync`: the newest `created` seen
of each), or from `--since` on a first run, plus any older one an event since the last sync says changed
(an invoice paid or voided, a credit note voided, a refund that failed). The same events read carry the
subscriptions' plan and seat changes going forward (`customer.subscription.updated`), the invoices read
their past changes (proration lines): engine.stripe_history turns both, with the subscription events the
ledger already holds, into change events and each create's configuration. What the ledger cannot hold is
skipped and counted (engine.stripe_map says which and why), and so is whatever names a skipped object.

The mapping is engine.stripe_map and engine.stripe_history (pure); this module only calls Stripe and
orders the records.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from engine import stripe_history as history
from engine import stripe_map as to
from engine.interchange import FORMAT_VERSION

if TYPE_CHECKING:
    import psycopg
    import stripe

SOURCE = "stripe"
PAGE = 100
# Kinds of Stripe object read incrementally: the cursor of each is the newest `created` seen.
INCREMENTAL = ("invoices", "credit_notes", "refunds", "events")
# Events that say an older invoice, credit note or refund changed.
CHANGE_EVENTS = {
    "invoice.updated": "invoices",
    "invoice.paid": "invoices",
    "invoice.voided": "invoices",
    "invoice.marked_uncollectible": "invoices",
    "invoice.payment_succeeded": "invoices",
    "credit_note.updated": "credit_notes",
    "credit_note.voided": "credit_notes",
    "refund.updated": "refunds",
    "charge.refund.updated": "refunds",
}


@dataclass
class Fetched:
    """One sync's records (the format line first), what was skipped, and where the next one starts."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    cursor: dict[str, int] = field(default_factory=dict)

    def jsonl(self) -> bytes:
        lines = [{"type": "format", "version": FORMAT_VERSION, "source": SOURCE}, *self.records]
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode()


def _plain(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def _all(listed: Any) -> Iterator[dict[str, Any]]:
    return (_plain(obj) for obj in listed.auto_paging_iter())


def _created(since: int | None) -> dict[str, Any]:
    """From the cursor on, itself included: an object created in the cursor's second after the last sync
    read it is not missed (one read again is a no-op)."""
    return {"created": {"gte": since}} if since is not None else {}


@dataclass
class Ledger:
    """What the ledger already holds that Stripe's new objects may name (so they are not skipped)."""

    invoices: dict[str, str] = field(default_factory=dict)  # id → customer
    payments: set[str] = field(default_factory=set)
    credit_notes: set[str] = field(default_factory=set)  # Stripe's and ours
    made_by_note: dict[str, str] = field(default_factory=dict)  # refund id → the credit note that made it
    subscription_events: dict[str, list[history.Held]] = field(default_factory=dict)  # by subscription


def fetch(
    client: stripe.StripeClient,
    cursor: Mapping[str, int],
    since: date | None,
    ledger: Ledger,
) -> Fetched:
    """Read the account (incrementally after the first run) and map it."""
    v1 = client.v1
    out = Fetched(cursor=dict(cursor))
    start = {kind: cursor.get(kind) for kind in INCREMENTAL}
    if since is not None:  # read again from that day (the price book, customers, subscriptions: whole)
        from_day = int(datetime(since.year, since.month, since.day, tzinfo=UTC).timestamp())
        start |= {kind: from_day for kind in ("invoices", "credit_notes", "refunds")}
    changed, updates = _changed_since(v1, start["events"], out) if start["events"] is not None else ({}, [])

    products = {p["id"]: p.get("name") for p in _all(v1.products.list({"limit": PAGE}))}
    prices = list(_prices(v1))
    plans = _mapped(out, "plan", (to.plan(p, products.get(p.get("product"))) for p in prices))
    out.records += [to.coupon(c) for c in _all(v1.coupons.list({"limit": PAGE}))]
    out.records += [to.tax_rate(r) for r in _all(v1.tax_rates.list({"limit": PAGE}))]
    invoices = _newest(out, "invoices", _invoices(v1, start["invoices"], changed.get("invoices", ())))
    countries = _customers(v1, out, invoices)
    # A subscription's discounts are ids unless expanded: the coupon and when it began are in the object.
    listed = list(_all(v1.subscriptions.list({"limit": PAGE, "status": "all", "expand": ["data.discounts"]})))
    holdable = _holdable(listed, countries, plans)
    unit_amounts = {p["id"]: p["unit_amount"] for p in prices if p["id"] in plans}
    found = _history(listed, holdable, updates, invoices, ledger, unit_amounts)
    subscriptions = _subscriptions(listed, out, holdable, plans, found.initial)
    out.records += found.events
    if found.skipped:
        out.skipped["subscription_event"] += found.skipped
    known_invoices = {i: countries.get(c) for i, c in ledger.invoices.items() if c in countries}
    payments = set(ledger.payments)
    for invoice in invoices:
        country = countries.get(to.ref_id(invoice["customer"]) or "")
        mapped = to.invoice(invoice, country, subscriptions) if country else None
        if mapped is None:
            out.skipped["invoice"] += 1
            continue
        out.records.append(mapped)
        known_invoices[invoice["id"]] = country
        paid = to.payments(invoice, country)
        out.records += paid
        payments |= {p["id"] for p in paid}
    notes = _newest(
        out, "credit_notes", _listed(v1.credit_notes, start["credit_notes"], changed, "credit_notes")
    )
    for note in notes:
        country = known_invoices.get(to.ref_id(note["invoice"]) or "")
        mapped = to.credit_note(note, country) if country else None
        if mapped is not None:
            out.records.append(mapped)
        elif to.ours(note) is None:
            out.skipped["credit_note"] += 1
    held_notes = ledger.credit_notes | {r["id"] for r in out.records if r["type"] == "credit_note"}
    made_by_note = {**ledger.made_by_note, **to.refunds_of_notes(notes)}
    for refund in _newest(out, "refunds", _listed(v1.refunds, start["refunds"], changed, "refunds")):
        payment = to.payment_id(refund.get("charge"), refund.get("payment_intent"))
        note = made_by_note.get(refund["id"])
        if payment not in payments or (note is not None and note not in held_notes):
            out.skipped["refund"] += 1
            continue
        out.records.append(to.refund(refund, note))
    # Events from the newest object read on: what changes after this sync is an event after it.
    out.cursor["events"] = max([*out.cursor.values(), *(o.get("created", 0) for o in invoices)], default=0)
    return out


def _prices(v1: Any) -> Iterator[dict[str, Any]]:
    return _all(v1.prices.list({"limit": PAGE}))


def _mapped(out: Fetched, kind: str, records: Iterable[dict[str, Any] | None]) -> set[str]:
    ids = set()
    for record in records:
        if record is None:
            out.skipped[kind] += 1
            continue
        out.records.append(record)
        ids.add(record["id"])
    return ids


def _newest(out: Fetched, kind: str, objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects, remembering the newest `created` among them as the kind's cursor."""
    listed = list(objects)
    newest = max((o["created"] for o in listed), default=None)
    if newest is not None:
        out.cursor[kind] = max(newest, out.cursor.get(kind, newest))
    return listed


def _changed_since(v1: Any, after: int, out: Fetched) -> tuple[dict[str, set[str]], list[dict[str, Any]]]:
    """The ids of older objects that events since the last sync say changed, by kind; and the
    subscriptions' updates since then (their plan and seat changes)."""
    changed: dict[str, set[str]] = {}
    updates = []
    params = {
        "limit": PAGE,
        "types": sorted([*CHANGE_EVENTS, history.SUBSCRIPTION_UPDATED]),
        **_created(after),
    }
    for event in _newest(out, "events", _all(v1.events.list(params))):
        kind = CHANGE_EVENTS.get(event["type"])
        obj = (event.get("data") or {}).get("object") or {}
        if kind is not None and obj.get("id"):
            changed.setdefault(kind, set()).add(obj["id"])
        elif event["type"] == history.SUBSCRIPTION_UPDATED:
            updates.append(event)
    return changed, updates


def _invoices(v1: Any, after: int | None, changed: Iterable[str]) -> Iterator[dict[str, Any]]:
    expand = {"expand": ["data.payments"]}
    seen = set()
    for invoice in _all(v1.invoices.list({"limit": PAGE, **expand, **_created(after)})):
        seen.add(invoice["id"])
        yield invoice
    for invoice_id in sorted(set(changed) - seen):
        yield from _still_there(partial(v1.invoices.retrieve, invoice_id, {"expand": ["payments"]}))


def _listed(service: Any, after: int | None, changed: Mapping[str, set[str]], kind: str) -> Iterator[Any]:
    seen = set()
    for obj in _all(service.list({"limit": PAGE, **_created(after)})):
        seen.add(obj["id"])
        yield obj
    for object_id in sorted(changed.get(kind, set()) - seen):
        yield from _still_there(partial(service.retrieve, object_id))


def _still_there(retrieve: Any) -> Iterator[dict[str, Any]]:
    """An object an event named, unless Stripe no longer has it (a deleted draft): nothing to write."""
    import stripe

    try:
        yield _plain(retrieve())
    except stripe.InvalidRequestError as error:
        if error.code != "resource_missing":
            raise


def _customers(v1: Any, out: Fetched, invoices: list[dict[str, Any]]) -> dict[str, str]:
    """Customer id → country, for those the ledger can hold (a customer without a currency yet takes
    its first invoice's)."""
    currency_of = {to.ref_id(i["customer"]): i["currency"] for i in reversed(invoices)}
    countries = {}
    for customer in _all(v1.customers.list({"limit": PAGE})):
        record = to.customer(customer, currency_of.get(customer["id"]))
        if record is None:
            out.skipped["customer"] += 1
            continue
        out.records.append(record)
        countries[record["id"]] = record["country"]
    return countries


def _holdable(listed: list[dict[str, Any]], countries: Mapping[str, str], plans: set[str]) -> dict[str, str]:
    """Subscription id → its customer's country, for the subscriptions the ledger can hold."""
    holdable = {}
    for subscription in listed:
        country = countries.get(to.ref_id(subscription["customer"]) or "")
        if country and to.holds_subscription(subscription, plans):
            holdable[subscription["id"]] = country
    return holdable


def _history(
    listed: list[dict[str, Any]],
    holdable: Mapping[str, str],
    updates: list[dict[str, Any]],
    invoices: list[dict[str, Any]],
    ledger: Ledger,
    unit_amounts: Mapping[str, int],
) -> history.History:
    """The plan and seat changes the events and the invoices' proration lines name."""
    items = {s["id"]: [item["id"] for item in to.subscription_items(s)] for s in listed}
    changes = [change for event in updates if (change := history.from_event(event)) is not None]
    billed = (invoice for invoice in invoices if invoice.get("status") != "draft")  # lines may still change
    changes += [change for invoice in billed for change in history.from_invoice(invoice, items)]
    return history.history(changes, ledger.subscription_events, holdable, unit_amounts)


def _subscriptions(
    listed: list[dict[str, Any]],
    out: Fetched,
    holdable: Mapping[str, str],
    plans: set[str],
    initial: Mapping[str, tuple[str, int]],
) -> set[str]:
    for subscription in listed:
        country = holdable.get(subscription["id"])
        if country is None:
            out.skipped["subscription"] += 1
            continue
        out.records += to.subscription(subscription, country, plans, initial.get(subscription["id"])) or []
    return set(holdable)


# ---- the cursor and what the ledger holds ----


async def read_state(conn: psycopg.AsyncConnection[Any]) -> tuple[dict[str, int], Ledger]:
    async def rows(query: str) -> list[tuple[Any, ...]]:
        return await (await conn.execute(query, {"source": SOURCE})).fetchall()  # type: ignore[arg-type]

    cursor = {row[0]: row[1] for row in await rows("SELECT object, synced_to FROM stripe_sync")}
    ledger = Ledger(
        invoices={
            r[0]: r[1] for r in await rows("SELECT id, customer_id FROM invoices WHERE source = %(source)s")
        },
        payments={r[0] for r in await rows("SELECT id FROM payments WHERE source = %(source)s")},
        credit_notes={r[0] for r in await rows("SELECT id FROM credit_notes")},
        made_by_note={
            r[0]: r[1]
            for r in await rows("SELECT id, credit_note_id FROM refunds WHERE credit_note_id IS NOT NULL")
        },
    )
    events = (
        "SELECT subscription_id, id, type, effective_at, payload FROM subscription_events "
        "WHERE source = %(source)s"
    )
    for subscription_id, event_id, event_type, effective_at, payload in await rows(events):
        held = history.Held(event_id, event_type, int(effective_at.timestamp()), payload)
        ledger.subscription_events.setdefault(subscription_id, []).append(held)
    return cursor, ledger


async def write_cursor(conn: psycopg.AsyncConnection[Any], cursor: Mapping[str, int]) -> None:
    for kind, created in cursor.items():
        await conn.execute(
            "INSERT INTO stripe_sync (object, synced_to) VALUES (%s, %s) ON CONFLICT (object) DO UPDATE "
            "SET synced_to = GREATEST(stripe_sync.synced_to, EXCLUDED.synced_to), at = now()",
            (kind, created),
        )
