"""The cases row: the quick-read summary of a case (the graph's checkpoints hold its full state). Read it,
show it as DESIGN.md's case JSON, and copy a graph run's outcome into it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.cases.runner import CaseRunner
from agent.graph.state import CaseStatus
from agent.model.costs import case_model_cost
from approvals import activity, queries
from engine import schema
from engine.db import reading

NOTE_LESS = (CaseStatus.EXPLAINED, CaseStatus.NEEDS_CUSTOMER)  # statuses whose case JSON shows no note

# Built once: every card draw and every step of a case reads its row, several times a mention.
_CASE_ROW = select(schema.cases).where(schema.cases.c.id == bindparam("case_id"))


class CaseNotFound(LookupError):
    pass


async def case_row_in(conn: AsyncConnection, case_id: str) -> Any:
    """The case's row, read on the caller's connection. Unknown id → CaseNotFound."""
    row = (await conn.execute(_CASE_ROW, {"case_id": case_id})).first()
    if row is None:
        raise CaseNotFound(f"no case {case_id!r}")
    return row


async def case_row(engine: AsyncEngine, case_id: str) -> Any:
    async with reading(engine) as conn:
        return await case_row_in(conn, case_id)


async def show_case(engine: AsyncEngine, case_id: str) -> dict[str, Any]:
    """The case JSON, as the row and the case's latest note are now."""
    async with reading(engine) as conn:
        row = await case_row_in(conn, case_id)
        model_cost = await case_model_cost(conn, case_id)
        notes = await queries.credit_notes_for_case_in(conn, case_id)  # one checkout for the three
    return case_json(row, notes[-1].summary() if notes else None, model_cost)


async def sync_case(
    runner: CaseRunner, case_id: str, values: dict[str, Any] | None = None, *, note_read_by_run: bool = False
) -> dict[str, Any]:
    """Copy the graph's outcome into the cases row (the quick-read summary) and return the case JSON.

    `values`: the state a graph run under this case's lock just returned; else the last checkpoint's.
    `note_read_by_run`: that run ended by reading the case's latest note (a resume: the decision's node
    reads it after the vote and after issuing), so its `credit_note` is shown as it is, not read again."""
    if values is None:
        values = (await runner.state_of(case_id)).values
    status = values.get("status") or CaseStatus.INVESTIGATING
    async with runner.engine.begin() as conn:
        before = (
            await conn.execute(select(schema.cases.c.status).where(schema.cases.c.id == case_id))
        ).scalar_one()
        row = (
            await conn.execute(
                update(schema.cases)
                .where(schema.cases.c.id == case_id)
                .values(
                    customer_id=values.get("customer_id"),
                    status=status,
                    findings=_stored_findings(values),
                    reply=values.get("reply"),
                    escalation_reason=values.get("escalation_reason"),
                    updated_at=func.now(),
                )
                .returning(*schema.cases.c)
            )
        ).one()
        if before != status:
            details = {"from": before, "reason": values.get("escalation_reason")}
            if status == CaseStatus.REVISION_REQUESTED:  # the round sent back, and the question asked
                details["round"] = (values.get("rounds") or [None])[-1]
            await activity.record(conn, "system", "billsleuth", f"case.{status}", "case", case_id, details)
    # Read after the commit: an activity row holds the log's head until its transaction ends, and
    # every other appender (both processes) waits for it. Still under the case lock.
    async with reading(runner.engine) as conn:
        if note_read_by_run:
            note = values.get("credit_note")
        else:
            notes = await queries.credit_notes_for_case_in(conn, case_id)
            note = notes[-1].summary() if notes else None
        model_cost = await case_model_cost(conn, case_id)
    return case_json(row, note, model_cost)


def case_json(
    row: Any, note: dict[str, Any] | None, model_cost: dict[str, Any] | None = None
) -> dict[str, Any]:
    """DESIGN.md's case shape. A model-backed case also carries `model_cost` (`{input_tokens,
    output_tokens, cost}`, agent/model/costs.py); a case the offline auditor took over from the model (the
    month's model budget) carries `investigator_note` saying so. `note`: the summary of the case's latest
    credit note (CreditNoteView.summary())."""
    findings = row.findings
    shown = {
        "case_id": row.id,
        "customer_id": row.customer_id,
        "status": row.status,
        "findings": (
            {
                key: findings[key]
                for key in ("root_cause", "invoice_ids", "overcharge", "expected_action", "reasoning")
            }
            if findings
            else None
        ),
        # An explaining round after a note was sent back has no note of its own.
        "credit_note": note if note and row.status not in NOTE_LESS else None,
        "reply": row.reply,
        "escalation_reason": row.escalation_reason,
        "requester": row.requester,  # who asked: a Slack id (from the CLI, --as names it)
        "other_findings": [
            {key: other[key] for key in ("invoice_id", "root_cause", "overcharge")}
            for other in (findings or {}).get("other_findings", [])
        ],
    }
    if model_cost is not None:
        shown["model_cost"] = model_cost
    if (findings or {}).get("investigator_note"):
        shown["investigator_note"] = findings["investigator_note"]
    return shown


def _stored_findings(values: dict[str, Any]) -> dict[str, Any] | None:
    """The findings the cases row keeps: verified ones only, with the account's other verified
    overcharges beside them (the row's findings JSONB holds both; no column of their own)."""
    if not values.get("verified") or not values.get("findings"):
        return None
    stored = {**values["findings"], "other_findings": list(values.get("other_findings") or [])}
    if values.get("investigator_note"):  # why the offline auditor investigated (the model budget)
        stored["investigator_note"] = values["investigator_note"]
    return stored
