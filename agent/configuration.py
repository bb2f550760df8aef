"""How an investigation runs: which investigator, which model, and the bounds on it (from the environment)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncEngine

from agent.tools import LedgerCache
from approvals.config import ApprovalSettings

Investigator = Literal["offline", "llm"]


class ConfigurationError(ValueError):
    pass


def _int_env(name: str, default: int, *, minimum: int = 1) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class Configuration:
    investigator: Investigator = "offline"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = None
    max_steps: int = 12  # model turns before the case is escalated
    max_tokens: int = 1200  # per model reply
    max_invalid_calls: int = 3  # malformed or unknown tool calls tolerated before escalation
    request_timeout_s: float = 30.0
    max_retries: int = 2

    @classmethod
    def from_env(cls, investigator: str | None = None) -> Configuration:
        """From the environment; `investigator` (a command-line flag) outranks BILLSLEUTH_INVESTIGATOR."""
        api_key = os.environ.get("OPENAI_API_KEY", "").strip() or None
        chosen = (investigator or os.environ.get("BILLSLEUTH_INVESTIGATOR", "")).strip().lower()
        if not chosen:
            chosen = "llm" if api_key else "offline"
        if chosen not in ("offline", "llm"):
            raise ConfigurationError(f"BILLSLEUTH_INVESTIGATOR must be offline or llm, got {chosen!r}")
        if chosen == "llm" and not api_key:
            raise ConfigurationError("BILLSLEUTH_INVESTIGATOR=llm needs OPENAI_API_KEY")
        return cls(
            investigator=chosen,  # type: ignore[arg-type]
            model=os.environ.get("BILLSLEUTH_MODEL", "").strip() or "gpt-4o-mini",
            base_url=os.environ.get("OPENAI_BASE_URL", "").strip() or None,
            api_key=api_key,
            max_steps=_int_env("BILLSLEUTH_MAX_STEPS", 12),
            max_tokens=_int_env("BILLSLEUTH_MAX_TOKENS", 1200),
            request_timeout_s=float(_int_env("BILLSLEUTH_MODEL_TIMEOUT", 30)),
            max_retries=_int_env("BILLSLEUTH_MODEL_RETRIES", 2, minimum=0),
        )


@dataclass
class CaseContext:
    """What a graph run needs that is not state: connections, settings, and where progress goes.

    Passed as LangGraph's runtime context, so none of it is checkpointed.
    """

    engine: AsyncEngine
    configuration: Configuration
    approval_settings: ApprovalSettings
    on_progress: Callable[[dict[str, Any]], None] | None = None
    # The ledger as read during this run, shared by the investigator and verify (never checkpointed).
    ledger_cache: LedgerCache = field(default_factory=LedgerCache)

    def progress(self, event: dict[str, Any]) -> None:
        if self.on_progress is not None:
            self.on_progress(event)
