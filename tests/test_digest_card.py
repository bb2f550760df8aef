"""The findings digest card: pure Block Kit, Slack's limits, ten buttons at most, currencies kept apart."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from bot.cards.digest import ClickedFinding, DigestItem, DigestView, digest_message, read_finding_value
from bot.cards.ids import SWEEP_OPEN_CASE_ACTION_ID
from tests.bot.helpers import all_text, assert_valid_blocks


def item(n: int, currency: str, amount: str, name: str = "Helio Freight") -> DigestItem:
    return DigestItem(f"INV-{n:04d}-01", Decimal(amount), currency, f"C-{n:04d}", name, "duplicate_charge")


def open_case_values(blocks: list[dict]) -> list[str]:
    return [
        b["accessory"]["value"]
        for b in blocks
        if (b.get("accessory") or {}).get("action_id") == SWEEP_OPEN_CASE_ACTION_ID
    ]


def test_ten_largest_with_each_currency_taking_turns_and_the_rest_counted() -> None:
    usd = [item(n, "USD", f"{n}.50", name="<&> " + "x" * 500) for n in range(1, 31)]
    eur = [item(101, "EUR", "5.00"), item(102, "EUR", "900.00")]
    jpy = [item(201, "JPY", "1200.00")]
    message = digest_message(DigestView(date(2026, 10, 15), (*usd, *eur, *jpy)))
    assert_valid_blocks(message.blocks)
    values = open_case_values(message.blocks)
    assert len(values) == 10
    assert values[:3] == [
        "INV-0102-01 900.00 2026-10-15",
        "INV-0101-01 5.00 2026-10-15",
        "INV-0201-01 1200.00 2026-10-15",
    ]
    usd_shown = [f"INV-{n:04d}-01 {n}.50 2026-10-15" for n in range(30, 23, -1)]
    assert values[3:] == usd_shown  # USD, largest first
    text = all_text(message.blocks)
    assert message.text == "Findings sweep: 33 new overcharges"
    assert "*EUR*: 2 findings, 905.00 EUR in total" in text and "*JPY*: 1 finding, 1200 JPY in total" in text
    assert "…and 23 more not shown (USD 23)" in text
    assert "&lt;&amp;&gt;" in text  # a customer's name is escaped


def test_a_few_findings_have_a_button_each_and_nothing_is_counted_as_more() -> None:
    message = digest_message(DigestView(date(2026, 10, 15), (item(1, "USD", "26.02"),)))
    assert_valid_blocks(message.blocks)
    assert open_case_values(message.blocks) == ["INV-0001-01 26.02 2026-10-15"]
    assert "more not shown" not in all_text(message.blocks)


def test_a_finding_with_its_case_shows_it_instead_of_a_button_in_a_new_revision() -> None:
    first = digest_message(DigestView(date(2026, 10, 15), (item(1, "USD", "26.02"), item(2, "USD", "3.00"))))
    opened = DigestItem(
        "INV-0001-01", Decimal("26.02"), "USD", "C-0001", "Helio", "duplicate_charge", "CASE-0007"
    )
    later = digest_message(DigestView(date(2026, 10, 15), (opened, item(2, "USD", "3.00"))))
    assert open_case_values(later.blocks) == ["INV-0002-01 3.00 2026-10-15"]
    assert "case `CASE-0007` opened" in all_text(later.blocks)
    assert {b["block_id"] for b in first.blocks}.isdisjoint(b["block_id"] for b in later.blocks)


def test_a_buttons_value_gives_back_the_finding() -> None:
    clicked = read_finding_value("INV-0042-07 26.02 2026-10-15")
    assert clicked == ClickedFinding("INV-0042-07", Decimal("26.02"), date(2026, 10, 15))
    for bad in ("INV-0042-07 26.02", "INV-0042-07 lots 2026-10-15", "INV-0042-07 26.02 someday"):
        assert read_finding_value(bad) is None
