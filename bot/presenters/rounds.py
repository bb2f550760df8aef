"""A case's rounds as activity_log recorded them: each note an approver sent back with a question
(`case.revision_requested`), and each answer that started the next round (`case.resubmitted`)."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases.rounds import RESUBMITTED
from agent.graph.state import CaseStatus
from bot.cards.models import RoundView
from engine import schema

SENT_BACK = f"case.{CaseStatus.REVISION_REQUESTED}"


_activity = schema.activity_log.c
# Built once: a card draw runs it (building a statement costs about as much CPU as running it).
_ROUNDS = (
    select(_activity.action, _activity.actor_id, _activity.details)
    .where(
        _activity.entity_type == "case",
        _activity.entity_id == bindparam("case_id"),
        _activity.action.in_((SENT_BACK, RESUBMITTED)),
    )
    .order_by(_activity.id)
)


async def rounds_in(conn: AsyncConnection, case_id: str) -> tuple[RoundView, ...]:
    rows = await conn.execute(_ROUNDS, {"case_id": case_id})
    asked = []
    answers = []
    for row in rows:
        if row.action == SENT_BACK and (row.details or {}).get("round"):
            asked.append(row.details["round"])
        elif row.action == RESUBMITTED:
            answers.append((str(row.details.get("answer", "")), str(row.actor_id)))
    return tuple(
        RoundView(
            round=int(r["round"]),
            credit_note_id=str(r["credit_note_id"]),
            asked_by=str(r["asked_by"]),
            question=str(r["question"]),
            answer=answers[i][0] if i < len(answers) else None,
            answered_by=answers[i][1] if i < len(answers) else None,
        )
        for i, r in enumerate(asked)
    )
