"""Reading a complaint: which customer, which month, which amount, which language. Pure text parsing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from agent.prompts import Language, language_of

# ASCII boundaries so "客户C-0007说扣了174.90美元" (no spaces, as people write Chinese) still parses.
CUSTOMER_ID = re.compile(r"\bC-(\d{4,6})\b", re.IGNORECASE | re.ASCII)
# Seed 002's invoice ids: INV-<subscription>-<period>, with an optional suffix (the `D` copy, `-L1`).
INVOICE_ID = re.compile(r"\bINV-\d{4,6}-\d{2}(?:-?[A-Z]\w*)?\b", re.IGNORECASE | re.ASCII)
AMOUNT = re.compile(r"(?<![\w.-])(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?![\d])", re.ASCII)
# "2025年9月" (the year optional), "2025-09" (a date's year and month too), "September 2025" / "Sep 2025".
CHINESE_MONTH = re.compile(r"(?:(20\d{2})\s*年\s*)?(?<!\d)(1[0-2]|0?[1-9])\s*月")
ISO_MONTH = re.compile(r"\b(20\d{2})-(0[1-9]|1[0-2])\b", re.ASCII)
YEAR_AFTER_MONTH = re.compile(r"\s*,?\s*(20\d{2})\b", re.ASCII)
# Months counted back from the ledger's own date: intake has no clock (see Asked.months_back).
RELATIVE_MONTH = (
    (re.compile(r"\blast\s+month(?:'s)?\b|上个?月", re.IGNORECASE), 1),
    (re.compile(r"\bthis\s+month(?:'s)?\b|这个月|本月", re.IGNORECASE), 0),
)
MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
ENGLISH_MONTH = re.compile(
    r"\b(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\b\.?", re.IGNORECASE
)


@dataclass(frozen=True)
class Asked:
    """What the customer pointed at, if anything: it picks the invoice the answer is about."""

    month: int | None = None  # 1–12
    amount: Decimal | None = None
    invoice_id: str | None = None
    year: int | None = None  # with month: "September 2025"; without one the latest such month is meant
    # "last month" = 1, "this month" = 0: counted back from the ledger's as-of date (its latest invoice),
    # resolved by the auditor. Not from today: intake has no clock, and a ledger's dates may be the past.
    months_back: int | None = None


@dataclass(frozen=True)
class Complaint:
    customer_id: str | None
    month: int | None
    amount: Decimal | None
    language: Language
    invoice_id: str | None = None
    year: int | None = None
    months_back: int | None = None

    @property
    def asked(self) -> Asked:
        return Asked(self.month, self.amount, self.invoice_id, self.year, self.months_back)


def parse_complaint(text: str, names: Iterable[str] = ()) -> Complaint:
    """`names`: the customer's names, once known — a name quoted in the words does not set their language."""
    customer = CUSTOMER_ID.search(text)
    amount = AMOUNT.search(text)
    invoice = INVOICE_ID.search(text)
    year, month = _year_and_month(text)
    # A month by name wins: in "we cut seats last month, but the June invoice…" June is the invoice.
    relative = (back for pattern, back in RELATIVE_MONTH if pattern.search(text))
    months_back = None if month is not None else next(relative, None)
    return Complaint(
        customer_id=f"C-{customer.group(1)}" if customer else None,
        month=month,
        amount=Decimal(f"{amount.group(1).replace(',', '')}.{amount.group(2)}") if amount else None,
        language=language_of(text, names),
        invoice_id=invoice.group(0).upper() if invoice else None,
        year=year,
        months_back=months_back,
    )


def _year_and_month(text: str) -> tuple[int | None, int | None]:
    """The first month named, with its year when one is written next to it."""
    for pattern in (CHINESE_MONTH, ISO_MONTH):
        found = pattern.search(text)
        if found:
            year = found.group(1)
            return (int(year) if year else None), int(found.group(2))
    found = ENGLISH_MONTH.search(text)
    if found and not (found.group(1).lower() == "may" and _may_is_a_verb(text, found.start())):
        year = YEAR_AFTER_MONTH.match(text, found.end())
        return (int(year.group(1)) if year else None), MONTHS[found.group(1).lower()]
    return None, None


def _may_is_a_verb(text: str, at: int) -> bool:
    """'may' is a month in 'in May' / 'May invoice', a verb in 'you may have'."""
    before = text[max(0, at - 6) : at].lower()
    return text[at].islower() and not before.rstrip().endswith(("in", "of", "for"))
