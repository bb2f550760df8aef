"""Model costs: the price table, the cost of one response, and the ledger of cost events read back.

Every model response appends one `cost_events` row (agent/model/budget.py writes it, under the month's budget
lock): tokens from the response's `usage`, the cost from the price table, the response id as the dedupe
key. The events are the fact; spend (per case, model, day, month) is a sum over them.

Prices are USD per million tokens, kept exactly (Decimal); a cost is kept to six decimals (USD 0.000001)
and rounded only for display. A model without a price still has its tokens recorded; its cost is NULL,
and any total that includes it is unknown (null) rather than too low.

Kept light (no openai, no langgraph): `billsleuth costs`, `budget` and `case show` import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from sqlalchemy import Date, bindparam, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals.config import ApprovalSettings
from approvals.model_prices import (  # the price table is policy; re-exported for the agent's callers
    BUDGET,
    DEFAULT_PRICES,
    MAX_USD,
    MICRO,
    MILLION,
    PRICES,
    ModelPrice,
    effective_prices,
    parse_prices,
    parse_usd,
)
from engine import schema
from engine.settings import EnvSettings

__all__ = [
    "BUDGET",
    "DEFAULT_PRICES",
    "MAX_USD",
    "MICRO",
    "MILLION",
    "PRICES",
    "ModelPrice",
    "SpendSettings",
    "parse_prices",
    "parse_usd",
]

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # a pinned snapshot: gpt-4o-mini-2024-07-18


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

    @classmethod
    def of_policy(cls, policy: ApprovalSettings) -> SpendSettings:
        """The stored policy's budget and prices (what every process enforces, whatever its own
        environment says): the default price table with the policy's additions and overrides."""
        return cls(prices=effective_prices(policy.model_prices), monthly_budget=policy.model_budget)

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
