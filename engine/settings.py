"""Settings from the environment, typed and checked in one place (DESIGN §3 "Environment").

Each package's settings are a model on `EnvSettings`: a field names its variable (`validation_alias`), and a
bad value is a one-line `SettingsError` naming that variable, never pydantic's multi-line report. Only
`from_env` reads the environment; building a model directly (as tests do) takes the values given and the
defaults, nothing else.

A plain pydantic model, not pydantic-settings' BaseSettings: reading the variables is the few lines of
`_variables` below, and BaseSettings' sources (dotenv files, secrets dirs, CLI parsing) were all switched
off; importing it cost every command about 75 ms more than pydantic itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class SettingsError(ValueError):
    """A setting is missing or unusable; the message is one line naming the variable."""


def _variables(settings_cls: type[EnvSettings], env: Mapping[str, str]) -> dict[str, Any]:
    """Each field's value from its variable in `env`, by field name. Blank (or only spaces) means unset,
    so the default applies; a field no variable sets (a bound only code changes) is left to its default."""
    values = {}
    for name, field in settings_cls.model_fields.items():
        variable = field.validation_alias
        if isinstance(variable, str) and (value := env.get(variable, "").strip()):
            values[name] = value
    return values


class EnvSettings(BaseModel):
    """Base of every settings model: frozen, variables read only by `from_env`, errors in one line."""

    # validate_default: a default goes through the same validators as a value from the environment.
    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_default=True, extra="forbid")
    error: ClassVar[type[SettingsError]] = SettingsError  # what a bad value raises, for callers to catch

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as invalid:
            raise self._one_line(invalid) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The settings from `env` (default: the process environment)."""
        return cls(**_variables(cls, os.environ if env is None else env))

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable that sets a field (its name, for a field no variable sets)."""
        alias = cls.model_fields[field_name].validation_alias
        return alias if isinstance(alias, str) else field_name

    @classmethod
    def _one_line(cls, invalid: ValidationError) -> SettingsError:
        # Validators raise our own errors with the exact sentence; pydantic wraps them. Anything else
        # (a wrong type from code) is pydantic's first complaint, still named by the variable.
        first = invalid.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, SettingsError):
            return cause
        where = str(first["loc"][0]) if first["loc"] else ""
        name = cls.variable(where) if where in cls.model_fields else where
        return cls.error(f"{name}: {first['msg']}")
