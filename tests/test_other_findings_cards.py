"""The account's other overcharges on a card: one `Open a case` button each (value `<case> <invoice>`),
the linked case's id once it exists, the rest counted past five; on the explanation card too."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from bot.cards import credit_note_card, explanation_message
from bot.cards.ids import OPEN_LINKED_CASE_ACTION_ID
from bot.cards.models import ExplanationView, OtherFindingView
from tests.test_cards import CUSTOMER, all_text, assert_valid_message, card_view


def open_buttons(blocks: list[dict]) -> list[dict]:
    return [
        b["accessory"]
        for b in blocks
        if (b.get("accessory") or {}).get("action_id") == OPEN_LINKED_CASE_ACTION_ID
    ]


def others(n: int, linked: dict[int, str] | None = None) -> list[OtherFindingView]:
    return [
        OtherFindingView(f"INV-0007-{i:02d}", "duplicate_charge", Decimal("26.02"), (linked or {}).get(i))
        for i in range(1, n + 1)
    ]


def test_each_other_finding_gets_an_open_a_case_button_naming_case_and_invoice() -> None:
    message = credit_note_card(card_view(other_findings=others(2)))
    assert_valid_message(message)
    found = open_buttons(message.blocks)
    assert [b["text"]["text"] for b in found] == ["Open a case", "Open a case"]
    assert [b["value"] for b in found] == ["CASE-0001 INV-0007-01", "CASE-0001 INV-0007-02"]
    assert "26.02 USD" in all_text(message.blocks) and "duplicate charge" in all_text(message.blocks)


def test_a_finding_with_its_linked_case_shows_the_case_instead_of_the_button() -> None:
    message = credit_note_card(card_view(other_findings=others(2, {1: "CASE-0009"})))
    assert [b["value"] for b in open_buttons(message.blocks)] == ["CASE-0001 INV-0007-02"]
    assert "case `CASE-0009`" in all_text(message.blocks)


def test_a_finding_an_open_note_already_credits_has_no_button() -> None:
    credited = [replace(others(1)[0], credited_by="CN-0004")]
    message = credit_note_card(card_view(other_findings=credited))
    assert open_buttons(message.blocks) == []
    assert "being credited by `CN-0004`" in all_text(message.blocks)


def test_no_other_findings_no_section_and_many_are_counted() -> None:
    plain = credit_note_card(card_view())
    assert open_buttons(plain.blocks) == [] and "Also overpaid" not in all_text(plain.blocks)
    many = credit_note_card(card_view(other_findings=others(8)))
    assert_valid_message(many)
    assert len(open_buttons(many.blocks)) == 5 and "and 3 more" in all_text(many.blocks)


def test_an_explanation_card_lists_other_findings_too() -> None:
    view = ExplanationView(
        case_id="CASE-0003",
        customer=CUSTOMER,
        complaint="Why is May higher?",
        root_cause=None,
        explanation="May is right.",
        customer_reply="Hi!",
        invoice_ids=["INV-0007-05"],
        other_findings=others(1),
    )
    message = explanation_message(view)
    assert_valid_message(message)
    assert [b["value"] for b in open_buttons(message.blocks)] == ["CASE-0003 INV-0007-01"]
    assert open_buttons(explanation_message(replace(view, other_findings=())).blocks) == []
