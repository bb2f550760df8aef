"""Intake, pure: the months a complaint names (relative, with a year, abbreviated), the language of the
customer's own words, and the invoice the auditor takes for a month when the ledger spans years."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from agent.auditor.audit import asked_period, audit_customer, investigate
from agent.cases.intake import Asked, parse_complaint
from agent.graph.prompts import ask_for_customer, language_of
from engine.billing import build_invoices
from engine.diff import ledger_as_of
from engine.model import Customer, CustomerLedger, Event, Payment, PriceBook, Subscription
from engine.pricebook import COUPONS, PLANS, TAX_RATES

BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))


@pytest.mark.parametrize(
    ("text", "year", "month", "months_back"),
    [
        ("why was last month's invoice so high?", None, None, 1),
        ("We were charged 53.55 last month", None, None, 1),
        ("this month you charged us twice", None, None, 0),
        ("上个月扣了 53.55 美元", None, None, 1),
        ("上月的账单不对", None, None, 1),
        ("本月的账单不对", None, None, 0),
        ("the 2025-09 invoice is wrong", 2025, 9, None),
        ("charged twice on 2025-09-08", 2025, 9, None),
        ("what happened in Sept.?", None, 9, None),
        ("our September 2025 invoice", 2025, 9, None),
        ("the Sep 2025 charge", 2025, 9, None),
        ("the Sept. 2025 charge", 2025, 9, None),
        ("2025年9月的账单多收了", 2025, 9, None),
        ("9 月的账单多收了", None, 9, None),
        # A month by name is the invoice's, even when the customer also says "last month" about something
        # else (the benchmark's seat-reduction complaints read so).
        ("We reduced our seats last month, but the June invoice of $53.55 is not lower.", None, 6, None),
        ("我们上个月把席位减了,9 月的账单 53.55 好像没变少。", None, 9, None),
        ("you may have charged us twice", None, None, None),
    ],
)
def test_the_month_a_complaint_names(
    text: str, year: int | None, month: int | None, months_back: int | None
) -> None:
    parsed = parse_complaint(text)
    assert (parsed.year, parsed.month, parsed.months_back) == (year, month, months_back)
    assert parsed.asked == Asked(parsed.month, parsed.amount, None, year, months_back)


@pytest.mark.parametrize(
    ("text", "names", "language"),
    [
        ("Hi, this is 星河咨询 — why were we charged 1,650.06 in July?", ("星河咨询",), "en"),
        ("Hi, this is 星河咨询 — why were we charged 1,650.06 in July?", (), "en"),
        ("星河咨询: why were we charged twice?", ("星河咨询",), "en"),
        ("Helio Freight 说我们七月被多扣了 1,650.06 美元", ("Helio Freight",), "zh"),
        ("helio freight-042 的 INV-0042-03 为什么扣了两次?", ("Helio Freight-042",), "zh"),
        ("客户C-0007说扣了174.90美元", (), "zh"),
        ("ap@星河.example.com asks about INV-0007-03", (), "en"),
        ("星河咨询", ("星河咨询",), "zh"),  # nothing but the name: it is all there is to go on
    ],
)
def test_the_reply_language_follows_the_customers_words_not_a_name_quoted_in_them(
    text: str, names: tuple[str, ...], language: str
) -> None:
    assert language_of(text, names) == language
    assert parse_complaint(text, names).language == language


def test_the_cli_is_told_to_give_an_id_on_the_command_line_not_to_mention_anyone() -> None:
    for language in ("en", "zh"):
        cli = ask_for_customer(language, from_cli=True)  # type: ignore[arg-type]
        assert "billsleuth case open C-0007" in cli and "mention" not in cli.lower()
    assert "Mention me" in ask_for_customer("en")


# ---------- a ledger over three Septembers ----------

START = date(2024, 9, 3)


def three_septembers(*extra: tuple[str, int]) -> CustomerLedger:
    """A monthly subscription from September 2024 to October 2026, each invoice paid once; `extra` charges
    (invoice id, how many more times) are double charges."""
    customer = Customer("C-0900", "Long Haul GmbH", "DE", "USD", "DE")
    create = Event("EV-0900-1", "create", _at(START), {"plan_id": "starter-m", "quantity": 3})
    sub = Subscription("SUB-0900", customer.id, START, START.day, None, [create])
    invoices = build_invoices(customer, sub, BOOK.plans, None, BOOK.tax_rates, until=date(2026, 10, 15))
    again = dict(extra)
    payments = [
        Payment(f"PAY-{inv.id}-{n}", inv.id, inv.total, "succeeded", _at(inv.issued_at), f"gw-{inv.id}-{n}")
        for inv in invoices
        for n in range(1 + again.get(inv.id, 0))
    ]
    return CustomerLedger(customer, [sub], invoices, payments, [])


def _at(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def september(ledger: CustomerLedger, year: int) -> str:
    return next(i.id for i in ledger.invoices if (i.issued_at.year, i.issued_at.month) == (year, 9))


def test_a_month_without_a_year_is_its_latest_on_the_ledger_and_a_year_picks_that_one() -> None:
    ledger = three_septembers()
    as_of = ledger_as_of(ledger)
    assert as_of == date(2026, 10, 3)
    assert asked_period(ledger, as_of, Asked(month=9)) == (2026, 9)
    assert asked_period(ledger, as_of, Asked(month=11)) == (2025, 11)
    assert asked_period(ledger, as_of, Asked(month=9, year=2025)) == (2025, 9)
    assert asked_period(ledger, as_of, Asked(months_back=1)) == (2026, 9)
    assert asked_period(ledger, as_of, Asked(months_back=0)) == (2026, 10)
    assert asked_period(ledger, date(2026, 1, 3), Asked(months_back=1)) == (2025, 12)
    for asked, year in (
        (Asked(month=9), 2026),
        (Asked(month=9, year=2024), 2024),
        (Asked(months_back=1), 2026),
    ):
        assert investigate(ledger, BOOK, as_of, asked).invoice_ids == [september(ledger, year)]


def test_among_overcharged_septembers_the_latest_is_meant_unless_a_year_is_given() -> None:
    plain = three_septembers()
    # September 2025 charged three times (the larger overcharge), September 2026 twice.
    ledger = three_septembers((september(plain, 2025), 2), (september(plain, 2026), 1))
    as_of = ledger_as_of(ledger)
    assert len(audit_customer(ledger, BOOK, as_of)) == 2
    latest, earlier = september(ledger, 2026), september(ledger, 2025)
    assert investigate(ledger, BOOK, as_of).invoice_ids == [earlier]  # nothing named: the largest
    for text, meant in (
        ("why were we charged twice in September?", latest),
        ("why were we charged twice in Sept. 2025?", earlier),
        ("2025年9月扣了三次", earlier),
        ("the 2025-09 invoice was charged three times", earlier),
        ("last month you charged us twice", latest),
    ):
        result = investigate(ledger, BOOK, as_of, parse_complaint(text).asked)
        assert result.invoice_ids == [meant], text
        assert result.asked["invoice_id"] == meant and result.asked["overpaid"]


def test_an_amount_nowhere_on_the_account_is_said_so_with_the_invoices_of_the_month_named() -> None:
    ledger = three_septembers()
    as_of = ledger_as_of(ledger)
    nowhere = investigate(ledger, BOOK, as_of, parse_complaint("99.00 in September 2025?").asked).asked
    assert (nowhere["amount"], nowhere["amount_on_account"]) == ("99.00", False)
    assert (nowhere["period"], nowhere["listed"]) == ("2025-09", [september(ledger, 2025)])
    total = ledger.invoices[0].total
    found = investigate(ledger, BOOK, as_of, Asked(amount=total)).asked
    assert found["amount_on_account"] and found["invoice_id"] is not None
    latest = investigate(ledger, BOOK, as_of, Asked(amount=Decimal("99.00"))).asked
    assert latest["period"] is None and latest["listed"] == [i.id for i in ledger.invoices[-3:]]
