"""Who may read, who may open a case, one workspace, bots never decide, and replays — through the real Bolt
app over HTTP with signed payloads (issue 12, items 3–6)."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings, SettingsError
from approvals.models import Rule
from bot.cards import APPROVE_ACTION_ID
from bot.cards.investigate_modal import (
    CUSTOMER_ACTION_ID,
    CUSTOMER_BLOCK_ID,
    WORDS_ACTION_ID,
    WORDS_BLOCK_ID,
)
from bot.config import SlackConfigError
from bot.server import RunningBot, running_bot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SECRET,
    SUPPORT,
    all_text,
    card_of,
    count,
    first_scenario,
    mention,
    offline_bot,
    open_case,
    outbox_delivered,
    snapshot,
)

ALICE, BOB, _ = FINANCE
FOREIGN = p.Workspace(team_id="T0FOREIGN1", team_domain="elsewhere", api_app_id="A0FOREIGN1")


async def slash(
    slack: SlackRecorder,
    client: SignedClient,
    bot: RunningBot,
    words: str,
    user: str,
    workspace: p.Workspace = p.DEMO,
) -> list[dict[str, Any]]:
    """Type `/billsleuth <words>`; what was sent to the command's response_url."""
    before = len(slack.calls("response_url"))
    payload = p.slash_command(
        words, user=user, channel=CHANNEL, response_url=slack.response_url(), workspace=workspace
    )
    assert (await client.send(payload)).status == 200
    await bot.settled()
    return [c.args for c in slack.calls("response_url")[before:]]


async def activity_actions(bot: RunningBot) -> list[str]:
    async with bot.runtime.engine.connect() as conn:
        rows = await conn.execute(select(schema.activity_log.c.action).order_by(schema.activity_log.c.id))
        return list(rows.scalars())


# ---- 3. reading is a permission -------------------------------------------------------------------------


