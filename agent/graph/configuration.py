"""How an investigation runs: which investigator, which model, and the bounds on it (from the environment)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.graph.tool_context import LedgerCache
from agent.model.costs import SpendSettings
from approvals.config import ApprovalSettings
from approvals.models import CreditNoteView
from engine.settings import EnvSettings, SettingsError

Investigator = Literal["offline", "llm"]
INVESTIGATOR = "BILLSLEUTH_INVESTIGATOR"


class ConfigurationError(SettingsError):
    pass


def _whole_number(variable: str, value: object, minimum: int) -> object:
    """A bound from the environment: a whole number, at least `minimum`; code may set any (0.5 s in tests)."""
    if not isinstance(value, str):
        return value
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(f"{variable} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ConfigurationError(f"{variable} must be at least {minimum}, got {number}")
    return number


def _seconds(variable: str, value: object) -> object:
    """A time limit: seconds above zero, decimals allowed (0.2 s in a test)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigurationError(f"{variable} must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value.strip()) if isinstance(value, str) else float(value)
    except ValueError:
        raise ConfigurationError(f"{variable} must be a number of seconds like 120, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{variable} must be a number of seconds above zero, got {value!r}")
    return seconds


class Configuration(EnvSettings):
    error: ClassVar[type[SettingsError]] = ConfigurationError

    # Default: llm when OPENAI_API_KEY is set, else offline (see _choose_investigator).
    investigator: Investigator = Field("offline", validation_alias=INVESTIGATOR)
    model: str = Field("gpt-4o-mini", validation_alias="BILLSLEUTH_MODEL")
    base_url: str | None = Field(None, validation_alias="OPENAI_BASE_URL")
    api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    # model turns before the case is escalated
    max_steps: int = Field(12, validation_alias="BILLSLEUTH_MAX_STEPS")
    max_tokens: int = Field(1200, validation_alias="BILLSLEUTH_MAX_TOKENS")  # per model reply
    max_invalid_calls: int = 3  # malformed or unknown tool calls tolerated before escalation
    request_timeout_s: float = Field(30.0, validation_alias="BILLSLEUTH_MODEL_TIMEOUT")
    max_retries: int = Field(2, validation_alias="BILLSLEUTH_MODEL_RETRIES")
    # A model-backed case still investigating after this long escalates to a person and frees its slot.
    case_timeout_s: float = Field(120.0, validation_alias="BILLSLEUTH_CASE_TIMEOUT")
    # The price table and the monthly model budget (BILLSLEUTH_MODEL_PRICES, BILLSLEUTH_MODEL_BUDGET).
    spend: SpendSettings = Field(default_factory=SpendSettings)
    # The prompt size a model run's budget reservation assumes for each call (a reply is bounded by
    # max_tokens, a prompt is not); each call's real cost corrects the reservation (agent/model/budget.py).
    reserve_input_tokens: int = 16_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, investigator: str | None = None) -> Self:
        """From the environment; `investigator` (a command-line flag) outranks BILLSLEUTH_INVESTIGATOR."""
        env = os.environ if env is None else env
        configuration = super().from_env({**env, INVESTIGATOR: investigator} if investigator else env)
        try:
            spend = SpendSettings.from_env(env)
        except SettingsError as error:
            raise ConfigurationError(str(error)) from None
        return configuration.model_copy(update={"spend": spend})

    @model_validator(mode="before")
    @classmethod
    def _choose_investigator(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("investigator"):
            return {**data, "investigator": "llm" if data.get("api_key") else "offline"}
        return data

    @field_validator("investigator", mode="before")
    @classmethod
    def _investigator(cls, value: object) -> str:
        chosen = str(value).strip().lower()
        if chosen not in ("offline", "llm"):
            raise ConfigurationError(f"{INVESTIGATOR} must be offline or llm, got {chosen!r}")
        return chosen

    @field_validator("max_steps", "max_tokens", "request_timeout_s", mode="before")
    @classmethod
    def _at_least_one(cls, value: object, info: ValidationInfo) -> object:
        return _whole_number(cls.variable(info.field_name or ""), value, 1)

    @field_validator("max_retries", mode="before")
    @classmethod
    def _at_least_zero(cls, value: object) -> object:
        return _whole_number("BILLSLEUTH_MODEL_RETRIES", value, 0)

    @field_validator("case_timeout_s", mode="before")
    @classmethod
    def _positive_seconds(cls, value: object) -> object:
        return _seconds("BILLSLEUTH_CASE_TIMEOUT", value)

    def openai_key(self) -> str | None:
        """The key in clear, for the OpenAI client only: everywhere else it stays masked."""
        return self.api_key.get_secret_value() if self.api_key else None

    @model_validator(mode="after")
    def _llm_has_a_key(self) -> Self:
        if self.investigator == "llm" and self.api_key is None:
            raise ConfigurationError(f"{INVESTIGATOR}=llm needs OPENAI_API_KEY")
        return self


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
    # The credit notes this run read under issuing's locks, as it left them, by id: whoever resumed the
    # run draws them without reading them again (never checkpointed).
    notes_read: dict[str, CreditNoteView] = field(default_factory=dict)

    def progress(self, event: dict[str, Any]) -> None:
        if self.on_progress is not None:
            self.on_progress(event)
