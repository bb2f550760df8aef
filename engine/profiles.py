"""Rules profiles: which billing system's published rules judge a ledger, chosen by the ledger's source.

The reference rules (engine.billing) are CloudLedger's help centre. A ledger synced from Stripe
(`source = "stripe"`) is billed by Stripe, whose rules differ where it matters to an overcharge:
- prorations are by the second: a change at an instant credits and charges the fraction
  (period end − change) / (period end − period start) of a whole period, counted in seconds, where
  CloudLedger counts days from the customer's local date;
- Stripe does not publish its exact rounding (per line, per tax amount, of a proration's fraction), so a
  line that differs from the rules by at most one minor unit is rounding, never an overcharge (a discount
  or tax line, which sums a part of each charge line, one minor unit per charge line: engine.diff).
Both honour coupons' durations (once, repeating for N months, forever), percent-off and amount-off, and
exclusive and inclusive tax rates: those are the format's, not a profile's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from engine.money import ZERO, minor_unit


@dataclass(frozen=True)
class RulesProfile:
    name: str
    prorate_by: Literal["day", "second"]
    rounding_minor_units: int  # a line off by at most this many minor units is rounding

    def rounding(self, currency: str) -> Decimal:
        """The most a line may differ from the rules and still be rounding, in the currency."""
        if not self.rounding_minor_units:
            return ZERO
        return Decimal(self.rounding_minor_units).scaleb(-min(minor_unit(currency), 2))


CLOUDLEDGER = RulesProfile("cloudledger", "day", 0)
STRIPE = RulesProfile("stripe", "second", 1)
PROFILES: dict[str, RulesProfile] = {"stripe": STRIPE}


def profile_for(source: str | None) -> RulesProfile:
    """The rules a ledger written from this source is judged by (CloudLedger's unless a billing system we
    know the rules of wrote it)."""
    return PROFILES.get(source or "", CLOUDLEDGER)
