"""`POST /stripe/webhook`: a Stripe event, verified and handled once.

The signature is checked with the SDK's own verification (`Stripe-Signature` against
STRIPE_WEBHOOK_SECRET, at most 300 s old); anything else gets 400 and changes nothing. An event is claimed
by its id as Slack's are (bot.store: a redelivered or retried event runs once), and the claim commits only
when the event was handled, so a failure answers 500 and Stripe's retry does it again. A billing event
(invoices, payments and refunds, subscriptions, credit notes, customers and the price book) runs the
Stripe sync from where it last stopped (approvals.stripe_ledger), which reads the event's object through
the events API and writes it through `ledger import`'s loader; other events are acknowledged and left.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import claimed_while

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
    async with claimed_while(engine, f"stripe:{event.id}") as ours:
        if ours and event.type.startswith(BILLING_EVENTS):
            await sync_stripe(engine, stripe_client(settings), actor=ACTOR)
    return 200
