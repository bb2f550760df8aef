"""A case's rounds as activity_log recorded them: each note an approver sent back with a question
(`case.revision_requested`), and each answer that started the next round (`case.resubmitted`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.cases import RESUBMITTED
from agent.state import CaseStatus
from bot.cards.models import RoundView
from engine import schema

SENT_BACK = f"case.{CaseStatus.REVISION_REQUESTED}"


async def rounds_in(conn: AsyncConnection, case_id: str) -> tuple[RoundView, ...]:
    log = schema.activity_log.c
    rows = await conn.execute(
        select(log.action, log.actor_id, log.details)
        .where(log.entity_type == "case", log.entity_id == case_id, log.action.in_((SENT_BACK, RESUBMITTED)))
        .order_by(log.id)
    )
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
