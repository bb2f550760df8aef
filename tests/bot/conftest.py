"""One real bot per test: the Bolt app over HTTP on 127.0.0.1, the recording Slack Web API, a fresh copy
of the seeded ledger, and the offline investigator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from approvals.config import ApprovalSettings
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from tests.bot.helpers import FINANCE, SECRET, SUPPORT, offline_bot


@pytest.fixture
async def slack() -> AsyncIterator[SlackRecorder]:
    async with SlackRecorder() as recorder:
        yield recorder


@pytest.fixture
async def ready_db_url(seeded_db_url: str) -> str:
    """The seeded ledger, checkpoint tables included (the template is what `billsleuth db upgrade` leaves)."""
    return seeded_db_url


@pytest.fixture
async def bot(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[RunningBot]:
    async with offline_bot(ready_db_url, slack) as running:
        yield running


@pytest.fixture
async def client(bot: RunningBot) -> AsyncIterator[SignedClient]:
    async with SignedClient(bot.url, SECRET) as signed:
        yield signed


@pytest.fixture
async def guarded(ready_db_url: str, slack: SlackRecorder) -> AsyncIterator[RunningBot]:
    """A bot whose BILLSLEUTH_SUPPORT names SUPPORT: only support and approvers open and read cases."""
    settings = ApprovalSettings(
        approvers=frozenset(FINANCE), two_person_threshold=Decimal("300.00"), support=frozenset({SUPPORT})
    )
    async with offline_bot(ready_db_url, slack, policy=settings) as running:
        yield running


@pytest.fixture
async def guarded_client(guarded: RunningBot) -> AsyncIterator[SignedClient]:
    async with SignedClient(guarded.url, SECRET) as signed:
        yield signed
