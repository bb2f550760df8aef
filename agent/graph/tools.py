"""The read-only tools: the only tools a model ever sees, and the ones the offline auditor calls too.

Every call is scoped to the case's customer (another customer's invoice is an error, not data), has its
arguments validated by pydantic, and is written to audit_log with the case id and the actor.

`READ_TOOLS` is the one registry: the graph's model is offered its specs (`openai_tool_specs`), and
`billsleuth mcp` serves the same specs to outside assistants (agent/mcp_server.py), where no case names the
customer, so each call names it as its first argument (`call_tool_for_customer`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import schema
from engine.billing import local_date
from engine.db import reading
from engine.diff import InvoiceCheck, check_ledger, ledger_as_of
from engine.ledger import UnknownCustomer, load_ledger, load_price_book
from engine.model import CustomerLedger, Invoice, PriceBook
from engine.money import fmt

log = logging.getLogger(__name__)

# Ids are the ledger's own, any text (seed 002's INV-0001-05, a billing system's in_1PzQ…): a call is
# checked against the ledger, not against a shape; only its length is bounded.
ID_MAX = 200

ProgressCallback = Callable[[dict[str, Any]], None]


class ToolError(Exception):
    """A tool refused the call (bad arguments, unknown or foreign id): the caller sees the message."""


@dataclass
class LedgerCache:
    """The customer's ledger, the price book and the re-billed history, as read once in a case run."""

    ledger: CustomerLedger | None = None
    book: PriceBook | None = None
    checks: dict[str, InvoiceCheck] | None = None


@dataclass
class ToolContext:
    """Who is calling the tools, for which case and customer, and what the calls have read so far.

    Used bare, each call's audit row is written at once. Inside `async with tools:` the rows of the
    block's calls are written together when it ends (one INSERT instead of one round trip per call),
    also when the block fails. With `connection`, the ledger is read on the caller's connection instead
    of a pooled one; audit rows are always committed on their own, so no caller's rollback can erase them.
    """

    engine: AsyncEngine
    case_id: str | None  # None: a call from outside any case (an MCP client)
    customer_id: str
    actor: str  # "agent:offline", "agent:llm", "system:verify", "approver:U123"
    on_progress: ProgressCallback | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # this run's trail, in order
    # One case run reads one ledger: load it once, not once per tool call (shared across the run's nodes).
    cache: LedgerCache = field(default_factory=lambda: LedgerCache(), repr=False)
    connection: AsyncConnection | None = field(default=None, repr=False)
    _unrecorded: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _batching: int = field(default=0, init=False, repr=False)

    async def __aenter__(self) -> ToolContext:
        self._batching += 1
        return self

    async def __aexit__(self, failure: type[BaseException] | None, *_: object) -> None:
        self._batching -= 1
        if self._batching:
            return
        try:
            await self.record_calls()
        except Exception:
            if failure is None:
                raise
            # The block's own error is the one to report; the rows stay buffered for a later write.
            log.exception("could not write the audit rows of %d tool call(s)", len(self._unrecorded))

    async def record_calls(self) -> None:
        """Write the audit rows of the calls made since the last write (a no-op when there are none).
        On failure the rows stay buffered, so a later call can still write them."""
        rows = list(self._unrecorded)
        if not rows:
            return
        # Autocommit: the rows are one statement, so one round trip instead of BEGIN / INSERT / COMMIT.
        async with self.engine.connect() as pooled:
            conn = await pooled.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(insert(schema.audit_log), rows)
        del self._unrecorded[: len(rows)]

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """The caller's connection when one was given, else a pooled one for the block."""
        if self.connection is not None:
            yield self.connection
        else:
            async with reading(self.engine) as conn:
                yield conn

    @property
    def cached_ledger(self) -> CustomerLedger | None:
        return self.cache.ledger


@dataclass(frozen=True)
class ToolResult:
    tool: str
    args: dict[str, Any]
    ok: bool
    data: Any = None
    error: str | None = None

    def for_model(self) -> str:
        return json.dumps(self.data if self.ok else {"error": self.error}, ensure_ascii=False)


# ---- argument models (the JSON schema a model sees comes from these) ----


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InvoiceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    invoice_id: str = Field(
        min_length=1,
        max_length=ID_MAX,
        description='An invoice id of this customer, as the ledger writes it, e.g. "INV-0001-05".',
    )


class PaymentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    invoice_id: str | None = Field(
        default=None, min_length=1, max_length=ID_MAX, description="Only this invoice's payments (optional)."
    )


# ---- helpers that turn ledger objects into plain JSON ----


def _day(value: date | None) -> str | None:
    return value.isoformat() if value else None


def _money(value: Decimal) -> str:
    return fmt(value)


def invoice_header(invoice: Invoice) -> dict[str, Any]:
    return {
        "id": invoice.id,
        "subscription_id": invoice.subscription_id,
        "period_start": _day(invoice.period_start),
        "period_end": _day(invoice.period_end),
        "issued_at": _day(invoice.issued_at),
        "status": invoice.status,
        "subtotal": _money(invoice.subtotal),
        "discount": _money(invoice.discount),
        "tax": _money(invoice.tax),
        "total": _money(invoice.total),
        "currency": invoice.currency,
    }


def invoice_with_lines(invoice: Invoice) -> dict[str, Any]:
    return {
        **invoice_header(invoice),
        "lines": [
            {
                "kind": line.kind,
                "description": line.description,
                "quantity": line.quantity,
                "unit_amount": _money(line.unit_amount),
                "amount": _money(line.amount),
                "period_start": _day(line.period_start),
                "period_end": _day(line.period_end),
                "tax_code": line.tax_code,
            }
            for line in invoice.lines
        ],
    }


def check_json(check: InvoiceCheck) -> dict[str, Any]:
    if not check.should_exist:
        verdict = "should not exist: the billing rules produce no such invoice"
        if check.expected_invoice_id:
            verdict += f" (the rules' invoice for this period is {check.expected_invoice_id})"
    elif check.billing_difference == 0:
        verdict = "billed amount matches the billing rules"
    else:
        verdict = "billed amount differs from the billing rules"
    return {
        "invoice_id": check.invoice_id,
        "period_start": _day(check.period_start),
        "period_end": _day(check.period_end),
        "billed_total": _money(check.billed_total),
        "should_exist": check.should_exist,
        "expected_invoice_id": check.expected_invoice_id,
        "should_bill": _money(check.should_pay),
        "difference": _money(check.billing_difference),
        "paid_total": _money(check.paid_total),
        "successful_payments": check.successful_payments,
        "overcharge": _money(check.overcharge),
        "credited_total": _money(check.credited_total),
        "line_diffs": [
            {
                "kind": d.kind,
                "billed_description": d.billed_description,
                "expected_description": d.expected_description,
                "billed": _money(d.billed),
                "expected": _money(d.expected),
                "difference": _money(d.difference),
            }
            for d in check.line_diffs
        ],
        "expected_lines": invoice_with_lines(check.expected)["lines"] if check.expected else [],
        "verdict": verdict,
    }


# ---- the tools ----


async def _ledger(ctx: ToolContext) -> CustomerLedger:
    if ctx.cache.ledger is None:
        async with ctx.reading() as conn:
            await _load_into_cache(ctx, conn, book=False)
    assert ctx.cache.ledger is not None
    return ctx.cache.ledger


async def _price_book(ctx: ToolContext) -> PriceBook:
    if ctx.cache.book is None:
        async with ctx.reading() as conn:
            ctx.cache.book = await load_price_book(conn)
    return ctx.cache.book


async def ledger_and_book(ctx: ToolContext) -> tuple[CustomerLedger, PriceBook]:
    """The customer's ledger and the price book, read once per case run (one connection for both)."""
    if ctx.cache.ledger is None or ctx.cache.book is None:
        async with ctx.reading() as conn:
            await _load_into_cache(ctx, conn, book=True)
    assert ctx.cache.ledger is not None and ctx.cache.book is not None
    return ctx.cache.ledger, ctx.cache.book


async def _load_into_cache(ctx: ToolContext, conn: AsyncConnection, *, book: bool) -> None:
    if ctx.cache.ledger is None:
        try:
            ctx.cache.ledger = await load_ledger(conn, ctx.customer_id)
        except UnknownCustomer as error:
            raise ToolError(str(error)) from None
    if book and ctx.cache.book is None:
        ctx.cache.book = await load_price_book(conn)


def _own_invoice(ledger: CustomerLedger, invoice_id: str) -> Invoice:
    for invoice in ledger.invoices:
        if invoice.id == invoice_id:
            return invoice
    raise ToolError(f"{invoice_id} is not an invoice of customer {ledger.customer.id}")


