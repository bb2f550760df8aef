"""`POST /stripe/webhook`: a Stripe event, verified and handled once; in Socket Mode, where the bot has
no HTTP server, `poll_events` reads Stripe's events API every minute instead, with the same dedupe.

The signature is checked with the SDK's own verification (`Stripe-Signature` against
STRIPE_WEBHOOK_SECRET, at most 300 s old); anything else gets 400 and changes nothing. An event is claimed
by its id as Slack's are (bot.store: a redelivered or retried event runs once), and the claim commits only
when the event was handled, so a failure answers 500 and Stripe's retry does it again. A billing event
(invoices, payments and refunds, subscriptions, credit notes, customers and the price book) runs the
Stripe sync from where it last stopped (approvals.stripe_ledger), which reads the event's object through
the events API and writes it through `ledger import`'s loader; other events are acknowledged and left.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import claim, claimed_while, is_claimed

log = logging.getLogger(__name__)

TOLERANCE_SECONDS = 300
BILLING_EVENTS = (
    "invoice.",
    "invoice_payment.",
    "charge.refund",
    "refund.",
    "customer.subscription.",
    "credit_note.",
    "customer.",
    "price.",
    "product.",
    "coupon.",
    "tax_rate.",
)
ACTOR = "stripe:webhook"
POLL_ACTOR = "stripe:events"
POLL_SECONDS = 60.0
_EVENTS_CURSOR = "SELECT synced_to FROM stripe_sync WHERE object = 'events'"


def _key(event_id: str) -> str:
    return f"stripe:{event_id}"


async def receive(engine: AsyncEngine, body: bytes, signature: str | None) -> int:
    """The HTTP status to answer Stripe with."""
    import stripe

    from approvals.stripe_ledger import sync_stripe
    from engine.stripe_api import StripeSettings, stripe_client

    settings = StripeSettings.from_env()
    if not settings.webhook_secret:
        log.warning("a Stripe webhook arrived but STRIPE_WEBHOOK_SECRET is not set: refused")
        return 400
    try:
        event = stripe.Webhook.construct_event(
            body.decode("utf-8"), signature or "", settings.webhook_secret, tolerance=TOLERANCE_SECONDS
        )
    except (ValueError, stripe.SignatureVerificationError) as error:
        log.warning("refused a Stripe webhook: %s", error)
        return 400
    async with claimed_while(engine, _key(event.id)) as ours:
        if ours and event.type.startswith(BILLING_EVENTS):
            await sync_stripe(engine, stripe_client(settings), actor=ACTOR)
    return 200


async def poll_events(engine: AsyncEngine) -> int:
    """Socket Mode's webhook: the billing events Stripe recorded since the last sync that no webhook or
    earlier poll handled; when there are any, one sync, then each claimed (a failed sync claims nothing,
    so the next poll tries again). Returns how many it handled; 0 without STRIPE_API_KEY."""
    from approvals.stripe_ledger import sync_stripe
    from engine.stripe_api import StripeSettings, stripe_client

    settings = StripeSettings.from_env()
    if not settings.api_key:
        return 0
    client = stripe_client(settings)
    async with engine.connect() as conn:
        since = (await conn.execute(text(_EVENTS_CURSOR))).scalar()
    params: dict[str, object] = {"limit": 100, **({"created": {"gte": since}} if since is not None else {})}

    def billing_events() -> list[str]:
        listed = client.v1.events.list(params).auto_paging_iter()  # type: ignore[arg-type]
        return [event.id for event in listed if event.type.startswith(BILLING_EVENTS)]

    listed = await asyncio.to_thread(billing_events)
    new = [event_id for event_id in listed if not await is_claimed(engine, _key(event_id))]
    if new:
        await sync_stripe(engine, client, actor=POLL_ACTOR)
        for event_id in new:
            await claim(engine, _key(event_id))
    return len(new)
