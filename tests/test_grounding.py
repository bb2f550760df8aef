"""Grounding and intake: numbers are found wherever they sit, including inside Chinese text."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent.cases.intake import parse_complaint, quoted_ids
from agent.graph.grounding import EvidenceBook, numbers_in, ungrounded


def evidence() -> EvidenceBook:
    book = EvidenceBook()
    book.harvest(
        "recompute_invoice",
        {
            "invoice_id": "INV-0001-05",
            "billed_total": "174.90",
            "should_bill": "0.00",
            "paid_total": "174.90",
            "successful_payments": 1,
            "overcharge": "174.90",
            "verdict": "should not exist",
            "line_diffs": [],
            "expected_lines": [],
        },
    )
    book.add("list_invoices", "INV-0001-05", "period", "2026-09-25 to 2026-10-25")
    return book


@pytest.mark.parametrize(
    ("text", "numbers", "dates"),
    [
        ("多收了174.90美元，于2026-09-25", {Decimal("174.90")}, {"2026-09-25"}),
        ("overcharged 174.90USD [E3] on INV-0001-05", {Decimal("174.90")}, set()),
        ("1,174.90 in total", {Decimal("1174.90")}, set()),
        ("You paid USD174.90.", {Decimal("174.90")}, set()),
    ],
)
def test_numbers_are_found_next_to_any_script(text: str, numbers: set[Decimal], dates: set[str]) -> None:
    assert numbers_in(text) == (numbers, dates)


def test_a_number_the_ledger_never_gave_is_caught_even_without_spaces() -> None:
    book = evidence()
    assert ungrounded("您多付了174.90美元", book.items) == []
    assert ungrounded("您多付了999.00美元", book.items) == ["999.00"]
    assert ungrounded("the period began 2026-09-25 (9/25)", book.items) == []
    assert ungrounded("refund on 2026-12-01", book.items) == ["2026-12-01"]


def test_evidence_items_are_numbered_once_each() -> None:
    book = evidence()
    again = book.add("list_invoices", "INV-0001-05", "period", "2026-09-25 to 2026-10-25")
    assert again["id"] == book.items[-1]["id"] and len({i["id"] for i in book.items}) == len(book.items)


@pytest.mark.parametrize(
    ("text", "customer", "month", "amount", "language"),
    [
        ("客户C-0007说9月扣了174.90美元", "C-0007", 9, Decimal("174.90"), "zh"),
        ("我们早就申请取消订阅了,怎么 9 月还扣了 174.90 美元?", None, 9, Decimal("174.90"), "zh"),
        ("c-0042 why did you charge me 1,174.90 in September?", "C-0042", 9, Decimal("1174.90"), "en"),
        ("you may have charged twice: 12.00 on 2026-05-03", None, 5, Decimal("12.00"), "en"),
    ],
)
def test_complaints_are_read_for_customer_month_amount_and_language(
    text: str, customer: str | None, month: int, amount: Decimal, language: str
) -> None:
    parsed = parse_complaint(text)
    # The customer's id is found in the ledger (here one holding C-0007 and C-0042), not by its shape.
    quoted = next(iter(quoted_ids(text, ["C-0007", "C-0042"])), None)
    assert (quoted, parsed.month, parsed.amount, parsed.language) == (
        customer,
        month,
        amount,
        language,
    )
