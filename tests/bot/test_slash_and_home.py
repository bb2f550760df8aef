"""`/billsleuth` (one grammar with the CLI; replies only to the person who typed it) and App Home."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.models import Rule
from bot.cards import APPROVE_ACTION_ID, REJECT_ACTION_ID
from bot.grammar import (
    HELP_TEXT,
    Decide,
    Help,
    ListNotes,
    OpenCase,
    OperationError,
    ShowNote,
    parse_command,
    parse_mention,
)
from bot.server import RunningBot
from bot.slack_testing import SignedClient, SlackRecorder
from bot.slack_testing import payloads as p
from engine import schema
from tests.bot.helpers import (
    CARD_BUTTONS,
    CHANNEL,
    FINANCE,
    OUTSIDER,
    SLACK_ACK_LIMIT,
    SUPPORT,
    all_text,
    assert_valid_blocks,
    assert_valid_view,
    buttons,
    card_of,
    count,
    first_scenario,
    open_case,
)

ALICE, BOB, _ = FINANCE


async def slash(
    slack: SlackRecorder, client: SignedClient, bot: RunningBot, words: str, user: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Type `/billsleuth <words>`: (the ack's body, what was sent to the command's response_url)."""
    before = len(slack.calls("response_url"))
    payload = p.slash_command(words, user=user, channel=CHANNEL, response_url=slack.response_url())
    answer = await client.send(payload)
    assert answer.status == 200 and answer.elapsed < SLACK_ACK_LIMIT
    await bot.settled()
    responses = [c.args for c in slack.calls("response_url")[before:]]
    return (answer.json() if answer.body else None), responses


# ---- the grammar (shared with the CLI) --------------------------------------------------------------------


def test_the_grammar_builds_the_same_requests_the_cli_runs() -> None:
    assert isinstance(parse_command("", "U1"), Help)
    assert isinstance(parse_command("help", "U1"), Help)
    assert parse_command("list", "U1") == ListNotes()
    assert parse_command("show cn-0001", "U1") == ShowNote("CN-0001", "U1")
    assert parse_command("case C-0007 charged twice in May", "U1") == OpenCase(
        "C-0007", "charged twice in May", "U1"
    )
    # An imported ledger's ids keep their shape and their case.
    assert parse_command("case cus_8f3aQz charged twice", "U1") == OpenCase(
        "cus_8f3aQz", "charged twice", "U1"
    )
    assert parse_command("approve CN-0001", "U1") == Decide("CN-0001", "U1", "approve", "")
    assert parse_command("approve CN-0001 checked the ledger", "U1") == Decide(
        "CN-0001", "U1", "approve", "checked the ledger"
    )
    assert parse_command("reject CN-0002 price agreed", "U2") == Decide(
        "CN-0002", "U2", "reject", "price agreed"
    )
    assert parse_command("cancel cn-0003 paid by hand", "U2") == Decide(
        "CN-0003", "U2", "cancel", "paid by hand"
    )
    assert "/billsleuth cancel CN-0001 reason…" in HELP_TEXT


@pytest.mark.parametrize(
    ("words", "complaint"),
    [
        ("frobnicate", "unknown command 'frobnicate'"),
        ("show", "show needs a credit note id — usage: /billsleuth show CN-0001"),
        ("show INV-0001-05", "'INV-0001-05' is not a credit note id (like CN-0001)"),
        ("show CN-0001 extra", "show takes one credit note id"),
        ("case C-0007", "the customer's message is empty"),
        ("case " + "7" * 201 + " words", "'" + "7" * 40 + "…' is not a customer id (one word of at most 200"),
        ("approve", "approve needs a credit note id"),
        ("list everything", "list takes no arguments"),
    ],
)
def test_bad_words_get_one_line_naming_what_was_wrong(words: str, complaint: str) -> None:
    with pytest.raises(OperationError) as error:
        parse_command(words, "U1")
    message = str(error.value)
    assert complaint in message and "\n" not in message


def test_a_mention_gives_the_customer_id_and_the_words() -> None:
    bot = "U0BILLSLTH"
    assert parse_mention(f"<@{bot}> C-0007 I was charged twice", bot) == parse_mention(
        f"<@{bot}>   c-0007: I was charged twice", bot
    )
    found = parse_mention(f"<@{bot}> C-0007 I was charged twice &amp; more", bot)
    assert (found.customer_id, found.words) == ("C-0007", "I was charged twice & more")
    inside = parse_mention(f"<@{bot}> customer C-0012 says <@U0ALICE> saw it", bot)
    assert (inside.customer_id, inside.words) == ("C-0012", "customer C-0012 says <@U0ALICE> saw it")
    assert parse_mention(f"<@{bot}> they were charged twice", bot).customer_id is None


def test_a_mention_in_chinese_names_the_customer_inside_its_words() -> None:
    """Chinese runs words together: the id between ideographs is still the customer's, as intake reads it."""
    bot = "U0BILLSLTH"
    said = "客户C-0007说扣了174.90美元"
    found = parse_mention(f"<@{bot}> {said}", bot)
    assert (found.customer_id, found.words) == ("C-0007", said)
    assert parse_mention(f"<@{bot}> C-0007—charged twice", bot).words == "charged twice"
    assert parse_mention(f"<@{bot}> C-0007-05 was charged twice", bot).customer_id is None


# ---- the slash command -------------------------------------------------------------------------------------


