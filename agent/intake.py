"""Reading a complaint: which customer, which month, which amount, which language. Pure text parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from agent.prompts import Language, language_of

# ASCII boundaries so "客户C-0007说扣了174.90美元" (no spaces, as people write Chinese) still parses.
CUSTOMER_ID = re.compile(r"\bC-(\d{4,6})\b", re.IGNORECASE | re.ASCII)
# Seed 002's invoice ids: INV-<subscription>-<period>, with an optional suffix (the `D` copy, `-L1`).
INVOICE_ID = re.compile(r"\bINV-\d{4,6}-\d{2}(?:-?[A-Z]\w*)?\b", re.IGNORECASE | re.ASCII)
AMOUNT = re.compile(r"(?<![\w.-])(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?![\d])", re.ASCII)
CHINESE_MONTH = re.compile(r"(?<!\d)(1[0-2]|0?[1-9])\s*月")
ISO_MONTH = re.compile(r"\b20\d{2}-(0[1-9]|1[0-2])\b", re.ASCII)
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


@dataclass(frozen=True)
class Complaint:
    customer_id: str | None
    month: int | None
    amount: Decimal | None
    language: Language
    invoice_id: str | None = None

    @property
    def asked(self) -> Asked:
        return Asked(self.month, self.amount, self.invoice_id)


def parse_complaint(text: str) -> Complaint:
    customer = CUSTOMER_ID.search(text)
    amount = AMOUNT.search(text)
    invoice = INVOICE_ID.search(text)
    return Complaint(
        customer_id=f"C-{customer.group(1)}" if customer else None,
        month=_month(text),
        amount=Decimal(f"{amount.group(1).replace(',', '')}.{amount.group(2)}") if amount else None,
        language=language_of(text),
        invoice_id=invoice.group(0).upper() if invoice else None,
    )


def _month(text: str) -> int | None:
    for pattern in (CHINESE_MONTH, ISO_MONTH):
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    found = ENGLISH_MONTH.search(text)
    if found and not (found.group(1).lower() == "may" and _may_is_a_verb(text, found.start())):
        return MONTHS[found.group(1).lower()]
    return None


def _may_is_a_verb(text: str, at: int) -> bool:
    """'may' is a month in 'in May' / 'May invoice', a verb in 'you may have'."""
    before = text[max(0, at - 6) : at].lower()
    return text[at].islower() and not before.rstrip().endswith(("in", "of", "for"))
