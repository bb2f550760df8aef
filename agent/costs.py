"""Model costs: the price table, the cost of one response, and the ledger of cost events read back.

Every model response appends one `cost_events` row (agent/budget.py writes it, under the month's budget
lock): tokens from the response's `usage`, the cost from the price table, the response id as the dedupe
key. The events are the fact; spend (per case, model, day, month) is a sum over them.

Prices are USD per million tokens, kept exactly (Decimal); a cost is kept to six decimals (USD 0.000001)
and rounded only for display. A model without a price still has its tokens recorded; its cost is NULL,
and any total that includes it is unknown (null) rather than too low.

Kept light (no openai, no langgraph): `billsleuth costs`, `budget` and `case show` import it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from sqlalchemy import Date, bindparam, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import schema
from engine.settings import EnvSettings, SettingsError

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

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # a pinned snapshot: gpt-4o-mini-2024-07-18


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


class SpendSettings(EnvSettings):
    """The price table and the monthly model budget (DESIGN §3 "Environment")."""

    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES), validation_alias=PRICES
    )
    monthly_budget: Decimal | None = Field(None, validation_alias=BUDGET)  # USD per calendar month, UTC

    @field_validator("prices", mode="before")
    @classmethod
    def _prices(cls, value: object) -> object:
        if isinstance(value, str):  # from the environment: the defaults, then what it adds or overrides
            return {**DEFAULT_PRICES, **parse_prices(value)}
        return value

    @field_validator("monthly_budget", mode="before")
    @classmethod
    def _budget(cls, value: object) -> object:
        return None if value is None else parse_usd(BUDGET, value)

    def price_for(self, model: str) -> ModelPrice | None:
        """The model's price: by its exact name, else without a snapshot date or a provider prefix
        (`gpt-4o-mini-2024-07-18`, `openai/gpt-4o-mini`); None when it has none."""
        for name in (
            model,
            _DATED.sub("", model),
            model.rsplit("/", 1)[-1],
            _DATED.sub("", model.rsplit("/", 1)[-1]),
        ):
            if name in self.prices:
                return self.prices[name]
        return None


def endpoint_host(base_url: str | None) -> str:
    """Who served the call: the base URL's host (and port, when it names one); OpenAI's by default."""
    if not base_url:
        return "api.openai.com"
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    return f"{host}:{parts.port}" if parts.port else host


@dataclass(frozen=True)
class Usage:
    """What one response says it used: prompt (input), completion (output), and cached prompt tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    known: bool = True  # False: the response carried no usage at all

    @classmethod
    def of(cls, usage: Any) -> Usage:
        """From an SDK `usage` object (or None): cached = usage.prompt_tokens_details.cached_tokens."""
        if usage is None:
            return cls(known=False)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        return cls(
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
            int(cached or 0),
        )


def usd(amount: Decimal | None) -> str | None:
    """A cost as JSON: six decimals, as a string; None stays null."""
    return None if amount is None else f"{amount.quantize(MICRO, rounding=ROUND_HALF_UP):f}"


def usd_display(amount: Decimal | None) -> str:
    """A cost for people: USD to the cent, or to four decimals below a cent; "unknown" without a price."""
    if amount is None:
        return "unknown"
    places = Decimal("0.01") if abs(amount) >= Decimal("0.01") or amount == 0 else Decimal("0.0001")
    return f"${amount.quantize(places, rounding=ROUND_HALF_UP):,f}"


# ---- reading the ledger ----

By = Literal["case", "model", "day"]


def _sum_cost(count_all: Any, count_priced: Any, total: Any) -> Decimal | None:
    """A group's cost: None when any of its events had no price (the sum would be too low)."""
    if count_all and count_priced != count_all:
        return None
    return Decimal(total or 0)


def _totals_json(row: Any) -> dict[str, Any]:
    return {
        "input_tokens": int(row.input_tokens or 0),
        "output_tokens": int(row.output_tokens or 0),
        "cached_tokens": int(row.cached_tokens or 0),
        "cost": usd(_sum_cost(row.events, row.priced, row.cost)),
    }


def _sums() -> list[Any]:
    c = schema.cost_events.c
    return [
        func.coalesce(func.sum(c.input_tokens), 0).label("input_tokens"),
        func.coalesce(func.sum(c.output_tokens), 0).label("output_tokens"),
        func.coalesce(func.sum(c.cached_tokens), 0).label("cached_tokens"),
        func.sum(c.cost).label("cost"),
        func.count().label("events"),
        func.count(c.cost).label("priced"),
    ]


def since_instant(since: date | None) -> datetime | None:
    return None if since is None else datetime(since.year, since.month, since.day, tzinfo=UTC)


async def cost_report(engine: AsyncEngine, *, by: By = "day", since: date | None = None) -> dict[str, Any]:
    """`billsleuth costs --json`: `{"by", "since", "rows": [{key, input_tokens, output_tokens,
    cached_tokens, cost}], "total": {…}}`, costs as strings with six decimals (null: some call unpriced)."""
    c = schema.cost_events.c
    key = {
        "case": func.coalesce(c.case_id, "(no case)"),
        "model": c.model,
        "day": cast(func.timezone("UTC", c.at), Date),
    }[by]
    start = since_instant(since)
    grouped = select(key.label("key"), *_sums()).group_by(key).order_by(key)
    overall = select(*_sums())
    if start is not None:
        grouped, overall = grouped.where(c.at >= start), overall.where(c.at >= start)
    async with engine.connect() as conn:
        rows = list(await conn.execute(grouped))
        total = (await conn.execute(overall)).one()
    return {
        "by": by,
        "since": since.isoformat() if since else None,
        "rows": [{"key": str(row.key), **_totals_json(row)} for row in rows],
        "total": _totals_json(total),
    }


# Built once: every card draw and every case shown sums its model costs.
_CASE_SUMS = select(*_sums()).where(schema.cost_events.c.case_id == bindparam("case_id"))


async def case_model_cost(conn: AsyncConnection, case_id: str) -> dict[str, Any] | None:
    """A case's `model_cost` (`{input_tokens, output_tokens, cost}`), or None when no model was asked."""
    row = (await conn.execute(_CASE_SUMS, {"case_id": case_id})).one()
    if not row.events:
        return None
    totals = _totals_json(row)
    return {key: totals[key] for key in ("input_tokens", "output_tokens", "cost")}
