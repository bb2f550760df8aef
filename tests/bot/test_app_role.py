"""The bot as operators run it: logged in as a member of billsleuth_app, not as the schema owner.

Flows that write many kinds of rows — cases and graph checkpoints, notes and votes, the outbox, approver
notices, the activity chain, the findings digest, the slash command — run here again, each test exactly as
its own module defines it, but with this module's `ready_db_url`: the seeded ledger reached as a login in
billsleuth_app. A privilege the bot needs and the role lacks fails them here. (The whole bot suite passed
on that login too when this was written; tests/bot/conftest.py keeps the owner's URL for tests that set
up what only an owner may.)"""

from __future__ import annotations

import pytest

from tests.bot import test_approver_notices, test_decisions, test_findings_digest, test_slash_and_home
from tests.pg import Login

# Collected here again (pytest runs every test function a module holds), with the module fixtures they use.
test_approval_as_the_app_role = (
    test_decisions.test_two_person_approval_issues_and_posts_the_reply_with_the_amount
)
test_notices_as_the_app_role = (
    test_approver_notices.test_each_approver_gets_one_notice_one_reminder_and_sees_who_decided
)
test_digest_as_the_app_role = test_findings_digest.test_open_case_opens_it_in_the_digests_thread_once
digest_bot, signed = test_findings_digest.digest_bot, test_findings_digest.signed
test_slash_as_the_app_role = test_slash_and_home.test_case_list_show_approve_through_the_slash_command


@pytest.fixture
async def ready_db_url(seeded_db_url: str, app_login: Login) -> str:
    """The seeded ledger reached as a login in billsleuth_app."""
    return app_login.url(seeded_db_url)
