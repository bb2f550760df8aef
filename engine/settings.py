"""Settings from the environment, typed and checked in one place (DESIGN §3 "Environment").

Each package's settings are a model on `EnvSettings`: a field names its variable (`validation_alias`), and a
bad value is a one-line `SettingsError` naming that variable, never pydantic's multi-line report. Only
`from_env` reads the environment; building a model directly (as tests do) takes the values given and the
defaults, nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class SettingsError(ValueError):
    """A setting is missing or unusable; the message is one line naming the variable."""


class _Variables(PydanticBaseSettingsSource):
    """Each field's variable from `env`. Blank (or only spaces) means unset, so the default applies."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.env = env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        variable = field.validation_alias
        if not isinstance(variable, str):  # a field no variable sets (a bound only code changes)
            return None, field_name, False
        return self.env.get(variable, "").strip() or None, variable, False

    def __call__(self) -> dict[str, Any]:
        values = {
            name: self.get_field_value(field, name)[0]
            for name, field in self.settings_cls.model_fields.items()
        }
        return {name: value for name, value in values.items() if value is not None}


class EnvSettings(BaseSettings):
    """Base of every settings model: frozen, variables read only by `from_env`, errors in one line."""

    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, validate_by_name=True, extra="forbid")
    error: ClassVar[type[SettingsError]] = SettingsError  # what a bad value raises, for callers to catch

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as invalid:
            raise self._one_line(invalid) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only the values given: `from_env` passes the environment's, so a test's model never picks up
        # whatever the developer's shell happens to export.
        return (init_settings,)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The settings from `env` (default: the process environment)."""
        return cls(**_Variables(cls, os.environ if env is None else env)())

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
