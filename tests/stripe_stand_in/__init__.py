"""A stand-in for Stripe's API for tests (server.py), over an account described in Python (account.py),
checked against the vendored description of the operations BillSleuth calls (vendor/, re-extracted by
vendor/extract.py)."""

import pytest


def retry_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's retries keep their count and their idempotency key but skip the backoff (0.5 s and up)."""
    from stripe import _http_client

    monkeypatch.setattr(_http_client.HTTPClient, "INITIAL_DELAY", 0)
