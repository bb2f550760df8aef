"""The Stripe API client every part of BillSleuth uses (issuing in approvals/, `stripe sync`, the webhooks):
the official SDK's `StripeClient`, keyed by STRIPE_API_KEY and pointed at BILLSLEUTH_STRIPE_API_BASE when set
(tests point it at a local stand-in).

Retries are the SDK's own (`max_network_retries`): it retries connection errors, 409, 5xx and any answer
carrying `Stripe-Should-Retry: true`, with its exponential backoff and jitter, and sends the same
`Idempotency-Key` on every try of one call (a POST without one gets a random key per call, which protects
the SDK's own retries but not ours across processes: callers that create things pass a key of their own).

`stripe` is imported only when a client is built: importing it costs every command about 1.4 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import AnyHttpUrl, Field

from engine.settings import EnvSettings, SettingsError

if TYPE_CHECKING:
    import stripe

STRIPE_API_BASE = "https://api.stripe.com"
DASHBOARD = "https://dashboard.stripe.com"
MAX_NETWORK_RETRIES = 2


class StripeNotConfigured(SettingsError):
    """STRIPE_API_KEY is not set: nothing can be read from or written to Stripe."""


class StripeSettings(EnvSettings):
    api_key: Annotated[str, Field(validation_alias="STRIPE_API_KEY")] = ""
    api_base: Annotated[AnyHttpUrl, Field(validation_alias="BILLSLEUTH_STRIPE_API_BASE")] = AnyHttpUrl(
        STRIPE_API_BASE
    )
    # The webhook endpoint's signing secret (whsec_…): without it every webhook is refused.
    webhook_secret: Annotated[str, Field(validation_alias="STRIPE_WEBHOOK_SECRET")] = ""

    @property
    def base_url(self) -> str:
        return str(self.api_base).rstrip("/")


def stripe_client(
    settings: StripeSettings | None = None, *, max_network_retries: int = MAX_NETWORK_RETRIES
) -> stripe.StripeClient:
    """A client on the configured key and base; StripeNotConfigured without a key."""
    import stripe

    settings = settings or StripeSettings.from_env()
    if not settings.api_key:
        raise StripeNotConfigured("STRIPE_API_KEY is not set: Stripe cannot be reached")
    return stripe.StripeClient(
        settings.api_key,
        base_addresses={"api": settings.base_url},
        max_network_retries=max_network_retries,
    )


def dashboard_url(object_path: str, *, livemode: bool) -> str:
    """The Stripe dashboard page of an object (`credit_notes/cn_…`), in test mode unless live."""
    return f"{DASHBOARD}/{'' if livemode else 'test/'}{object_path}"
