"""The price of model tokens and the monthly model budget, as policy: parsed and checked here.

Both are part of the stored policy (BILLSLEUTH_MODEL_PRICES, BILLSLEUTH_MODEL_BUDGET; approvals/config.py),
so whether a change widens spending power (approvals/policy_direction.py) is judged here too, without
the agent. agent/model/costs.py prices responses with these and keeps the ledger of what was spent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from engine.settings import SettingsError

MAX_USD = Decimal(10) ** 12  # what a NUMERIC(18,6) column holds: twelve digits before the point
MICRO = Decimal("0.000001")  # a cost's precision: six decimals of a dollar
MILLION = Decimal(1_000_000)
PRICES = "BILLSLEUTH_MODEL_PRICES"
BUDGET = "BILLSLEUTH_MODEL_BUDGET"


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens. `cached_input`: the rate for prompt tokens the provider served from its
    cache (None: charged as input)."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> Decimal:
        """The cost of one response, to six decimals. Cached tokens are part of the prompt tokens."""
        cached = min(max(cached_tokens, 0), input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        exact = (
            (input_tokens - cached) * self.input + cached * cached_rate + output_tokens * self.output
        ) / MILLION
        return exact.quantize(MICRO, rounding=ROUND_HALF_UP)


def _price(input_: str, output: str, cached_input: str) -> ModelPrice:
    return ModelPrice(Decimal(input_), Decimal(output), Decimal(cached_input))


# OpenAI's standard (not batch) list prices, USD per 1M tokens: input, output, cached input. Source:
# platform.openai.com/docs/pricing as quoted by third-party price trackers in March–June 2026 (checked
# 2026-12-02); BILLSLEUTH_MODEL_PRICES overrides or adds any of them.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": _price("2.50", "10.00", "1.25"),
    "gpt-4o-mini": _price("0.15", "0.60", "0.075"),
    "gpt-4.1": _price("2.00", "8.00", "0.50"),
    "gpt-4.1-mini": _price("0.40", "1.60", "0.10"),
    "gpt-4.1-nano": _price("0.10", "0.40", "0.025"),
    "gpt-5": _price("1.25", "10.00", "0.125"),
    "gpt-5-mini": _price("0.25", "2.00", "0.025"),
    "gpt-5-nano": _price("0.05", "0.40", "0.005"),
    "o1": _price("15.00", "60.00", "7.50"),
    "o3": _price("2.00", "8.00", "0.50"),
    "o3-mini": _price("1.10", "4.40", "0.55"),
    "o4-mini": _price("1.10", "4.40", "0.275"),
}


def _rate(model: str, field: str, value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, Decimal | int | str):
        raise SettingsError(f"{PRICES}: {model}.{field} must be a number of USD per 1M tokens, got {value!r}")
    try:
        rate = Decimal(value)
    except InvalidOperation:
        raise SettingsError(f"{PRICES}: {model}.{field} must be a number, got {value!r}") from None
    if not rate.is_finite() or rate < 0:
        raise SettingsError(f"{PRICES}: {model}.{field} must be zero or more, got {value!r}")
    return rate


def parse_prices(text: str) -> dict[str, ModelPrice]:
    """BILLSLEUTH_MODEL_PRICES: `{"MODEL": {"input": USD, "output": USD, "cached_input": USD}}` per 1M
    tokens (numbers or strings; cached_input optional). One-line SettingsError when malformed."""
    try:
        data = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    except json.JSONDecodeError as error:
        raise SettingsError(f"{PRICES} is not valid JSON ({error.msg} at character {error.pos})") from None
    if not isinstance(data, dict):
        raise SettingsError(
            f'{PRICES} must be a JSON object like {{"MODEL": {{"input": 0.15, "output": 0.6}}}}'
        )
    prices: dict[str, ModelPrice] = {}
    for model, rates in data.items():
        if not isinstance(rates, dict):
            raise SettingsError(f"{PRICES}: {model} must be an object with input and output")
        unknown = set(rates) - {"input", "output", "cached_input"}
        if unknown:
            raise SettingsError(f"{PRICES}: {model} has unknown field(s) {', '.join(sorted(unknown))}")
        missing = [name for name in ("input", "output") if name not in rates]
        if missing:
            raise SettingsError(f"{PRICES}: {model} needs {' and '.join(missing)}")
        cached = rates.get("cached_input")
        prices[model] = ModelPrice(
            _rate(model, "input", rates["input"]),
            _rate(model, "output", rates["output"]),
            None if cached is None else _rate(model, "cached_input", cached),
        )
    return prices


def parse_usd(variable: str, value: object) -> Decimal:
    """An amount of USD above zero (a budget, a raised limit); one-line SettingsError otherwise."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int | str):
        raise SettingsError(f"{variable} must be an amount in USD like 50.00, got {value!r}")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise SettingsError(f"{variable} must be an amount in USD like 50.00, got {value!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise SettingsError(f"{variable} must be an amount in USD above zero, got {value!r}")
    if amount != amount.quantize(MICRO):
        raise SettingsError(f"{variable} has more than six decimals: {value!r}")
    if amount >= MAX_USD:
        raise SettingsError(f"{variable} is too large: {value!r} (at most {MAX_USD - MICRO})")
    return amount


Overrides = dict[str, ModelPrice] | tuple[tuple[str, ModelPrice], ...]


def prices_text(overrides: Overrides) -> str:
    """BILLSLEUTH_MODEL_PRICES in one canonical form (sorted, rates as exact decimal strings; empty when
    nothing overrides the defaults): what the stored policy keeps, and what two policies compare by."""
    pairs = sorted(dict(overrides).items())
    if not pairs:
        return ""

    def rates(price: ModelPrice) -> dict[str, str]:
        shown = {"input": str(price.input), "output": str(price.output)}
        return shown if price.cached_input is None else {**shown, "cached_input": str(price.cached_input)}

    return json.dumps({model: rates(price) for model, price in pairs}, sort_keys=True, separators=(",", ":"))


def effective_prices(overrides: Overrides) -> dict[str, ModelPrice]:
    """The price table in force: the defaults, then what the policy adds or overrides."""
    return {**DEFAULT_PRICES, **dict(overrides)}
