"""Finance is told of the model budget: a case run outside the bot (a CLI process, another service) crosses
80% and then 100% of the month's budget; the running bot posts one notice per threshold — in the finance
channel when there is one, else to each approver by DM — and never again, a restarted bot included."""

from __future__ import annotations

import asyncio
from typing import Any

from agent.cases.service import case_service
from agent.graph.configuration import Configuration
from agent.model.budget import month_of
from bot.server import running_bot
from bot.slack_testing import SlackRecorder
from bot.slack_testing.recorder import dm_channel
from tests.bot.helpers import FINANCE, SECRET, all_text, approval_settings
from tests.openai_stub import OpenAIStub, call
from tests.test_costs import ONE_CALL, budgeted, spend_already
from tests.test_llm import FAULTY, SETTINGS, scenario

FINANCE_CHANNEL = "C0FINANCE"
OPTIONS: dict[str, Any] = dict(
    configuration=Configuration(investigator="offline"), recover=False, expiry_interval=None, outbox_poll=0.2
)


def budget_notices(slack: SlackRecorder, channel: str) -> list[str]:
    """The model-budget notices posted there (the case's own credit-note notice aside)."""
    return [all_text(m.blocks) for m in slack.messages(channel) if m.text.startswith("Model budget for ")]


async def cross_the_budget(db_url: str) -> None:
    """0.45 of 1.00 spent; a model case's three calls (0.20 each) cross 80%, then 100%."""
    await spend_already(db_url, "0.45")
    sc = scenario(FAULTY)
    async with (
        OpenAIStub([call("list_invoices")] * 6, usage=ONE_CALL) as stub,
        case_service(db_url, budgeted(stub), SETTINGS) as service,
    ):
        await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])


async def test_finance_hears_of_each_threshold_once_in_the_finance_channel(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = slack.settings(signing_secret=SECRET).model_copy(update={"finance_channel": FINANCE_CHANNEL})
    month = month_of()
    async with running_bot(ready_db_url, settings, approval_settings=approval_settings(), **OPTIONS):
        await cross_the_budget(ready_db_url)
        await slack.wait_until(lambda: len(budget_notices(slack, FINANCE_CHANNEL)) == 2)
        warning, spent = budget_notices(slack, FINANCE_CHANNEL)
        assert f"The model budget for {month} is 80% used" in warning and "$0.85 of $1.00" in warning
        assert f"The model budget for {month} is spent" in spent and "$1.05 of $1.00" in spent
        assert "billsleuth budget raise" in spent
        await asyncio.sleep(1.0)
    async with running_bot(ready_db_url, settings, approval_settings=approval_settings(), **OPTIONS):
        await asyncio.sleep(1.0)  # a restarted bot does not tell it again
    assert len(budget_notices(slack, FINANCE_CHANNEL)) == 2
    assert all(budget_notices(slack, dm_channel(user)) == [] for user in FINANCE)


async def test_without_a_finance_channel_each_approver_hears_by_dm(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = slack.settings(signing_secret=SECRET)
    await cross_the_budget(ready_db_url)  # while no bot runs: told once one starts
    async with running_bot(ready_db_url, settings, approval_settings=approval_settings(), **OPTIONS):
        await slack.wait_until(
            lambda: all(len(budget_notices(slack, dm_channel(user))) == 2 for user in FINANCE)
        )
        await asyncio.sleep(0.6)
    assert [len(budget_notices(slack, dm_channel(user))) for user in FINANCE] == [2, 2, 2]
