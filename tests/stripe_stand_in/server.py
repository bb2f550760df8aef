"""A local HTTP server standing in for Stripe's API, in-process on 127.0.0.1, for the official SDK to talk to
(point it here with BILLSLEUTH_STRIPE_API_BASE = `stand_in.url`).

Each request is checked against the vendored description of the operation it names (unknown operation →
404, unknown or malformed parameter → Stripe's 400), answered over a StripeAccount, and recorded. POSTs
honour `Idempotency-Key` as Stripe does: the same key with the same parameters replays the first answer
(`Idempotent-Replayed: true`) and creates nothing; with other parameters it is a 400 `idempotency_error`.
Tests can fail the next calls of an operation (429, 500) or drop the connection after an operation ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.stripe_stand_in import credit_notes
from tests.stripe_stand_in.account import COLLECTIONS, StripeAccount
from tests.stripe_stand_in.errors import StripeError
from tests.stripe_stand_in.operations import Operation, decode_form, find_operation, parameter_problem

API_KEY = "sk_test_billsleuth_stand_in"
MAX_LIST_LIMIT = 100


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    operation_id: str | None
    params: dict[str, Any]
    headers: dict[str, str]
    status: int = 0

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get("Idempotency-Key")


@dataclass
class _Injection:
    status: int  # 0: perform the operation, then drop the connection without answering
    times: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Replay:
    operation_id: str
    params: dict[str, Any]
    status: int
    body: dict[str, Any]


class StripeStandIn:
    """`async with StripeStandIn(account) as stripe:` serves `account` at `stripe.url`."""

    def __init__(self, account: StripeAccount | None = None, *, api_key: str = API_KEY) -> None:
        self.account = account or StripeAccount()
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self._injections: dict[str, list[_Injection]] = {}
        self._replays: dict[str, _Replay] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> StripeStandIn:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- what tests set up and ask -----------------------------------------------------------------------

    def fail_next(
        self, operation_id: str, status: int, *, times: int = 1, headers: dict[str, str] | None = None
    ):
        """The next `times` calls of the operation get this error status (429, 500…) and change nothing."""
        self._injections.setdefault(operation_id, []).append(_Injection(status, times, headers or {}))

    def drop_after(self, operation_id: str, *, times: int = 1) -> None:
        """The next `times` calls of the operation are performed, then the connection drops unanswered:
        Stripe did the work and the client never heard."""
        self._injections.setdefault(operation_id, []).append(_Injection(0, times))

    def calls(self, operation_id: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.operation_id == operation_id]

    # ---- serving -----------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.method
        pairs = list(request.query.items())
        if method == "POST":
            pairs += list((await request.post()).items())  # type: ignore[arg-type]
        params = decode_form([(str(key), str(value)) for key, value in pairs])
        found = find_operation(method, request.path)
        headers = {
            name: request.headers[name]
            for name in ("Idempotency-Key", "Stripe-Version")
            if name in request.headers
        }
        operation_id = found[0].operation_id if found else None
        status, body, extra_headers, drop = await self._answer(request, found, params)
        self.requests.append(RecordedRequest(method, request.path, operation_id, params, headers, status))
        if drop:
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError  # aiohttp writes nothing for a handler that never returns
        return web.json_response(body, status=status, headers={"Request-Id": "req_stand_in", **extra_headers})

    async def _answer(
        self, request: web.Request, found: tuple[Operation, dict[str, str]] | None, params: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str], bool]:
        try:
            if request.headers.get("Authorization") != f"Bearer {self.api_key}":
                raise StripeError(401, "invalid_request_error", "Invalid API Key provided.")
            if found is None:
                raise StripeError.invalid(f"Unrecognized request URL ({request.method}: {request.path}).")
            operation, path_parameters = found
            problem = parameter_problem(params, operation.parameters)
            if problem is not None:
                param, message = problem
                code = "parameter_unknown" if message.startswith("Received unknown") else "parameter_invalid"
                raise StripeError.invalid(message, param=param, code=code)
            injection = self._take_injection(operation.operation_id)
            if injection is not None and injection.status:
                error = StripeError.injected(injection.status)
                return error.status, error.body, injection.headers, False
            status, body, replayed = self._idempotent(request, operation, path_parameters, params)
            return status, body, {"Idempotent-Replayed": "true"} if replayed else {}, injection is not None
        except StripeError as error:
            return error.status, error.body, {}, False

    def _take_injection(self, operation_id: str) -> _Injection | None:
        pending = self._injections.get(operation_id)
        if not pending:
            return None
        injection = pending[0]
        injection.times -= 1
        if injection.times <= 0:
            pending.pop(0)
        return injection

    def _idempotent(
        self,
        request: web.Request,
        operation: Operation,
        path_parameters: dict[str, str],
        params: dict[str, Any],
    ) -> tuple[int, dict[str, Any], bool]:
        key = request.headers.get("Idempotency-Key") if operation.method == "POST" else None
        if key is not None and key in self._replays:
            replay = self._replays[key]
            if replay.operation_id != operation.operation_id or replay.params != params:
                raise StripeError(
                    400,
                    "idempotency_error",
                    "Keys for idempotent requests can only be used with the same parameters they were first "
                    f"used with. Try using a key other than '{key}' if you meant to execute a different "
                    "request.",
                )
            return replay.status, replay.body, True
        try:
            status, body = 200, self._perform(operation, path_parameters, params)
        except StripeError as error:
            status, body = error.status, error.body
        if key is not None:
            self._replays[key] = _Replay(operation.operation_id, params, status, body)
        return status, body, False

    def _perform(self, operation: Operation, path_parameters: dict[str, str], params: dict[str, Any]) -> Any:
        handler = _SPECIAL.get(operation.operation_id)
        if handler is not None:
            return handler(self.account, path_parameters, params)
        collection, verb = operation.operation_id.split(".")
        resource = COLLECTIONS[collection]
        if verb == "retrieve":
            (object_id,) = path_parameters.values()
            return _expanded(resource, _retrieve(self.account, resource, object_id), params, "")
        page = _page(self.account.all(resource), params, operation.path, _filters(params))
        page["data"] = [_expanded(resource, obj, params, "data.") for obj in page["data"]]
        return page


Handler = Callable[[StripeAccount, dict[str, str], dict[str, Any]], Any]


def _retrieve(account: StripeAccount, resource: str, object_id: str) -> dict[str, Any]:
    found = account.get(resource, object_id)
    if found is None:
        raise StripeError.missing(resource, object_id, param="id")
    return found


def _filters(params: dict[str, Any]) -> dict[str, Any]:
    """The list parameters that pick objects by a field of theirs (`status=all`: every status)."""
    fields = ("customer", "invoice", "subscription", "status", "charge", "payment_intent", "type", "product")
    return {
        name: params[name] for name in fields if name in params and (name, params[name]) != ("status", "all")
    }


def _expanded(resource: str, obj: dict[str, Any], params: dict[str, Any], prefix: str) -> dict[str, Any]:
    """An object as Stripe sends it: an invoice's `payments` only when asked for (`expand[]=payments`), a
    subscription's `discounts` as their ids unless expanded (`expand[]=discounts`)."""
    expand = params.get("expand") or []
    if resource == "invoice" and prefix + "payments" not in expand:
        return {name: value for name, value in obj.items() if name != "payments"}
    if resource == "subscription" and prefix + "discounts" not in expand:
        discounts = [d["id"] if isinstance(d, dict) else d for d in obj.get("discounts") or []]
        return obj | {"discounts": discounts}
    return obj


