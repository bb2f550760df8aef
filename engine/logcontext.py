"""Which case, credit note and Slack event a log line belongs to, and the two log formats.

The ids live in context variables: `bind(...)` sets them for a block, and asyncio copies them into every
task started inside it, so the investigation a mention starts still names the mention's event. A filter on
the handler copies them onto each record; `BILLSLEUTH_LOG_FORMAT=json` writes one JSON object a line
(for a log pipeline), `text` (the default) the plain lines people read.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any, Literal, TypeVar

from pydantic import Field, field_validator

from engine.settings import EnvSettings, SettingsError

LOG_FORMAT = "BILLSLEUTH_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_IDS: dict[str, ContextVar[str | None]] = {
    name: ContextVar(name, default=None) for name in ("case_id", "credit_note_id", "event_id")
}
T = TypeVar("T")


@contextmanager
def bind(
    *, case_id: str | None = None, credit_note_id: str | None = None, event_id: str | None = None
) -> Iterator[None]:
    """Log lines inside the block (and tasks started in it) carry these ids; None keeps the outer one."""
    given = {"case_id": case_id, "credit_note_id": credit_note_id, "event_id": event_id}
    tokens = [(_IDS[name], _IDS[name].set(value)) for name, value in given.items() if value is not None]
    try:
        yield
    finally:
        for variable, token in reversed(tokens):
            variable.reset(token)


async def bind_for_task(work: Coroutine[Any, Any, T], **ids: str | None) -> T:
    """`work` run with these ids bound: for a task started where they are known but not bound yet."""
    with bind(**ids):
        return await work


class ContextFilter(logging.Filter):
    """Puts the bound ids on every record (None when unknown), for either format to use."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, variable in _IDS.items():
            setattr(record, name, variable.get())
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, message, the ids known, and the traceback as text."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({name: getattr(record, name) for name in _IDS if getattr(record, name, None)})
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class LogSettings(EnvSettings):
    format: Literal["text", "json"] = Field("text", validation_alias=LOG_FORMAT)

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: object) -> str:
        chosen = str(value).strip().lower()
        if chosen not in ("text", "json"):
            raise SettingsError(f"{LOG_FORMAT} must be text or json, got {value!r}")
        return chosen


def log_handler(env: Mapping[str, str] | None = None, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing the format BILLSLEUTH_LOG_FORMAT asks for (to stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    json_lines = LogSettings.from_env(env).format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    return handler


def setup_logging(env: Mapping[str, str] | None = None, *, level: int = logging.INFO) -> None:
    """Configure the process's logging once, at start. A bad BILLSLEUTH_LOG_FORMAT raises SettingsError."""
    logging.basicConfig(level=level, handlers=[log_handler(env)], force=True)