async def test_help_and_bad_input_are_answered_in_the_ack_only_to_the_typist(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    helped, later = await slash(slack, client, bot, "help", SUPPORT)
    assert helped == {"text": HELP_TEXT, "response_type": "ephemeral"}
    bad, later_too = await slash(slack, client, bot, "approve INV-1", ALICE)
    assert bad is not None and bad["response_type"] == "ephemeral"
    assert bad["text"] == (
        ":warning: 'INV-1' is not a credit note id (like CN-0001) — usage: /billsleuth approve CN-0001 [note]"
    )
    assert later == later_too == []
    assert slack.calls("chat.postMessage") == []


async def test_case_list_show_approve_through_the_slash_command(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    sc = first_scenario(action="credit_note", single_approver=True)
    acked, (opened,) = await slash(slack, client, bot, f"case {sc['customer_id']} {sc['question']}", SUPPORT)
    assert acked is None  # an empty ack; the answer comes by response_url
    assert opened["response_type"] == "ephemeral" and "awaiting_approval" in opened["text"]
    (card,) = [m for m in slack.messages(CHANNEL) if buttons(m)]  # the case's own message, in the channel
    assert card.thread_ts is None and "Approvals: 0 of 1" in all_text(card.blocks)
    async with bot.runtime.engine.connect() as conn:
        row = (await conn.execute(schema.cases.select())).one()
    assert (row.requester, row.thread_ts, row.message_ts) == (SUPPORT, card.ts, card.ts)
    note_id = (await bot.runtime.service.show_case(row.id))["credit_note"]["id"]

    _, (listed,) = await slash(slack, client, bot, "list", ALICE)
    assert note_id in listed["text"] and "Approvals: 0 of 1" in listed["text"]

    _, (shown,) = await slash(slack, client, bot, f"show {note_id}", ALICE)
    assert shown["response_type"] == "ephemeral"
    assert_valid_blocks(shown["blocks"])
    assert buttons(shown) == CARD_BUTTONS
    assert "System recomputation" in all_text(shown["blocks"])

    _, (refused,) = await slash(slack, client, bot, f"approve {note_id}", OUTSIDER)
    assert Rule.NOT_AN_APPROVER.value in refused["text"]
    _, (approved,) = await slash(slack, client, bot, f"approve {note_id} checked", ALICE)
    assert approved["text"] == f"{note_id} approved"
    assert buttons(slack.message(CHANNEL, card.ts)) == []  # the card in the channel follows
    replies = [m for m in slack.replies(CHANNEL, card.ts) if "Reply to the customer" in all_text(m.blocks)]
    assert len(replies) == 1 and sc["truth"]["overcharge"] in all_text(replies[0].blocks)
    _, (again,) = await slash(slack, client, bot, f"approve {note_id}", BOB)
    assert "already issued; nothing changed" in again["text"]
    assert slack.ephemerals() == []  # every answer went to the typist through response_url


async def test_reject_through_the_slash_command_needs_a_reason(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    note_id = opened.credit_note_id
    _, (refused,) = await slash(slack, client, bot, f"reject {note_id}", BOB)
    assert Rule.REASON_REQUIRED.value in refused["text"]
    assert await count(bot, schema.approvals) == 0
    _, (done,) = await slash(slack, client, bot, f"reject {note_id} the customer agreed to it", BOB)
    assert done["text"] == f"{note_id} rejected: the customer agreed to it"
    assert "Rejected" in all_text(card_of(slack, opened).blocks)
    _, (unknown,) = await slash(slack, client, bot, "show CN-9999", BOB)
    assert unknown["text"] == ":warning: there is no credit note CN-9999"


# ---- App Home ----------------------------------------------------------------------------------------------


async def test_app_home_shows_approvers_the_pending_notes_and_others_their_open_cases(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    await open_case(slack, client, bot, first_scenario(action="explain_only"))  # settled: not "open"
    for user in (ALICE, SUPPORT):
        assert (await client.send(p.app_home_opened(user=user))).status == 200
    await bot.settled()

    approver, requester = slack.home(ALICE), slack.home(SUPPORT)
    assert approver is not None and requester is not None
    assert_valid_view(approver)
    assert_valid_view(requester)
    assert buttons(approver) == ["Approve", "Reject"]
    assert opened.credit_note_id in all_text(approver["blocks"])
    assert "Approvals: 0 of 1" in all_text(approver["blocks"])
    assert buttons(requester) == []
    assert "not on BILLSLEUTH_APPROVERS" in all_text(requester["blocks"])
    assert opened.case_id in all_text(requester["blocks"]) and "Your open cases* (1)" in all_text(
        requester["blocks"]
    )


async def test_approving_from_app_home_updates_the_card_in_the_thread_and_the_home(
    slack: SlackRecorder, bot: RunningBot, client: SignedClient
) -> None:
    opened = await open_case(slack, client, bot, first_scenario(action="credit_note", single_approver=True))
    assert (await client.send(p.app_home_opened(user=ALICE))).status == 200
    await bot.settled()
    home = slack.home(ALICE)
    assert home is not None
    block_id, element = p.find_element(home["blocks"], APPROVE_ACTION_ID, opened.credit_note_id)
    # Money buttons ask first, naming the note and the amount, on Home as on the card.
    for action_id in (APPROVE_ACTION_ID, REJECT_ACTION_ID):
        _, button = p.find_element(home["blocks"], action_id, opened.credit_note_id)
        asked = button["confirm"]["text"]["text"]
        assert opened.credit_note_id in asked and opened.scenario["truth"]["overcharge"] in asked
    clicked = p.view_block_actions(user=ALICE, action=element, block_id=block_id, view=home)
    assert (await client.send(clicked)).status == 200
    await bot.settled()
    assert "Issued" in all_text(card_of(slack, opened).blocks)
    assert buttons(slack.home(ALICE) or {}) == []  # republished: nothing waits any more