def _page(
    objects: list[dict[str, Any]], params: dict[str, Any], url: str, filters: dict[str, Any]
) -> dict[str, Any]:
    """Stripe's list: newest first, `limit` (10, at most 100), `starting_after` / `ending_before` an id."""
    limit = int(params.get("limit", 10))
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise StripeError.invalid("This value must be between 1 and 100.", param="limit")
    chosen = [
        item for item in objects if all(_field_matches(item, name, value) for name, value in filters.items())
    ]
    chosen = [item for item in chosen if _created_matches(item, params.get("created"))]
    if "types" in params:
        chosen = [item for item in chosen if item.get("type") in params["types"]]
    chosen.sort(key=lambda item: item.get("created", 0), reverse=True)
    ids = [item["id"] for item in chosen]
    if "starting_after" in params:
        chosen = chosen[_position(ids, params["starting_after"], "starting_after") + 1 :]
    elif "ending_before" in params:
        chosen = chosen[: _position(ids, params["ending_before"], "ending_before")][-limit:]
    return {"object": "list", "data": chosen[:limit], "has_more": len(chosen) > limit, "url": url}


def _field_matches(item: dict[str, Any], name: str, value: Any) -> bool:
    if name == "subscription" and item.get("object") == "invoice":
        details = (item.get("parent") or {}).get("subscription_details") or {}
        return details.get("subscription") == value
    return item.get(name) == value


def _created_matches(item: dict[str, Any], created: Any) -> bool:
    if created is None:
        return True
    if isinstance(created, str):
        return item.get("created") == int(created)
    comparisons = {
        "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b,
        "lt": lambda a, b: a < b,
        "lte": lambda a, b: a <= b,
    }
    return all(comparisons[name](item.get("created", 0), int(bound)) for name, bound in created.items())


def _position(ids: list[str], object_id: str, param: str) -> int:
    if object_id not in ids:
        raise StripeError.invalid(f"No such object: '{object_id}'", param=param, code="resource_missing")
    return ids.index(object_id)


def _lines_of(resource: str) -> Handler:
    def lines(account: StripeAccount, path_parameters: dict[str, str], params: dict[str, Any]) -> Any:
        (object_id,) = path_parameters.values()
        owner = _retrieve(account, resource, object_id)
        return _page(list(owner["lines"]["data"]), params, owner["lines"]["url"], {})

    return lines


_SPECIAL: dict[str, Handler] = {
    "credit_notes.create": lambda account, _, params: credit_notes.create(account, params),
    "credit_notes.preview": lambda account, _, params: credit_notes.preview(account, params),
    "credit_notes.void": lambda account, path, _: credit_notes.void(account, path["id"]),
    "credit_notes.lines.list": _lines_of("credit_note"),
    "invoices.lines.list": _lines_of("invoice"),
}
