"""Stripe's error answers: `{"error": {type, code, message, param}}` with the HTTP status Stripe uses."""

from __future__ import annotations

from typing import Any


class StripeError(Exception):
    def __init__(self, status: int, error_type: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"type": error_type, "message": message, **fields}}

    @classmethod
    def invalid(cls, message: str, *, param: str | None = None, code: str | None = None) -> StripeError:
        fields = {name: value for name, value in (("param", param), ("code", code)) if value is not None}
        return cls(400, "invalid_request_error", message, **fields)

    @classmethod
    def missing(cls, resource: str, object_id: str, *, param: str | None = None) -> StripeError:
        fields = {"param": param} if param else {}
        return cls(
            404,
            "invalid_request_error",
            f"No such {resource}: '{object_id}'",
            code="resource_missing",
            **fields,
        )

    @classmethod
    def injected(cls, status: int) -> StripeError:
        """What Stripe answers with this status when it fails a request that was fine."""
        if status == 429:
            return cls(429, "invalid_request_error", "Request rate limit exceeded.", code="rate_limit")
        return cls(status, "api_error", "An unknown error occurred.")
