"""A Stripe subscription's plan and seat changes as the billing rules read them, and the configuration it
was created with: pure functions, no SDK, no database (engine.stripe_sync reads Stripe and the ledger).

What the rules bill is the subscription's first item (its plan and seats, engine.stripe_map), so a change
is a change of the first item's price or quantity. Two sources name one:
- going forward, a `customer.subscription.updated` event whose `data.previous_attributes.items` (Stripe
  sends the whole previous list when any item changed) shows the first item's price or quantity as it
  was. It is effective at the event's `created`: Stripe's subscription carries no proration date, and the
  proration lines of the same change start at the update request's instant, normally the same second.
  Its id is `<Stripe event id>:change`.
- for the past, a subscription invoice's proration lines on the first item: the positive ("Remaining time
  on …") line is the new price and quantity and its period start the change instant; the negative
  ("Unused time on …") line starting at the same instant is the old. Its id is `<positive line id>:change`.
A new price is an `upgrade` when the new per-period amount (unit amount × quantity) is higher, else a
`downgrade`, both with `to_plan` and `to_quantity`; a new quantity alone is a `quantity_change` with
`to_quantity`. A change to or from a price the ledger does not hold as a plan is skipped.

One change, one event: sightings with the same subscription, instant (to the second), event type and new
configuration are one change. The ledger's own event wins (whatever its id), then the Stripe event's over
the lines', so a re-sync, or a later sync that sees the other source, writes nothing new for it.

The `create` event carries the configuration before the first change: the old side of the earliest change
this sync saw, unless the ledger already holds a change at or before it (then the ledger's create stays as
it is); with no change known, the ledger's create, else the current configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import stripe_map as to
from engine.billing import CONFIG_CHANGES

SUBSCRIPTION_UPDATED = "customer.subscription.updated"
CHANGE = ":change"  # the suffix of a change's event id, after the Stripe event's or the line's id
Config = tuple[str, int]  # (price id, quantity) of the first item


@dataclass(frozen=True)
class Change:
    id: str
    subscription_id: str
    at: int  # unix seconds
    old: Config
    new: Config
    from_event: bool


@dataclass(frozen=True)
class Held:
    """A subscription event the ledger already holds."""

    id: str
    event_type: str
    at: int
    payload: Mapping[str, Any]


@dataclass
class History:
    events: list[dict[str, Any]] = field(default_factory=list)
    initial: dict[str, Config] = field(default_factory=dict)  # subscription id → its create's configuration
    skipped: int = 0


def _config(item: to.Obj | None) -> Config | None:
    if not isinstance(item, Mapping):
        return None
    price = to.ref_id(item.get("price"))
    return (price, max(item.get("quantity") or 1, 1)) if price else None


def first_item(s: to.Obj) -> to.Obj | None:
    items = to.subscription_items(s)
    return items[0] if items else None


def from_event(event: to.Obj) -> Change | None:
    """The change a `customer.subscription.updated` event shows of the first item, if it shows one."""
    data = event.get("data") or {}
    subscription = data.get("object") or {}
    before = ((data.get("previous_attributes") or {}).get("items") or {}).get("data")
    if event.get("type") != SUBSCRIPTION_UPDATED or not before:
        return None
    old, new = _config(before[0]), _config(first_item(subscription))
    if old is None or new is None or old == new:
        return None  # a renewal moves the items' periods: the items change, the configuration does not
    return Change(event["id"] + CHANGE, subscription["id"], event["created"], old, new, from_event=True)


def _item_proration(line: to.Obj) -> str | None:
    """The subscription item a proration line is on; None for any other line."""
    details = (line.get("parent") or {}).get("subscription_item_details") or {}
    return details.get("subscription_item") if details.get("proration") else None


def _line_config(line: to.Obj) -> Config | None:
    price = to.ref_id(((line.get("pricing") or {}).get("price_details") or {}).get("price"))
    return (price, max(line.get("quantity") or 1, 1)) if price else None


def from_invoice(inv: to.Obj, items: Mapping[str, Sequence[str]]) -> list[Change]:
    """The changes an invoice's proration pairs name; items: subscription id → its items' ids, first
    first (a credit line on another current item is that item's own change, not the first item's)."""
    subscription_id = to.invoice_subscription(inv)
    if subscription_id not in items or not items[subscription_id]:
        return []
    first, *others = items[subscription_id]
    lines = [line for line in (inv.get("lines") or {}).get("data") or [] if _item_proration(line)]
    credits = [line for line in lines if line.get("amount", 0) < 0 and _item_proration(line) not in others]
    credits.sort(key=lambda line: _item_proration(line) != first)  # the first item's own credit first
    changes = []
    for charge in (line for line in lines if line.get("amount", 0) >= 0 and _item_proration(line) == first):
        at = (charge.get("period") or {}).get("start")
        credit = next((line for line in credits if (line.get("period") or {}).get("start") == at), None)
        if credit is None or at is None:
            continue
        credits.remove(credit)
        old, new = _line_config(credit), _line_config(charge)
        if old is not None and new is not None and old != new:
            changes.append(Change(charge["id"] + CHANGE, subscription_id, at, old, new, from_event=False))
    return changes


def _payload(change: Change, unit_amounts: Mapping[str, int]) -> tuple[str, dict[str, Any]]:
    (old_price, old_qty), (new_price, new_qty) = change.old, change.new
    if old_price == new_price:
        return "quantity_change", {"to_quantity": new_qty}
    higher = unit_amounts[new_price] * new_qty > unit_amounts[old_price] * old_qty
    return ("upgrade" if higher else "downgrade"), {"to_plan": new_price, "to_quantity": new_qty}


def _key(at: int, event_type: str, payload: Mapping[str, Any]) -> tuple[Any, ...]:
    return at, event_type, payload.get("to_plan"), payload.get("to_quantity")


def history(
    changes: Iterable[Change],
    held: Mapping[str, Sequence[Held]],
    countries: Mapping[str, str],
    unit_amounts: Mapping[str, int],
) -> History:
    """The change events to write and each subscription's create configuration.

    countries: subscription id → its customer's country (the subscriptions the ledger can hold);
    unit_amounts: plan id → unit amount in minor units (the prices the ledger holds as plans)."""
    out = History()
    seen = {sub: {_key(e.at, e.event_type, e.payload) for e in events} for sub, events in held.items()}
    earliest: dict[str, Change] = {}
    for change in sorted(changes, key=lambda c: (c.at, not c.from_event, c.id)):
        country = countries.get(change.subscription_id)
        if country is None:
            continue
        if change.old[0] not in unit_amounts or change.new[0] not in unit_amounts:
            out.skipped += 1
            continue
        event_type, payload = _payload(change, unit_amounts)
        key = _key(change.at, event_type, payload)
        if key in seen.setdefault(change.subscription_id, set()):
            continue
        seen[change.subscription_id].add(key)
        earliest.setdefault(change.subscription_id, change)
        out.events.append(
            {
                "type": "subscription_event",
                "id": change.id,
                "subscription_id": change.subscription_id,
                "event_type": event_type,
                "effective_at": to.instant(change.at, country).isoformat(),
                "payload": payload,
            }
        )
    for subscription_id in countries:
        out.initial |= _initial(subscription_id, earliest.get(subscription_id), held.get(subscription_id, ()))
    return out


def _initial(subscription_id: str, earliest: Change | None, held: Sequence[Held]) -> dict[str, Config]:
    created = next((e.payload for e in held if e.event_type == "create"), None)
    held_changes = [e.at for e in held if e.event_type in CONFIG_CHANGES]
    if earliest is not None and (created is None or earliest.at < min(held_changes, default=earliest.at + 1)):
        return {subscription_id: earliest.old}
    if created is not None:
        return {subscription_id: (created["plan_id"], created["quantity"])}
    return {}
