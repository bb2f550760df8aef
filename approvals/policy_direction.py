"""Which way a policy change points: does it widen power (needs a second person) or narrow it (applies at
once)? Pure: two policies in, one verdict per variable out; no I/O (approvals/policy_store.py acts on it).

Widening, per variable (DESIGN §3): someone added to the approvers or support; a higher daily limit, two-
person threshold, approval TTL or hold limit, in any currency; CLI decisions turned on; a higher model
budget, or none at all where there was one; a model's tokens counted cheaper, or no longer priced (its calls
could not be held to a budget); the billing system switched to Stripe (issuing then moves real money there);
any change of the credit method (the same approval then sends money another way). Anything else that
changes narrows. A variable whose text changes but whose meaning does not (the same people in another
order) is no change at all: `as_env` is canonical.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from approvals.config import (
    APPROVAL_TTL_HOURS,
    APPROVERS,
    BILLING_SYSTEM,
    CLI_DECISIONS,
    CREDIT_METHOD,
    DAILY_CREDIT_LIMIT,
    HOLD_MAX_DAYS,
    MODEL_BUDGET,
    MODEL_PRICES,
    POLICY_VARIABLES,
    STRIPE,
    SUPPORT,
    TWO_PERSON_THRESHOLD,
    ApprovalSettings,
)
from approvals.model_prices import ModelPrice, effective_prices


@dataclass(frozen=True)
class VariableChange:
    """One variable of the policy, from what is stored to what is proposed."""

    variable: str
    stored: str
    proposed: str
    widens: bool


def _adds_people(old: frozenset[str], new: frozenset[str]) -> bool:
    return bool(new - old)


def _raised_in_any_currency(
    old_for: Callable[[str], Decimal], new_for: Callable[[str], Decimal], currencies: Iterable[str]
) -> bool:
    """Per currency: a limit raised for any currency named on either side, or for the unnamed rest."""
    return any(new_for(code) > old_for(code) for code in currencies)


def _currencies(*settings: ApprovalSettings) -> set[str]:
    """Every currency a per-currency setting names, plus "" (the plain value every other currency has)."""
    named = {code for s in settings for code, _ in s.currency_daily_limits}
    named |= {code for s in settings for code, _ in s.currency_two_person_thresholds}
    return named | {""}


def _daily_limit_for(settings: ApprovalSettings) -> Callable[[str], Decimal]:
    return lambda code: settings.daily_limit_for(code) if code else settings.daily_credit_limit


def _threshold_for(settings: ApprovalSettings) -> Callable[[str], Decimal]:
    return lambda code: settings.two_person_threshold_for(code) if code else settings.two_person_threshold


def _budget_raised(old: Decimal | None, new: Decimal | None) -> bool:
    if new is None:
        return old is not None  # no limit at all where there was one
    return old is not None and new > old


def _cheaper(old: ModelPrice, new: ModelPrice) -> bool:
    def cached(price: ModelPrice) -> Decimal:
        return price.input if price.cached_input is None else price.cached_input

    return new.input < old.input or new.output < old.output or cached(new) < cached(old)


def _prices_widen(old: ApprovalSettings, new: ApprovalSettings) -> bool:
    before, after = effective_prices(old.model_prices), effective_prices(new.model_prices)
    return any(model not in after or _cheaper(price, after[model]) for model, price in before.items())


def widens(variable: str, old: ApprovalSettings, new: ApprovalSettings) -> bool:
    """Whether changing `variable` from `old`'s value to `new`'s gives anyone more power."""
    if variable in (APPROVERS, SUPPORT):
        attribute = "approvers" if variable == APPROVERS else "support"
        return _adds_people(getattr(old, attribute), getattr(new, attribute))
    currencies = _currencies(old, new)
    verdicts: dict[str, Callable[[], bool]] = {
        DAILY_CREDIT_LIMIT: lambda: _raised_in_any_currency(
            _daily_limit_for(old), _daily_limit_for(new), currencies
        ),
        TWO_PERSON_THRESHOLD: lambda: _raised_in_any_currency(
            _threshold_for(old), _threshold_for(new), currencies
        ),
        APPROVAL_TTL_HOURS: lambda: new.approval_ttl_hours > old.approval_ttl_hours,
        HOLD_MAX_DAYS: lambda: new.hold_max_days > old.hold_max_days,
        CLI_DECISIONS: lambda: new.cli_decisions and not old.cli_decisions,
        MODEL_BUDGET: lambda: _budget_raised(old.model_budget, new.model_budget),
        MODEL_PRICES: lambda: _prices_widen(old, new),
        BILLING_SYSTEM: lambda: new.billing_system == STRIPE and old.billing_system != STRIPE,
        CREDIT_METHOD: lambda: new.credit_method != old.credit_method,
    }
    verdict = verdicts.get(variable)
    # A variable this table does not know yet widens: consent is the safe default for a new power.
    return True if verdict is None else verdict()


def changes(old: ApprovalSettings, new: ApprovalSettings) -> list[VariableChange]:
    """Every variable whose value differs, in the order `policy show` lists them, with its direction."""
    before, after = old.as_env(), new.as_env()
    return [
        VariableChange(name, before[name], after[name], widens(name, old, new))
        for name in POLICY_VARIABLES
        if before[name] != after[name]
    ]


def split(old: ApprovalSettings, new: ApprovalSettings) -> tuple[list[VariableChange], list[VariableChange]]:
    """(narrowing, widening): what may apply at once, and what waits for a second person."""
    found = changes(old, new)
    return [c for c in found if not c.widens], [c for c in found if c.widens]