async def test_a_non_approver_cannot_read_notes_through_show_or_list(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    opened = await open_case(slack, client, bot, sc)
    assert opened.credit_note_id is not None
    async with bot.runtime.engine.connect() as conn:
        name = (
            await conn.execute(
                select(schema.customers.c.name).where(schema.customers.c.id == sc["customer_id"])
            )
        ).scalar_one()
    for words in (f"show {opened.credit_note_id}", "list"):
        (answer,) = await slash(slack, client, bot, words, OUTSIDER)
        said = answer["text"] + all_text(answer.get("blocks") or [])
        assert Rule.NOT_ALLOWED_TO_READ.value in said
        assert sc["truth"]["overcharge"] not in said and name not in said
        assert sc["customer_id"] not in said and sc["truth"]["invoice_ids"][0] not in said
        assert answer["response_type"] == "ephemeral"
    (listed,) = await slash(slack, client, bot, "list", ALICE)  # an approver still reads it
    assert opened.credit_note_id in listed["text"]


async def test_support_members_read_notes_and_others_are_refused(
    slack: SlackRecorder, guarded: RunningBot, guarded_client: SignedClient
) -> None:
    opened = await open_case(slack, guarded_client, guarded, first_scenario(action="credit_note"))
    (shown,) = await slash(slack, guarded_client, guarded, f"show {opened.credit_note_id}", SUPPORT)
    assert opened.credit_note_id in shown["text"] and Rule.NOT_ALLOWED_TO_READ.value not in shown["text"]
    (refused,) = await slash(slack, guarded_client, guarded, "list", OUTSIDER)
    assert Rule.NOT_ALLOWED_TO_READ.value in refused["text"]


async def test_with_support_set_only_support_and_approvers_open_cases(
    slack: SlackRecorder, guarded: RunningBot, guarded_client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    event = mention(slack, f"{sc['customer_id']} {sc['question']}", user=OUTSIDER)
    assert (await guarded_client.send(event)).status == 200
    (answer,) = await slash(
        slack, guarded_client, guarded, f"case {sc['customer_id']} {sc['question']}", OUTSIDER
    )
    forwarded = slack.post_user_message(CHANNEL, f"{sc['customer_id']}: {sc['question']}", user="U0CUSTOMER")
    shortcut = p.message_action(forwarded.to_slack(), user=OUTSIDER, channel=CHANNEL)
    assert (await guarded_client.send(shortcut)).status == 200
    await guarded.settled()
    assert await count(guarded, schema.cases) == 0
    assert slack.views("modal") == []
    assert [c for c in slack.calls("chat.postMessage")] == []
    assert Rule.NOT_ALLOWED_TO_OPEN.value in answer["text"]
    refusals = slack.ephemerals(OUTSIDER)
    assert len(refusals) == 2 and all(Rule.NOT_ALLOWED_TO_OPEN.value in r.text for r in refusals)
    await open_case(slack, guarded_client, guarded, sc, user=SUPPORT)  # support still opens one
    assert await count(guarded, schema.cases) == 1


# ---- 4. one workspace --------------------------------------------------------------------------------------


async def test_a_click_from_another_workspace_is_dropped_and_logged(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    card = snapshot(card_of(slack, opened))
    await outbox_delivered(bot)  # the approvers' notices of the new note are out before the clicks
    calls_before = len(slack.calls())
    foreign_click = p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID, workspace=FOREIGN)
    assert (await client.send(foreign_click)).status == 200
    other_app = p.Workspace(api_app_id="A0OTHERAPP")
    assert (
        await client.send(
            p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID, workspace=other_app)
        )
    ).status == 200
    await bot.settled()
    assert await count(bot, schema.approvals) == 0
    assert slack.calls()[calls_before:] == []  # no reply of any kind
    assert (await activity_actions(bot)).count("foreign_workspace") == 2


async def test_mentions_and_commands_from_another_workspace_open_nothing(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    typed = slack.post_user_message(
        CHANNEL, p.mention_text(f"{sc['customer_id']} {sc['question']}"), user=SUPPORT
    )
    event = p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts, workspace=FOREIGN)
    assert (await client.send(event)).status == 200
    answers = await slash(slack, client, bot, f"case {sc['customer_id']} {sc['question']}", SUPPORT, FOREIGN)
    assert answers == []
    assert await count(bot, schema.cases) == 0
    assert slack.calls("chat.postMessage") == [] and slack.ephemerals() == []
    assert (await activity_actions(bot)).count("foreign_workspace") == 2


# ---- one organisation: Slack Connect (issue 25, item 7) ---------------------------------------------------

PARTNER = "U0PARTNER1"  # a member of another organisation, in a Slack Connect channel with us
PARTNER_TEAM = "T0PARTNER1"
GRID = p.Workspace(enterprise_id="E0BILLSLTH", enterprise_install=True)  # installed org-wide on a Grid
SISTER = p.Workspace(
    team_id="T0SISTER01", team_domain="sister", enterprise_id="E0BILLSLTH", enterprise_install=True
)


async def foreign_teams(bot: RunningBot) -> list[str]:
    """The team each dropped payload's activity row names, in order."""
    log = schema.activity_log.c
    async with bot.runtime.engine.connect() as conn:
        rows = await conn.execute(
            select(log.entity_id).where(log.action == "foreign_workspace").order_by(log.id)
        )
        return list(rows.scalars())


async def test_a_member_of_another_org_in_a_shared_channel_opens_nothing_and_hears_nothing(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    words = f"{sc['customer_id']} {sc['question']}"
    typed = slack.post_user_message(CHANNEL, p.mention_text(words), user=PARTNER)
    mentioned = p.app_mention(typed.text, user=PARTNER, channel=CHANNEL, ts=typed.ts)
    forwarded = slack.post_user_message(CHANNEL, f"{sc['customer_id']}: {sc['question']}", user="U0CUSTOMER")
    shortcut = p.message_action(forwarded.to_slack(), user=PARTNER, channel=CHANNEL)
    calls_before = len(slack.calls())
    for payload in (mentioned, shortcut):
        assert (await client.send(p.in_shared_channel(payload, user_team=PARTNER_TEAM))).status == 200
    await bot.settled()
    assert await count(bot, schema.cases) == 0
    # No reply, no modal, no ephemeral: nothing but the bot asking Slack who it is itself (auth.test).
    assert [c.method for c in slack.calls()[calls_before:]] == ["auth.test"]
    assert await foreign_teams(bot) == [PARTNER_TEAM, PARTNER_TEAM]


async def test_a_member_of_another_org_decides_nothing_even_on_the_allowlist(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    # Someone put a partner's id on BILLSLEUTH_APPROVERS: the click still comes from another organisation.
    policy = ApprovalSettings(
        approvers=frozenset({*FINANCE, PARTNER}), two_person_threshold=Decimal("300.00")
    )
    async with (
        offline_bot(ready_db_url, slack, policy=policy) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        opened = await open_case(
            slack, client, bot, first_scenario(action="credit_note", single_approver=True)
        )
        card = snapshot(card_of(slack, opened))
        await outbox_delivered(bot)
        calls_before = len(slack.calls())
        click = p.click(card, user=PARTNER, channel=CHANNEL, action_id=APPROVE_ACTION_ID)
        assert (await client.send(p.in_shared_channel(click, user_team=PARTNER_TEAM))).status == 200
        await bot.settled()
        assert await count(bot, schema.approvals) == 0
        assert slack.calls()[calls_before:] == []
        assert await foreign_teams(bot) == [PARTNER_TEAM]


async def test_members_of_the_installed_grid_org_are_ours_and_other_orgs_are_not(ready_db_url: str) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    async with (
        SlackRecorder(workspace=GRID) as slack,
        offline_bot(ready_db_url, slack) as bot,
        SignedClient(bot.url, SECRET) as client,
    ):
        # A member of the org (Slack names the org as her team) opens a case in a channel shared with a
        # partner; a member of another Grid org, and one of a plain workspace, open nothing.
        for team in (GRID.enterprise_id, "E0OTHERORG", PARTNER_TEAM):
            typed = slack.post_user_message(
                CHANNEL, p.mention_text(f"{sc['customer_id']} {sc['question']}", GRID), user=SUPPORT
            )
            event = p.app_mention(typed.text, user=SUPPORT, channel=CHANNEL, ts=typed.ts, workspace=GRID)
            assert (await client.send(p.in_shared_channel(event, user_team=str(team)))).status == 200
            await bot.settled()
        assert await count(bot, schema.cases) == 1
        assert await foreign_teams(bot) == ["E0OTHERORG", PARTNER_TEAM]
        (card,) = [m for m in slack.messages(CHANNEL) if m.user == GRID.bot_user_id and m.blocks]
        # An approver from a sister workspace of the same org decides; a partner's click does nothing.
        partner = p.click(
            snapshot(card), user=FINANCE[1], channel=CHANNEL, action_id=APPROVE_ACTION_ID, workspace=GRID
        )
        assert (await client.send(p.in_shared_channel(partner, user_team=PARTNER_TEAM))).status == 200
        sister = p.click(
            snapshot(card), user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID, workspace=SISTER
        )
        assert (await client.send(sister)).status == 200
        await bot.settled()
        votes = schema.approvals.c
        async with bot.runtime.engine.connect() as conn:
            voters = (await conn.execute(select(votes.approver))).scalars().all()
        assert voters == [ALICE]
        assert await foreign_teams(bot) == ["E0OTHERORG", PARTNER_TEAM, PARTNER_TEAM]


async def test_the_bot_warns_at_start_while_anyone_may_open_cases(
    ready_db_url: str, slack: SlackRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    warning = "BILLSLEUTH_SUPPORT is empty: any member of the workspace can open cases and see their cards"
    with caplog.at_level(logging.WARNING, logger="bot.server"):
        async with offline_bot(ready_db_url, slack):
            pass
    assert any(warning in r.getMessage() for r in caplog.records)


async def test_the_bot_does_not_warn_at_start_once_support_is_named(
    ready_db_url: str, slack: SlackRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    # The first start of an empty database stores its policy as is; a later start that adds approvers would
    # only propose the change (it widens power), and the stored, empty support list would still warn.
    warning = "BILLSLEUTH_SUPPORT is empty: any member of the workspace can open cases and see their cards"
    guarded = ApprovalSettings(approvers=frozenset(FINANCE), support=frozenset({SUPPORT}))
    with caplog.at_level(logging.WARNING, logger="bot.server"):
        async with offline_bot(ready_db_url, slack, policy=guarded):
            pass
    assert not any(warning in r.getMessage() for r in caplog.records)


# ---- 5. bots never decide ---------------------------------------------------------------------------------


async def test_a_bot_click_is_refused_as_approver_is_bot(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    card = snapshot(card_of(slack, opened))
    own_bot = slack.workspace.bot_user_id
    for user in (own_bot, "USLACKBOT"):
        assert (
            await client.send(p.click(card, user=user, channel=CHANNEL, action_id=APPROVE_ACTION_ID))
        ).status == 200
    # an allowlisted id, but the payload says a bot sent it
    from_a_bot = {
        **p.click(card, user=ALICE, channel=CHANNEL, action_id=APPROVE_ACTION_ID),
        "bot_id": "B0OTHERBOT",
    }
    assert (await client.send(from_a_bot)).status == 200
    await bot.settled()
    assert await count(bot, schema.approvals) == 0
    for user in (own_bot, "USLACKBOT", ALICE):
        (refusal,) = slack.ephemerals(user)
        assert Rule.APPROVER_IS_BOT.value in refusal.text


def test_the_allowlist_refuses_bot_ids() -> None:
    with pytest.raises(SettingsError, match="USLACKBOT"):
        ApprovalSettings(approvers=frozenset({"U0FIN0001", "USLACKBOT"}))
    with pytest.raises(SettingsError, match="BILLSLEUTH_APPROVERS"):
        ApprovalSettings.from_env({"BILLSLEUTH_APPROVERS": "U0FIN0001,B0BILLSLTH"})


async def test_the_bot_will_not_start_with_its_own_bot_user_on_the_allowlist(
    ready_db_url: str, slack: SlackRecorder
) -> None:
    settings = ApprovalSettings(approvers=frozenset({*FINANCE, slack.workspace.bot_user_id}))
    with pytest.raises(SlackConfigError, match=slack.workspace.bot_user_id):
        async with running_bot(
            ready_db_url,
            slack.settings(signing_secret=SECRET),
            configuration=Configuration(investigator="offline"),
            approval_settings=settings,
            recover=False,
            expiry_interval=None,
        ):
            pass


# ---- 6. replays -------------------------------------------------------------------------------------------


async def test_a_replayed_slash_command_opens_one_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    payload = p.slash_command(
        f"case {sc['customer_id']} {sc['question']}",
        user=SUPPORT,
        channel=CHANNEL,
        response_url=slack.response_url(),
    )
    for _ in range(2):  # the same signed body, delivered twice within the five minutes
        assert (await client.send(payload)).status == 200
        await bot.settled()
    assert await count(bot, schema.cases) == 1


async def test_a_replayed_shortcut_submission_opens_one_case(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    forwarded = slack.post_user_message(CHANNEL, f"{sc['customer_id']}: {sc['question']}", user="U0CUSTOMER")
    assert (
        await client.send(p.message_action(forwarded.to_slack(), user=SUPPORT, channel=CHANNEL))
    ).status == 200
    await bot.settled()
    (modal,) = slack.views("modal")
    submit = p.view_submission(
        modal.view,
        user=SUPPORT,
        values={
            CUSTOMER_BLOCK_ID: {CUSTOMER_ACTION_ID: sc["customer_id"]},
            WORDS_BLOCK_ID: {WORDS_ACTION_ID: sc["question"]},
        },
    )
    for _ in range(2):
        assert (await client.send(submit)).status == 200
        await bot.settled()
    assert await count(bot, schema.cases) == 1
