"""The Stripe operations BillSleuth calls, as the vendored description has them (vendor/operations.json):
which operation a request is, its parameters decoded the way Stripe reads them (`lines[0][amount]=5`,
`metadata[key]=v`, `created[gte]=1`), and what is wrong with them, so a call Stripe would refuse fails here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

VENDOR = Path(__file__).parent / "vendor"


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    parameters: dict[str, Any]

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """The path's parameters when this operation is that request, else None."""
        if method != self.method:
            return None
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path))
        found = re.fullmatch(pattern, path)
        return found.groupdict() if found else None


@cache
def operations() -> tuple[Operation, ...]:
    described = json.loads((VENDOR / "operations.json").read_text())["operations"]
    # A literal segment wins over a path parameter: /v1/credit_notes/preview is not a retrieve of "preview".
    ordered = sorted(described.items(), key=lambda item: item[1]["path"].count("{"))
    return tuple(Operation(operation_id, **fields) for operation_id, fields in ordered)


@cache
def fixtures() -> dict[str, Any]:
    return json.loads((VENDOR / "fixtures.json").read_text())["resources"]


def find_operation(method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
    for operation in operations():
        path_parameters = operation.match(method, path)
        if path_parameters is not None:
            return operation, path_parameters
    return None


def decode_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's bracket encoding to nested dicts and lists (`a[0][b]=1` → {"a": [{"b": "1"}]})."""
    decoded: dict[str, Any] = {}
    for key, value in pairs:
        name, *subkeys = re.findall(r"[^\[\]]+|(?<=\[)(?=\])", key)
        _assign(decoded, [name, *subkeys], value)
    return _lists(decoded)


def _assign(target: dict[str, Any], keys: list[str], value: str) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def _lists(value: Any) -> Any:
    """Dicts keyed 0, 1, 2… are the lists the SDK encoded."""
    if not isinstance(value, dict):
        return value
    converted = {key: _lists(item) for key, item in value.items()}
    if converted and all(key.isdigit() for key in converted):
        return [converted[key] for key in sorted(converted, key=int)]
    return converted


def parameter_problem(parameters: dict[str, Any], described: dict[str, Any]) -> tuple[str, str] | None:
    """(param, message) of the first parameter Stripe would refuse, or None."""
    for name, value in parameters.items():
        if name not in described:
            return name, f"Received unknown parameter: {name}"
        problem = _value_problem(name, value, described[name])
        if problem is not None:
            return problem
    return None


def _value_problem(name: str, value: Any, schema: dict[str, Any]) -> tuple[str, str] | None:
    if "anyOf" in schema:
        problems = [_value_problem(name, value, option) for option in schema["anyOf"]]
        return None if any(problem is None for problem in problems) else problems[0]
    if "enum" in schema:
        if value in schema["enum"]:
            return None
        return name, f"Invalid {name}: must be one of {', '.join(map(str, schema['enum']))}"
    kind = schema.get("type")
    if kind == "integer":
        return None if isinstance(value, str) and re.fullmatch(r"-?\d+", value) else (name, "Invalid integer")
    if kind == "boolean":
        return None if value in ("true", "false") else (name, "Invalid boolean")
    if kind == "string":
        return None if isinstance(value, str) else (name, f"Invalid string: {name}")
    if kind == "array":
        if not isinstance(value, list):
            return name, f"Invalid array: {name}"
        for index, item in enumerate(value):
            problem = _value_problem(f"{name}[{index}]", item, schema["items"])
            if problem is not None:
                return problem
        return None
    if kind == "object":
        return _object_problem(name, value, schema)
    return None


def _object_problem(name: str, value: Any, schema: dict[str, Any]) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return name, f"Invalid object: {name}"
    if schema.get("additionalProperties"):
        return None
    properties = schema.get("properties", {})
    for key, item in value.items():
        if key not in properties:
            return f"{name}[{key}]", f"Received unknown parameter: {name}[{key}]"
        problem = _value_problem(f"{name}[{key}]", item, properties[key])
        if problem is not None:
            return problem
    return None
