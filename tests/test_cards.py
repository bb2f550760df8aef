"""Every card is valid Block Kit (slack_sdk's models round-trip it) and within Slack's limits, also when the
ledger behind it is huge."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.cards import (
    APPROVE_ACTION_ID,
    CANCEL_ACTION_ID,
    CANCEL_MODAL_CALLBACK_ID,
    REJECT_ACTION_ID,
    REJECT_MODAL_CALLBACK_ID,
    REJECT_REASON_ACTION_ID,
    REJECT_REASON_BLOCK_ID,
    already_decided_message,
    credit_note_card,
    customer_reply_message,
    explanation_message,
    home_view,
    parse_block_id,
    progress_message,
    read_reason_submission,
    read_reject_submission,
    reason_modal,
    refusal_message,
    reject_reason_modal,
    stale_card_message,
)
from bot.cards.ids import REQUEST_CHANGES_ACTION_ID, BlockRef, block_id
from bot.cards.limits import (
    CARD_BLOCKS_JSON_BUDGET,
    MAX_BLOCKS,
    CardLimitError,
    block_problems,
    blocks_json_size,
    check_blocks,
    truncate,
)
from bot.cards.models import (
    CardNote,
    CaseSummaryView,
    ConclusionView,
    CreditNoteCardView,
    CustomerView,
    DecisionView,
    ExplanationView,
    HomeView,
    LineDiffView,
    Message,
    PaymentView,
    PendingNoteView,
    ProgressStep,
    ProgressView,
    RecomputationView,
    Refusal,
    RejectModalMetadata,
    ToolCallView,
)
from engine.diff import InvoiceCheck, LineDiff
from engine.model import Payment

D = Decimal
EXPIRES = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)
CUSTOMER = CustomerView("C-0007", "Acme & <Sons>", "USD")


def note(status: str = "draft", approvals: int = 0, needed: int = 1, amount: str = "123.60") -> CardNote:
    return CardNote(
        "CN-0001", "INV-0007-05", D(amount), "Charged twice for May", status, approvals, needed, EXPIRES
    )  # type: ignore[arg-type]


def recompute(
    diffs: int = 1, payments: int = 2, description: str = "Pro plan × 5 seats"
) -> RecomputationView:
    return RecomputationView(
        invoice_id="INV-0007-05",
        period_start=date(2026, 5, 1),
        period_end=date(2026, 6, 1),
        should_exist=True,
        billed_total=D("247.20"),
        expected_total=D("123.60"),
        paid_total=D("247.20"),
        credited_total=D("0.00"),
        line_diffs=[
            LineDiffView(
                "subscription", f"{description} #{i}", f"{description} #{i}", D("247.20"), D("123.60")
            )
            for i in range(diffs)
        ],
        payments=[
            PaymentView(f"PAY-0007-05-{i}", D("123.60"), "succeeded", date(2026, 5, 2))
            for i in range(payments)
        ],
    )


def card_view(**changes: Any) -> CreditNoteCardView:
    base = CreditNoteCardView(
        case_id="CASE-0001",
        customer=CUSTOMER,
        complaint="I was charged twice in May!\nPlease fix <this>.",
        requested_by="USUPPORT",
        conclusion=ConclusionView(
            "duplicate_charge", D("123.60"), "Two successful payments for one invoice."
        ),
        recompute=recompute(),
        tool_trail=[ToolCallView("list_invoices", "C-0007"), ToolCallView("list_payments", "INV-0007-05")],
        credit_note=note(),
        decisions=(),
        revision=2,
    )
    return replace(base, **changes)


def assert_valid_message(message: Message) -> None:
    assert message.text.strip(), "every message needs notification text"
    assert 0 < len(message.blocks) <= MAX_BLOCKS["message"]
    for block in message.blocks:
        assert Block.parse(block).to_dict() == block  # slack_sdk's models accept it, field for field
    assert blocks_json_size(message.blocks) < CARD_BLOCKS_JSON_BUDGET
    assert block_problems(message.blocks, "message") == []


def assert_valid_view(view: dict[str, Any]) -> None:
    assert View(**view).to_dict() == view
    for block in view["blocks"]:
        assert Block.parse(block).to_dict() == block
    assert len(view["blocks"]) <= MAX_BLOCKS[view["type"]]


def all_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def mrkdwn_text(blocks: list[dict[str, Any]]) -> str:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return "\n".join(found)


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"] if e["type"] == "button"]


# ---- the credit note card ----------------------------------------------------------------------------------


def test_draft_card_shows_evidence_and_offers_exactly_approve_reject_and_request_changes() -> None:
    message = credit_note_card(card_view())
    assert_valid_message(message)
    text = all_text(message.blocks)
    # The system's recomputation, not only the agent's words.
    assert "System recomputation of `INV-0007-05`" in text
    assert "*Billed*\\n247.20 USD" in text and "*Should have billed*\\n123.60 USD" in text
    assert "*Paid*\\n247.20 USD (2 successful payments)" in text
    assert "PAY-0007-05-0" in text and "list_invoices(C-0007) → list_payments(INV-0007-05)" in text
    assert "Approvals: 0 of 1" in text
    assert [(b["text"]["text"], b["action_id"], b["value"]) for b in buttons(message.blocks)] == [
        ("Approve", APPROVE_ACTION_ID, "CN-0001"),
        ("Reject", REJECT_ACTION_ID, "CN-0001"),
        ("Request changes", REQUEST_CHANGES_ACTION_ID, "CN-0001"),
    ]
    # The customer's words are escaped: no stray mentions or links.
    assert "Acme &amp; &lt;Sons&gt;" in text and "Please fix &lt;this&gt;." in text


def test_two_person_note_waiting_for_its_second_vote_still_has_both_buttons() -> None:
    view = card_view(
        credit_note=note(approvals=1, needed=2, amount="450.00"),
        decisions=[DecisionView("UALICE", "approve", "checked the payments", EXPIRES - timedelta(days=1))],
    )
    message = credit_note_card(view)
    assert_valid_message(message)
    assert "Approvals: 1 of 2" in all_text(message.blocks)
    assert "Approvals: 1 of 2" in message.text
    assert [b["text"]["text"] for b in buttons(message.blocks)] == ["Approve", "Reject", "Request changes"]
    assert "<@UALICE> :white_check_mark: approved" in all_text(message.blocks)


@pytest.mark.parametrize(
    ("status", "decisions", "expected"),
    [
        (
            "issued",
            [DecisionView("UALICE", "approve")],
            "*Issued*: 123.60 USD credited on `INV-0007-05`, approved by <@UALICE>",
        ),
        (
            "rejected",
            [DecisionView("UBOB", "reject", "customer cancelled late")],
            "*Rejected* by <@UBOB>: customer cancelled late",
        ),
        ("expired", [], "*Expired*: nobody decided before"),
        ("approved", [DecisionView("UALICE", "approve")], "*Approved* by <@UALICE>; issuing now."),
    ],
)
def test_decided_card_says_who_decided_and_has_no_buttons(
    status: str, decisions: list[DecisionView], expected: str
) -> None:
    view = card_view(
        credit_note=note(status=status, approvals=len(decisions)), decisions=decisions, revision=3
    )
    message = credit_note_card(view)
    assert_valid_message(message)
    assert buttons(message.blocks) == []
    assert not any(b["type"] == "actions" for b in message.blocks)
    assert expected in all_text(message.blocks)


def confirm_text(button: dict[str, Any]) -> str:
    confirm = button["confirm"]
    assert {"title", "text", "confirm", "deny"} <= confirm.keys()
    return str(confirm["text"]["text"])


def test_approve_and_reject_ask_for_confirmation_naming_the_note_and_amount() -> None:
    money = [
        b
        for b in buttons(credit_note_card(card_view()).blocks)
        if b["action_id"] != REQUEST_CHANGES_ACTION_ID
    ]
    assert [b["text"]["text"] for b in money] == ["Approve", "Reject"]
    for element in money:
        assert "CN-0001" in confirm_text(element) and "123.60 USD" in confirm_text(element)


def test_request_changes_moves_no_money_and_asks_no_confirmation() -> None:
    (sent_back,) = [
        b
        for b in buttons(credit_note_card(card_view()).blocks)
        if b["action_id"] == REQUEST_CHANGES_ACTION_ID
    ]
    assert "confirm" not in sent_back and sent_back["value"] == "CN-0001"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"held_by_budget": True}, "and held: issuing it today would pass the daily credit limit"),
        (
            {"issue_refused": "issuing CN-0001 was refused (overcharge_changed): the ledger changed"},
            "*Approved* by <@UALICE>, but not issued: issuing CN-0001 was refused (overcharge_changed)",
        ),
    ],
)
def test_an_approved_note_nothing_will_issue_offers_only_cancel_with_a_confirmation(
    changes: dict[str, Any], expected: str
) -> None:
    view = card_view(
        credit_note=replace(note(status="approved", approvals=1), **changes),
        decisions=[DecisionView("UALICE", "approve")],
    )
    message = credit_note_card(view)
    assert_valid_message(message)
    (cancel,) = buttons(message.blocks)
    assert (cancel["text"]["text"], cancel["action_id"], cancel["value"]) == (
        "Cancel",
        CANCEL_ACTION_ID,
        "CN-0001",
    )
    assert "CN-0001" in confirm_text(cancel) and "123.60 USD" in confirm_text(cancel)
    assert cancel["confirm"]["deny"]["text"] != "Cancel"  # "Cancel" in the dialog would mean the opposite
    actions_block = next(b for b in message.blocks if b["type"] == "actions")
    assert parse_block_id(actions_block["block_id"]) == BlockRef("cn", "CN-0001", "cancel", 2)
    assert expected in all_text(message.blocks)


def test_an_approved_note_being_issued_offers_no_cancel() -> None:
    view = card_view(
        credit_note=note(status="approved", approvals=1), decisions=[DecisionView("UALICE", "approve")]
    )
    assert buttons(credit_note_card(view).blocks) == []


@pytest.mark.parametrize(
    ("cancelled_by", "who"),
    [("UBOB", "<@UBOB>"), (None, "BillSleuth")],  # None: the sweep
)
def test_a_cancelled_card_says_who_cancelled_and_why_and_has_no_buttons(
    cancelled_by: str | None, who: str
) -> None:
    cancelled = replace(
        note(status="cancelled", approvals=1), cancelled_by=cancelled_by, cancel_reason="paid <by> hand"
    )
    message = credit_note_card(
        card_view(credit_note=cancelled, decisions=[DecisionView("UALICE", "approve")], revision=3)
    )
    assert_valid_message(message)
    assert message.blocks[0]["text"]["text"] == "Credit note CN-0001 · 123.60 USD · cancelled"
    assert buttons(message.blocks) == []
    assert f"Cancelled by {who}: paid &lt;by&gt; hand. No credit will be issued." in mrkdwn_text(
        message.blocks
    )
    reply = customer_reply_message("CASE-0001", "CN-0001", "cancelled", "We looked again at INV-0007-05.")
    assert_valid_message(reply)
    assert "cancelled" in reply.text


def test_a_confirm_dialog_past_slacks_limits_is_caught() -> None:
    element = buttons(credit_note_card(card_view()).blocks)[0]
    too_long = {
        **element,
        "confirm": {**element["confirm"], "deny": {"type": "plain_text", "text": "x" * 31}},
    }
    problems = block_problems([{"type": "actions", "block_id": "a", "elements": [too_long]}])
    assert problems == ["block 0 (actions): confirm deny longer than 30"]


def test_card_for_an_invoice_that_should_not_exist_says_so() -> None:
    view = card_view(recompute=replace(recompute(diffs=0), should_exist=False, expected_total=D("0.00")))
    text = all_text(credit_note_card(view).blocks)
    assert "the rules produce no invoice for this period" in text
    assert "*Should have billed*\\n0.00 USD" in text and "*Overpaid*\\n247.20 USD" in text


def test_huge_ledger_is_cut_to_fit_with_a_pointer_to_show() -> None:
    long = "x" * 5000
    view = card_view(
        customer=CustomerView("C-0007", "N" * 3000, "USD"),
        complaint=long,
        conclusion=ConclusionView("duplicate_charge", D("123.60"), long),
        recompute=recompute(
            diffs=500, payments=300, description="Seat line with a very long description " * 5
        ),
        tool_trail=[
            ToolCallView("recompute_invoice", f"INV-0007-{i:02d}" * 10, ok=i % 7 != 0) for i in range(400)
        ],
        credit_note=replace(note(approvals=1, needed=2), reason=long),
        decisions=[DecisionView(f"U{i:04d}", "approve", long) for i in range(60)],
    )
    message = credit_note_card(view)
    assert_valid_message(message)
    blocks = {b["block_id"]: b for b in message.blocks}
    lines = blocks["cn:CN-0001:lines:r2"]["text"]["text"]
    shown = lines.count("\n• ")
    assert 0 < shown < 500
    assert f"…and {500 - shown} more — `/billsleuth show CN-0001` for all" in lines
    payments = blocks["cn:CN-0001:payments:r2"]["text"]["text"]
    assert f"…and {300 - payments.count('• ')} more — `/billsleuth show CN-0001` for all" in payments
    trail = blocks["cn:CN-0001:trail:r2"]["elements"][0]["text"]
    assert "(400 calls)" in trail and "more — `/billsleuth show CN-0001` for all" in trail
    assert "Approvals: 1 of 2" in all_text(message.blocks)  # never cut away
    assert [b["text"]["text"] for b in buttons(message.blocks)] == ["Approve", "Reject", "Request changes"]


def test_each_revision_gets_new_block_ids_that_parse_back() -> None:
    first = credit_note_card(card_view(revision=4)).blocks
    second = credit_note_card(card_view(revision=5)).blocks
    assert not {b["block_id"] for b in first} & {b["block_id"] for b in second}
    decide = next(b for b in first if b["type"] == "actions")
    assert parse_block_id(decide["block_id"]) == BlockRef("cn", "CN-0001", "decide", 4)
    assert all(parse_block_id(b["block_id"]).revision == 5 for b in second)  # type: ignore[union-attr]


def test_block_id_round_trip_and_refusals() -> None:
    assert str(parse_block_id(block_id("home", "CN-0042", "decide", 17))) == "home:CN-0042:decide:r17"
    assert parse_block_id("cn:odd:key:with:colons:note:r3") == BlockRef(
        "cn", "odd:key:with:colons", "note", 3
    )
    assert parse_block_id("hspI") is None and parse_block_id(None) is None
    with pytest.raises(ValueError, match="negative"):
        block_id("cn", "CN-1", "decide", -1)
    with pytest.raises(ValueError, match="not a usable block_id"):
        block_id("cn", "C" * 300, "decide", 1)


def test_recomputation_from_the_engine_check_keeps_only_this_invoices_payments() -> None:
    check = InvoiceCheck(
        invoice_id="INV-0007-05",
        customer_id="C-0007",
        period_start=date(2026, 5, 1),
        period_end=date(2026, 6, 1),
        billed_total=D("150.00"),
        should_exist=True,
        expected_invoice_id="INV-0007-05",
        expected_total=D("120.00"),
        paid_total=D("150.00"),
        successful_payments=1,
        credited_total=D("10.00"),
        line_diffs=[LineDiff("subscription", "Pro × 5", "Pro × 4", D("150.00"), D("120.00"))],
    )
    when = datetime(2026, 5, 2, tzinfo=UTC)
    view = RecomputationView.from_check(
        check,
        [
            Payment("PAY-0007-05", "INV-0007-05", D("150.00"), "succeeded", when, "gw-1"),
            Payment("PAY-0007-04", "INV-0007-04", D("150.00"), "succeeded", when, "gw-2"),
        ],
    )
    assert (
        view.expected_total == D("120.00") and view.overpaid == D("30.00") and view.outstanding == D("20.00")
    )
    assert [p.id for p in view.payments] == ["PAY-0007-05"]
    assert view.line_diffs[0].difference == D("30.00")
    text = all_text(credit_note_card(card_view(recompute=view)).blocks)
    assert "billed 150.00, rules 120.00 (+30.00)" in text and "*Still owed back*\\n20.00 USD" in text


# ---- progress, explanation, notices ------------------------------------------------------------------------


def test_progress_message_lists_tools_and_findings_newest_kept() -> None:
    steps = [ProgressStep("tool", f"list_invoices C-0007 call {i}") for i in range(1000)]
    steps.append(ProgressStep("finding", "INV-0007-05 was paid twice"))
    message = progress_message(ProgressView("CASE-0001", "C-0007", "USUPPORT", steps, "running", revision=7))
    assert_valid_message(message)
    text = all_text(message.blocks)
    assert "INV-0007-05 was paid twice" in text and "call 999" in text and "call 0\\n" not in text
    assert re.search(r"…\d+ earlier steps", text)
    assert "1000 tool calls · 1 finding" in text
    assert message.blocks[0]["block_id"] == "case:CASE-0001:head:r7"
    empty = progress_message(ProgressView("CASE-0002", "C-0001", "USUPPORT"))
    assert_valid_message(empty)
    assert "Starting" in all_text(empty.blocks)


def test_explanation_gives_the_reply_to_copy() -> None:
    view = ExplanationView(
        case_id="CASE-0003",
        customer=CUSTOMER,
        complaint="Why is May higher?",
        root_cause=None,
        explanation="May included a proration for the seats added on 12 May.",
        customer_reply="Hi! May's invoice includes 19 days of the 2 seats you added on 12 May.",
        invoice_ids=["INV-0007-05"],
    )
    message = explanation_message(view)
    assert_valid_message(message)
    text = all_text(message.blocks)
    assert "```Hi! May's invoice includes 19 days" in text
    assert "the bill was right" in message.text and "no credit note was drafted" in text
    huge = explanation_message(
        replace(view, explanation="y" * 9000, customer_reply="z" * 9000, complaint="w" * 9000)
    )
    assert_valid_message(huge)


def test_refusal_names_the_rule_and_notices_fit() -> None:
    refusal = refusal_message(
        Refusal("one vote each", "you already approved CN-0001; another approver must decide")
    )
    assert_valid_message(refusal)
    assert refusal.text.endswith("(rule: one vote each)")
    assert "already issued; nothing changed" in already_decided_message("CN-0001", "issued").text
    assert_valid_message(stale_card_message("CN-0001"))
    reply = customer_reply_message("CASE-0001", "CN-0001", "issued", "We credited 123.60 USD to INV-0007-05.")
    assert_valid_message(reply)
    assert "123.60 USD" in all_text(reply.blocks) and "issued" in reply.text


# ---- the reject modal and App Home -------------------------------------------------------------------------


def test_reject_modal_carries_where_to_go_back_and_requires_a_reason() -> None:
    meta = RejectModalMetadata("C0CASES", "1796000000.000100", "CN-0001", revision=3)
    view = reject_reason_modal(meta, note(), "USD")
    assert_valid_view(view)
    assert view["callback_id"] == REJECT_MODAL_CALLBACK_ID
    assert json.loads(view["private_metadata"]) == {
        "channel": "C0CASES",
        "message_ts": "1796000000.000100",
        "credit_note_id": "CN-0001",
        "revision": 3,
    }
    field = next(b for b in view["blocks"] if b["type"] == "input")
    assert field["block_id"] == REJECT_REASON_BLOCK_ID and "optional" not in field  # required
    assert field["element"]["action_id"] == REJECT_REASON_ACTION_ID

    submitted = {
        **view,
        "state": {"values": {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: {"value": " late cancel "}}}},
    }
    assert read_reject_submission(submitted) == (meta, "late cancel")
    blank = {
        **view,
        "state": {"values": {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: {"value": "  "}}}},
    }
    with pytest.raises(ValueError, match="needs a reason"):
        read_reject_submission(blank)
    with pytest.raises(ValueError, match="not ours"):
        read_reject_submission({**submitted, "private_metadata": "{}"})


def test_the_cancel_modal_asks_for_a_reason_and_says_what_cancelling_means() -> None:
    meta = RejectModalMetadata("C0CASES", "1796000000.000100", "CN-0001", revision=2)
    view = reason_modal("cancel", meta, note(status="approved", approvals=1), "USD")
    assert_valid_view(view)
    assert view["callback_id"] == CANCEL_MODAL_CALLBACK_ID
    assert "Cancel" not in view["close"]["text"]  # closing the form must not read as the decision
    assert "Cancelling *CN-0001*: 123.60 USD" in all_text(view["blocks"])
    submitted = {
        **view,
        "state": {"values": {REJECT_REASON_BLOCK_ID: {REJECT_REASON_ACTION_ID: {"value": " paid by hand "}}}},
    }
    assert read_reason_submission(submitted) == ("cancel", meta, "paid by hand")
    with pytest.raises(ValueError, match="not the reject-reason modal"):
        read_reject_submission(submitted)  # a cancel is never read as a reject
    blank = {**submitted, "state": {"values": {}}}
    with pytest.raises(ValueError, match="a cancel needs a reason"):
        read_reason_submission(blank)


def pending(i: int) -> PendingNoteView:
    return PendingNoteView(
        replace(note(approvals=1, needed=2), id=f"CN-{i:04d}"), f"CASE-{i:04d}", CUSTOMER, revision=i
    )


def case(i: int) -> CaseSummaryView:
    return CaseSummaryView(
        f"CASE-{i:04d}", "C-0007", "awaiting_approval", EXPIRES, "charged twice " * 40, f"CN-{i:04d}"
    )


def test_home_for_an_approver_lists_pending_notes_with_buttons() -> None:
    view = home_view(HomeView("UALICE", True, [pending(1), pending(2)], [case(9)]))
    assert_valid_view(view)
    clicks = buttons(view["blocks"])
    assert [(b["text"]["text"], b["value"]) for b in clicks] == [
        ("Approve", "CN-0001"),
        ("Reject", "CN-0001"),
        ("Approve", "CN-0002"),
        ("Reject", "CN-0002"),
    ]
    decide = [b for b in view["blocks"] if b["type"] == "actions"]
    assert [parse_block_id(b["block_id"]) for b in decide] == [
        BlockRef("home", "CN-0001", "decide", 1),
        BlockRef("home", "CN-0002", "decide", 2),
    ]
    assert "Approvals: 1 of 2" in all_text(view["blocks"]) and "CASE-0009" in all_text(view["blocks"])


def test_home_for_others_shows_their_cases_without_buttons_and_long_lists_fit() -> None:
    view = home_view(HomeView("UBOB", False, [pending(1)], [case(i) for i in range(60)]))
    assert_valid_view(view)
    assert buttons(view["blocks"]) == []
    assert "not on BILLSLEUTH_APPROVERS" in all_text(view["blocks"]) and "…and 40 more" in all_text(
        view["blocks"]
    )
    crowded = home_view(
        HomeView("UALICE", True, [pending(i) for i in range(80)], [case(i) for i in range(80)])
    )
    assert_valid_view(crowded)
    assert "…and 60 more — `/billsleuth list` for all" in all_text(crowded["blocks"])


# ---- the limits themselves ---------------------------------------------------------------------------------


def test_limits_catch_what_slack_refuses() -> None:
    section = {"type": "section", "block_id": "a", "text": {"type": "mrkdwn", "text": "x" * 3001}}
    too_many = [{"type": "divider", "block_id": f"d{i}"} for i in range(51)]
    button = {
        "type": "button",
        "action_id": "a" * 256,
        "text": {"type": "plain_text", "text": "Go"},
        "value": "v" * 2001,
    }
    problems = block_problems([section, {"type": "actions", "block_id": "a", "elements": [button]}])
    assert any("section text longer than 3000" in p for p in problems)
    assert any("action_id longer than 255" in p for p in problems)
    assert any("button value longer than 2000" in p for p in problems)
    assert any("used twice" in p for p in problems)
    assert any("51 blocks" in p for p in block_problems(too_many))
    big = [
        {"type": "section", "block_id": f"s{i}", "text": {"type": "mrkdwn", "text": "y" * 2900}}
        for i in range(5)
    ]
    with pytest.raises(CardLimitError, match="characters of JSON"):
        check_blocks(big)
    assert truncate("abcdef", 4) == "abc…" and truncate("abc", 4) == "abc"


def test_hostile_text_is_escaped_and_still_fits() -> None:
    """Escaping can triple a text and JSON doubles quotes: cards are cut after both, never through `&amp;`."""
    nasty = '&<>"\\\x01\n<!channel> <@U999> ' * 400
    view = card_view(
        customer=CustomerView("C-0007", nasty, "USD"),
        complaint=nasty,
        conclusion=ConclusionView("duplicate_charge", D("123.60"), nasty),
        recompute=recompute(diffs=40, payments=40, description=nasty),
        tool_trail=[ToolCallView(nasty, nasty, ok=False) for _ in range(100)],
        credit_note=replace(note(), reason=nasty),
        decisions=[DecisionView("UBOB", "reject", nasty) for _ in range(10)],
    )
    for message in (
        credit_note_card(view),
        credit_note_card(replace(view, credit_note=replace(note(status="rejected"), reason=nasty))),
        explanation_message(
            ExplanationView("CASE-1", view.customer, nasty, "duplicate_charge", nasty, nasty)
        ),
        progress_message(ProgressView("CASE-1", "C-0007", "USUPPORT", [ProgressStep("note", nasty)] * 30)),
        explanation_message(ExplanationView("CASE-1", view.customer, nasty, nasty, nasty, nasty)),
        customer_reply_message("CASE-1", "CN-0001", "rejected", nasty),
    ):
        assert_valid_message(message)
        # mrkdwn and the notification text parse mentions; plain_text (the header) shows them literally.
        text = mrkdwn_text(message.blocks) + message.text
        assert "<!channel>" not in text and "<@U999>" not in text and "\x01" not in text
        assert not re.search(r"&(a|am|amp|l|lt|g|gt)?…", text), "an entity was cut in half"
    assert_valid_view(home_view(HomeView("UALICE", True, [pending(1)], [replace(case(1), complaint=nasty)])))


def test_a_pending_policy_change_card_asks_with_confirm_and_its_decided_revision_has_no_buttons() -> None:
    from bot.cards.ids import POLICY_APPROVE_ACTION_ID, POLICY_REJECT_ACTION_ID, parse_block_id
    from bot.cards.policy import PolicyChangeView, policy_change_card

    pending = PolicyChangeView(
        id=7,
        status="pending",
        proposed_by="cli:mallory",
        source="cli:mallory",
        why="policy apply",
        changes=(("BILLSLEUTH_APPROVERS", "U0FIN0001", "U0FIN0001,U0EVE0001"),),
    )
    card = policy_change_card(pending)
    for block in card.blocks:
        assert Block.parse(block).to_dict() == block  # type: ignore[union-attr]
    assert card.blocks[0]["text"]["text"].endswith("· pending")  # the first line names the status
    (row,) = [b for b in card.blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in row["elements"]] == [POLICY_APPROVE_ACTION_ID, POLICY_REJECT_ACTION_ID]
    assert all(e["value"] == "7" and "#7" in e["confirm"]["text"]["text"] for e in row["elements"])
    assert parse_block_id(row["block_id"]) == BlockRef("pc", "7", "decide", 0)
    text = json.dumps(card.blocks)
    assert "`U0FIN0001` → `U0FIN0001,U0EVE0001`" in json.loads(text)[2]["text"]["text"]
    decided = policy_change_card(replace(pending, status="approved", decided_by="U0FIN0002"))
    assert [b for b in decided.blocks if b["type"] == "actions"] == []
    assert {parse_block_id(b["block_id"]).revision for b in decided.blocks} == {1}  # type: ignore[union-attr]
    assert "Approved by <@U0FIN0002>" in json.dumps(decided.blocks)


def test_a_note_issued_in_stripe_links_its_stripe_credit_note() -> None:
    stripe_url = "https://dashboard.stripe.com/test/credit_notes/cn_123"
    issued = replace(
        note(status="issued", approvals=1), stripe_credit_note_id="cn_123", stripe_url=stripe_url
    )
    message = credit_note_card(card_view(credit_note=issued, decisions=[DecisionView("UALICE", "approve")]))
    assert_valid_message(message)
    assert f"Stripe credit note <{stripe_url}|cn_123>" in all_text(message.blocks)


def test_an_approved_note_stripe_failed_shows_the_error_and_that_it_is_tried_again() -> None:
    failed = replace(
        note(status="approved", approvals=1), stripe_error="Stripe: APIConnectionError: connection reset"
    )
    message = credit_note_card(card_view(credit_note=failed, decisions=[DecisionView("UALICE", "approve")]))
    assert_valid_message(message)
    text = all_text(message.blocks)
    assert "Stripe: APIConnectionError: connection reset" in text and "same idempotency key" in text
    assert buttons(message.blocks) == []  # the sweep's next try issues it: nothing to click meanwhile
