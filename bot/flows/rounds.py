"""Request changes, the requester's side: the answer to an approver's question — a mention of the bot in
the case's thread, or the Resubmit button's modal — starts the next round. It gets a new message in the
thread (progress, then the new card), so the old card keeps showing what was sent back and why.

Only the case's requester answers; anyone else's mention in the thread is an ordinary mention.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agent.cases.rounds import NotWaitingForAnswer
from agent.graph.state import CaseStatus
from approvals.models import Rule
from bot import store
from bot.cards.models import RoundView
from bot.cards.rounds import answer_modal
from bot.flows.one_person import refusal, tell
from bot.flows.progress import start_progress
from bot.flows.show import show_case_result
from bot.grammar import strip_bot_mention
from bot.presenters.rounds import rounds_in
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)


async def answer_in_thread(
    runtime: BotRuntime, event: Mapping[str, Any], event_id: str, bot_user_id: str | None
) -> bool:
    """A mention in the thread of a case waiting for its requester's answer, by that requester, is the
    answer: True when it was (and is taken, once per event), False for an ordinary mention."""
    thread_ts = event.get("thread_ts")
    if not thread_ts:
        return False
    channel, user = str(event["channel"]), str(event["user"])
    waiting = await store.case_waiting_in_thread(runtime.engine, channel, str(thread_ts))
    if waiting is None or waiting[1] != user:
        return False
    case_id = waiting[0]
    if not await store.claim(runtime.engine, event_id, case_id):
        return True  # a redelivery of an answer already taken
    answer = strip_bot_mention(str(event.get("text") or ""), bot_user_id)
    await next_round(runtime, case_id, answer, user, channel=channel, thread_ts=str(thread_ts))
    return True


async def ask_for_answer(runtime: BotRuntime, case_id: str, user_id: str, trigger_id: str) -> None:
    """The Resubmit button: the answer modal at once (the trigger_id lives three seconds) — for the
    requester of a case still waiting; anyone else is told why not, alone."""
    row = await runtime.service.case_row(case_id)
    async with runtime.engine.connect() as conn:
        rounds = await rounds_in(conn, case_id)
    why = _why_not(row, user_id, rounds)
    if why is not None:
        runtime.start(
            tell(runtime, user_id, refusal(*why), channel=row.channel, thread_ts=row.thread_ts),
            name=f"tell {user_id}",
        )
        return
    await runtime.client.views_open(trigger_id=trigger_id, view=answer_modal(case_id, rounds[-1]))


async def next_round(
    runtime: BotRuntime, case_id: str, answer: str, user_id: str, *, channel: str, thread_ts: str
) -> dict[str, Any] | None:
    """Take the answer, then investigate again in a new message of the thread. Returns the case JSON."""
    row = await runtime.service.case_row(case_id)
    why = _why_not(row, user_id, None)
    if why is None:
        try:
            await runtime.service.accept_answer(case_id, answer=answer, by=user_id)
        except (NotWaitingForAnswer, ValueError) as error:  # answered meanwhile, or a blank answer
            why = (Rule.NOT_WAITING_FOR_AN_ANSWER, str(error))
    if why is not None:
        await tell(runtime, user_id, refusal(*why), channel=channel, thread_ts=thread_ts)
        return None
    live = await start_progress(
        runtime,
        case_id=case_id,
        channel=channel,
        thread_ts=thread_ts,
        customer_id=row.customer_id or "?",
        requester=row.requester,
    )
    if live.ts is None:  # the thread's status shows this round: its card is a new reply
        await store.forget_message(runtime.engine, case_id)
    async with runtime.investigations:
        case = await runtime.service.run_round(case_id, message_ts=live.ts, on_progress=live.on_progress)
    revision = await live.finish()
    await show_case_result(runtime, case, steps=live.steps, revision=revision)
    return case


def _why_not(row: Any, user_id: str, rounds: Sequence[RoundView] | None) -> tuple[Rule, str] | None:
    """Why this person cannot answer for this case now, as (rule, reason); None when they can. `rounds`:
    the case's rounds when the caller read them (the Resubmit button needs the last one's question)."""
    if row.status != CaseStatus.REVISION_REQUESTED or (rounds is not None and not rounds):
        return Rule.NOT_WAITING_FOR_AN_ANSWER, f"case {row.id} is not waiting for an answer"
    if user_id != row.requester:
        return (
            Rule.ONLY_THE_REQUESTER_ANSWERS,
            f"only the requester of case {row.id} answers its approver's question",
        )
    return None
