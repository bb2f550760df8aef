"""A two-fault account on the seeded ledger: a scenario's own fault, plus a second charge on another of the
customer's invoices (the card charged twice, three minutes apart), so the audit finds two overpaid
invoices. Shared by the agent-level and the Slack tests of "settle the whole account"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from engine import schema

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "default"


@dataclass(frozen=True)
class TwoFaults:
    customer_id: str
    question: str  # the scenario's complaint, about its own fault
    asked_invoice: str  # the invoice the complaint is about
    asked_overcharge: str
    other_invoice: str  # the invoice charged twice
    other_overcharge: str


def scenario_file(name: str) -> dict[str, Any]:
    return json.loads((SCENARIOS / f"{name}.json").read_text())


async def charge_twice(engine: AsyncEngine, invoice_id: str) -> str:
    """A second successful payment of the invoice's first one; returns the amount."""
    payments = schema.payments.c
    async with engine.begin() as conn:
        first = (
            await conn.execute(
                select(schema.payments)
                .where(payments.invoice_id == invoice_id)
                .order_by(payments.id)
                .limit(1)
            )
        ).one()
        await conn.execute(
            insert(schema.payments).values(
                id=f"{first.id}-R2",
                invoice_id=invoice_id,
                amount=first.amount,
                status="succeeded",
                attempted_at=first.attempted_at + timedelta(minutes=3),
                gateway_ref=f"{first.gateway_ref}r2",
            )
        )
    return f"{Decimal(first.amount):.2f}"


async def two_fault_account(engine: AsyncEngine, name: str = "S021") -> TwoFaults:
    """Scenario `name`'s customer with a second fault: the card charged twice on an earlier invoice."""
    sc = scenario_file(name)
    asked = sc["truth"]["invoice_ids"][0]
    invoices, payments = schema.invoices.c, schema.payments.c
    async with engine.connect() as conn:
        earlier = (
            await conn.execute(
                select(invoices.id)
                .where(
                    invoices.customer_id == sc["customer_id"],
                    invoices.id != asked,
                    invoices.total > 0,
                    select(payments.id).where(payments.invoice_id == invoices.id).exists(),
                )
                .order_by(invoices.issued_at)
                .limit(1)
            )
        ).scalar_one()
    amount = await charge_twice(engine, earlier)
    return TwoFaults(sc["customer_id"], sc["question"], asked, sc["truth"]["overcharge"], earlier, amount)
