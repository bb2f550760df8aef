"""A model that stalls holds no investigation slot past BILLSLEUTH_CASE_TIMEOUT: with one slot, the stalled
case escalates at the limit and the next complaint is investigated to its end."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import select

from agent.graph.configuration import Configuration
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from tests.bot.helpers import CHANNEL, SECRET, bot_replies, mention, offline_bot
from tests.openai_stub import Delay, OpenAIStub, Step, call, say
from tests.test_llm import FAULTY, correct_model, scenario

LIMIT = 2.0  # room for the first model turn on a busy machine; far below the stall's 60 s
REASON = f"the investigation took longer than {LIMIT:g} s; a person takes it from here"


async def test_a_stalled_model_case_escalates_at_the_limit_and_frees_the_only_slot(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    stalled, waiting = scenario(FAULTY), scenario(FAULTY, nth=1)
    script: list[Step] = [
        call("list_invoices"),
        Delay(60.0, then=say("too late")),  # the model stalls, within the request timeout
        *correct_model(waiting["truth"]),
    ]
    async with OpenAIStub(script) as stub:
        configuration = Configuration(
            investigator="llm",
            model="stub-model",
            base_url=stub.base_url,
            api_key="test",
            request_timeout_s=30.0,
            max_retries=0,
            case_timeout_s=LIMIT,
        )
        async with (
            offline_bot(
                ready_db_url,
                slack,
                configuration=configuration,
                max_investigations=1,  # one slot: the second case waits for the first to let go
            ) as bot,
            SignedClient(bot.url, SECRET) as client,
        ):
            started = time.monotonic()
            first = mention(slack, f"{stalled['customer_id']} {stalled['question']}")
            second = mention(slack, f"{waiting['customer_id']} {waiting['question']}", user="U0SUPPORT2")
            assert (await client.send(first)).status == 200
            # The stalled script is the first case's: let it take the only slot before the second arrives.
            while not stub.requests and time.monotonic() - started < 10:
                await asyncio.sleep(0.01)
            assert (await client.send(second)).status == 200
            await bot.settled(timeout=20.0)
            took = time.monotonic() - started
            async with bot.runtime.engine.connect() as conn:
                cases = (await conn.execute(select(schema.cases).order_by(schema.cases.c.id))).all()

    assert took < 20.0  # not the model's 60 s
    assert [(c.status, c.escalation_reason) for c in cases] == [
        ("escalated", REASON),
        ("awaiting_approval", None),
    ]
    # Each case's thread shows its ending: the stalled one says why a person takes it.
    (stalled_card,) = bot_replies(slack, CHANNEL, first["event"]["ts"])
    assert REASON in str(stalled_card.to_slack())
    assert bot_replies(slack, CHANNEL, second["event"]["ts"])