async def get_customer(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    ledger = await _ledger(ctx)
    c = ledger.customer
    return {
        "id": c.id,
        "name": c.name,
        "country": c.country,
        "currency": c.currency,
        "tax_region": c.tax_region,
        "subscriptions": [
            {
                "id": s.id,
                "start_date": _day(s.start_date),
                "billing_anchor_day": s.billing_anchor_day,
                "coupon_id": s.coupon_id,
            }
            for s in ledger.subscriptions
        ],
    }


async def list_invoices(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    ledger = await _ledger(ctx)
    return {"invoices": [invoice_header(inv) for inv in ledger.invoices]}


async def get_invoice(ctx: ToolContext, args: InvoiceArgs) -> dict[str, Any]:
    return invoice_with_lines(_own_invoice(await _ledger(ctx), args.invoice_id))


async def list_payments(ctx: ToolContext, args: PaymentArgs) -> dict[str, Any]:
    ledger = await _ledger(ctx)
    if args.invoice_id:
        _own_invoice(ledger, args.invoice_id)
    return {
        "payments": [
            {
                "id": p.id,
                "invoice_id": p.invoice_id,
                "amount": _money(p.amount),
                "status": p.status,
                "attempted_at": p.attempted_at.isoformat(),
                "gateway_ref": p.gateway_ref,
            }
            for p in ledger.payments
            if args.invoice_id in (None, p.invoice_id)
        ]
    }


async def list_subscription_events(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    ledger = await _ledger(ctx)
    country = ledger.customer.country
    return {
        "events": [
            {
                "id": ev.id,
                "subscription_id": sub.id,
                "type": ev.type,
                "effective_at": ev.effective_at.isoformat(),
                "customer_local_date": local_date(ev.effective_at, country).isoformat(),
                "payload": ev.payload,
            }
            for sub in ledger.subscriptions
            for ev in sorted(sub.events, key=lambda e: e.effective_at)
        ]
    }


async def get_price_book(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    book = await _price_book(ctx)
    return {
        "plans": [
            {"id": p.id, "name": p.name, "interval": p.interval, "unit_price": _money(p.unit_price)}
            for p in book.plans.values()
        ],
        "coupons": [
            {"id": c.id, "kind": c.kind, "value": f"{c.value}", "duration_months": c.duration_months}
            for c in book.coupons.values()
        ],
        "tax_rates": [
            {
                "code": r.code,
                "region": r.region,
                "rate": f"{r.rate.normalize():f}",
                "valid_from": _day(r.valid_from),
                "valid_to": _day(r.valid_to),
            }
            for r in book.tax_rates
        ],
    }


async def recompute(ctx: ToolContext, invoice_id: str) -> InvoiceCheck:
    ledger, book = await ledger_and_book(ctx)
    _own_invoice(ledger, invoice_id)
    if ctx.cache.checks is None:  # the whole history is re-billed in one pass; each invoice is a lookup
        ctx.cache.checks = {c.invoice_id: c for c in check_ledger(ledger, book, ledger_as_of(ledger))}
    check = ctx.cache.checks.get(invoice_id)
    if check is None:
        raise ToolError(f"{invoice_id} was issued after the ledger's as-of date")
    return check


async def recompute_invoice(ctx: ToolContext, args: InvoiceArgs) -> dict[str, Any]:
    return check_json(await recompute(ctx, args.invoice_id))


class CustomerArgs(BaseModel):
    """What a call from outside a case adds in front of the tool's own arguments: whose ledger to read."""

    model_config = ConfigDict(extra="forbid")
    customer_id: str = Field(
        min_length=1,
        max_length=ID_MAX,
        description='The customer whose ledger to read, as the ledger writes its id, e.g. "C-0007".',
    )


@dataclass(frozen=True)
class ToolSpec:
    """One read-only tool: what the model and MCP clients are shown, and what runs."""

    name: str
    description: str
    args_model: type[BaseModel]
    run: Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]

    def parameters(self, *, customer_first: bool = False) -> dict[str, Any]:
        """The arguments' JSON schema, from `args_model`; `customer_first` puts `customer_id` in front
        (over MCP, where no case names the customer)."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        if not customer_first:
            return schema
        customer = CustomerArgs.model_json_schema()["properties"]["customer_id"]
        schema["properties"] = {"customer_id": customer, **schema.get("properties", {})}
        schema["required"] = ["customer_id", *schema.get("required", [])]
        return schema


READ_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec("get_customer", "The customer's profile and subscriptions.", NoArgs, get_customer),
        ToolSpec("list_invoices", "All invoices of the customer (headers, no lines).", NoArgs, list_invoices),
        ToolSpec("get_invoice", "One invoice of the customer with its lines.", InvoiceArgs, get_invoice),
        ToolSpec(
            "list_payments",
            "Payments of the customer, optionally for one invoice.",
            PaymentArgs,
            list_payments,
        ),
        ToolSpec(
            "list_subscription_events",
            "Subscription events (create, upgrade, downgrade, quantity_change, cancel, pause, resume) "
            "with the customer's local date of each.",
            NoArgs,
            list_subscription_events,
        ),
        ToolSpec(
            "get_price_book",
            "Plans, coupons and tax rates with their validity windows.",
            NoArgs,
            get_price_book,
        ),
        ToolSpec(
            "recompute_invoice",
            "Recompute an invoice with the reference billing rules: billed vs should-have-billed, "
            "the differing lines, paid total, successful payment count, and overcharge = paid − should "
            "have paid.",
            InvoiceArgs,
            recompute_invoice,
        ),
    ]
}


def _digest(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


async def _audit(ctx: ToolContext, result: ToolResult) -> None:
    # Outside a case no case row names the customer the call was scoped to: its row says so itself.
    args = result.args if ctx.case_id is not None else {"customer_id": ctx.customer_id, **result.args}
    ctx._unrecorded.append(
        {
            "at": datetime.now(UTC),  # when the call was made, not when its batch was written
            "case_id": ctx.case_id,
            "actor": ctx.actor,
            "tool": result.tool,
            "args": args,
            "ok": result.ok,
            "result_digest": _digest(result.data if result.ok else {"error": result.error}),
        }
    )
    if not ctx._batching:
        await ctx.record_calls()


def _parse_args(raw: dict[str, Any] | str | None) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ToolError(f"arguments are not valid JSON: {error.msg}") from None
    else:
        parsed = raw
    if not isinstance(parsed, dict):
        raise ToolError("arguments must be a JSON object")
    return parsed


async def call_tool(ctx: ToolContext, name: str, raw_args: dict[str, Any] | str | None = None) -> ToolResult:
    """Validate, run, audit and report one read-only tool call. Never raises for the caller's mistakes."""
    args: dict[str, Any] = {}
    try:
        args = _parse_args(raw_args)
        spec = READ_TOOLS.get(name)
        if spec is None:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(READ_TOOLS)}")
        validated = _validate(spec.args_model, name, args)
        result = ToolResult(name, args, True, await spec.run(ctx, validated))
    except ToolError as error:
        result = ToolResult(name, args, False, error=str(error))
    await _audit(ctx, result)
    ctx.calls.append({"tool": name, "args": args, "ok": result.ok, "error": result.error})
    if ctx.on_progress:
        ctx.on_progress({"type": "tool", "tool": name, "args": args, "ok": result.ok})
    return result


def _validate(model: type[BaseModel], name: str, args: dict[str, Any]) -> BaseModel:
    try:
        return model.model_validate(args)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise ToolError(f"invalid arguments for {name}: {where}: {first['msg']}") from None


async def call_tool_for_customer(
    engine: AsyncEngine, actor: str, name: str, raw_args: dict[str, Any] | str | None = None
) -> ToolResult:
    """One read-only tool call from outside any case (an MCP client): `customer_id` in the arguments
    scopes it as a case's customer would; the rest is `call_tool`'s (validation, scoping, audit row)."""
    args: dict[str, Any] = {}
    try:
        args = _parse_args(raw_args)
        customer_id = _validate(CustomerArgs, name, {"customer_id": args.get("customer_id")}).customer_id
    except ToolError as error:  # refused before any scope: still on the trail, under what was sent
        rest = {k: v for k, v in args.items() if k != "customer_id"}
        refused = ToolContext(engine, None, str(args.get("customer_id", "")), actor)
        result = ToolResult(name, rest, False, error=str(error))
        await _audit(refused, result)
        return result
    tools = ToolContext(engine, None, customer_id, actor)
    return await call_tool(tools, name, {k: v for k, v in args.items() if k != "customer_id"})


def openai_tool_specs() -> list[dict[str, Any]]:
    """The function-calling schema for the read tools (submit_findings is added by the LLM investigator)."""
    return [
        {
            "type": "function",
            "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters()},
        }
        for spec in READ_TOOLS.values()
    ]
