"""The read-only tools: the only tools a model ever sees, and the ones the offline auditor calls too.

Every call is scoped to the case's customer (another customer's invoice is an error, not data), has its
arguments validated by pydantic, and is written to audit_log with the case id and the actor.

`READ_TOOLS` is the one registry: the graph's model is offered its specs (`openai_tool_specs`), and
`billsleuth mcp` serves the same specs to outside assistants (agent/mcp_server.py), where no case names the
customer, so each call names it as its first argument (`call_tool_for_customer`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.graph.tool_context import ToolContext, ToolError, ToolResult
from agent.graph.tool_json import check_json, invoice_header, invoice_with_lines, iso_day, money_text
from engine.billing import local_date
from engine.diff import InvoiceCheck, check_ledger, ledger_as_of
from engine.ledger import UnknownCustomer, load_ledger, load_price_book
from engine.model import CustomerLedger, Invoice, PriceBook

log = logging.getLogger(__name__)

# Ids are the ledger's own, any text (seed 002's INV-0001-05, a billing system's in_1PzQ…): a call is
# checked against the ledger, not against a shape; only its length is bounded.
ID_MAX = 200

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
                "start_date": iso_day(s.start_date),
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
                "amount": money_text(p.amount),
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
            {"id": p.id, "name": p.name, "interval": p.interval, "unit_price": money_text(p.unit_price)}
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
                "valid_from": iso_day(r.valid_from),
                "valid_to": iso_day(r.valid_to),
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
    await ctx.audit(result)
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
        await refused.audit(result)
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
