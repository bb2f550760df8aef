"""BILLSLEUTH_LOG_FORMAT=json through the real Bolt app: a signed mention's case logs lines that name both
the case and the Slack event that opened it."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from engine import schema
from engine.logcontext import log_handler
from tests.bot.helpers import first_scenario, mention


@pytest.fixture
def json_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The root logger's lines as `billsleuth bot` writes them with BILLSLEUTH_LOG_FORMAT=json."""
    monkeypatch.setenv("BILLSLEUTH_LOG_FORMAT", "json")
    stream = io.StringIO()
    handler, root = log_handler(stream=stream), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


async def test_a_mentions_case_logs_its_case_id_and_event_id(
    json_log: io.StringIO, slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}")
    assert (await client.send(event)).status == 200
    await bot.settled()
    async with bot.runtime.engine.connect() as conn:
        case_id = (await conn.execute(select(schema.cases.c.id))).scalar_one()

    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]  # each line one object
    of_the_case = [line for line in lines if line.get("case_id") == case_id]
    assert any(line["message"] == f"case {case_id} investigated: awaiting_approval" for line in of_the_case)
    assert {line["event_id"] for line in of_the_case} == {event["event_id"]}
    assert all(line.get("case_id") in (case_id, None) for line in lines)
