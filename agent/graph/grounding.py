"""Evidence and grounding: every number a message states must be one the ledger's tools returned.

Evidence items are harvested from tool results (not from anything a model wrote). A text is grounded when
each number in it — once ids, dates and evidence references are taken out — equals a number that appears in
some evidence item, and each date in it is a date that appears in the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from agent.graph.state import EvidenceItem
from agent.i18n import number_pattern, parse_number
from agent.language import Language

# ASCII word boundaries: in Unicode mode a CJK character counts as a word character, which would hide
# "174.90" in "多收了174.90美元" from the check.
ID_PATTERN = re.compile(r"\b(?:INV|PAY|CN|SUB|EV|CASE|C)-[0-9A-Za-z-]+", re.IGNORECASE | re.ASCII)
EVIDENCE_REF = re.compile(r"\[E\d+\]", re.ASCII)
DATE_PATTERN = re.compile(r"\b\d{4}-\d{2}-\d{2}\b", re.ASCII)
# A number is a run of digits (with thousands marks and decimals, as the text's language writes them: see
# agent.i18n.number_pattern) wherever it stands — "174.90USD", "USD174.90", "174.90." — but never part of
# a longer number. English: "1,650.06"; German: "1.650,06"; French: "1 650,06".


class EvidenceBook:
    """Accumulates evidence items E1, E2, … from tool results, without duplicates."""

    def __init__(self, items: Iterable[EvidenceItem] = ()) -> None:
        self.items: list[EvidenceItem] = list(items)
        self._seen = {(i["tool"], i["ref"], i["claim"], i["value"]) for i in self.items}

    def add(self, tool: str, ref: str, claim: str, value: str) -> EvidenceItem:
        key = (tool, ref, claim, value)
        for item in self.items:
            if (item["tool"], item["ref"], item["claim"], item["value"]) == key:
                return item
        item: EvidenceItem = {
            "id": f"E{len(self.items) + 1}",
            "tool": tool,
            "ref": ref,
            "claim": claim,
            "value": value,
        }
        self.items.append(item)
        self._seen.add(key)
        return item

    def find(self, tool: str, ref: str, claim: str) -> EvidenceItem | None:
        return next(
            (i for i in self.items if i["tool"] == tool and i["ref"] == ref and i["claim"] == claim),
            None,
        )

    def harvest(self, tool: str, data: Any) -> None:
        harvester = _HARVESTERS.get(tool)
        if harvester is not None and isinstance(data, dict):
            harvester(self, data)


def _invoice_header(book: EvidenceBook, tool: str, inv: dict[str, Any]) -> None:
    ref = inv["id"]
    book.add(tool, ref, "period", f"{inv['period_start']} to {inv['period_end']}")
    book.add(tool, ref, "issued on", inv["issued_at"])
    for key in ("subtotal", "discount", "tax", "total"):
        book.add(tool, ref, key, inv[key])


def _list_invoices(book: EvidenceBook, data: dict[str, Any]) -> None:
    for inv in data.get("invoices", []):
        _invoice_header(book, "list_invoices", inv)


def _get_invoice(book: EvidenceBook, data: dict[str, Any]) -> None:
    _invoice_header(book, "get_invoice", data)
    for line in data.get("lines", []):
        book.add("get_invoice", data["id"], f"{line['kind']} line: {line['description']}", line["amount"])
        book.add("get_invoice", data["id"], f"quantity on {line['description']}", str(line["quantity"]))
        book.add("get_invoice", data["id"], f"unit amount on {line['description']}", line["unit_amount"])


def _list_payments(book: EvidenceBook, data: dict[str, Any]) -> None:
    for p in data.get("payments", []):
        book.add(
            "list_payments",
            p["id"],
            f"{p['status']} payment on {p['invoice_id']} at {p['attempted_at']}",
            p["amount"],
        )


def _list_events(book: EvidenceBook, data: dict[str, Any]) -> None:
    for ev in data.get("events", []):
        payload = ", ".join(f"{k}={v}" for k, v in sorted(ev.get("payload", {}).items()))
        book.add(
            "list_subscription_events",
            ev["id"],
            f"{ev['type']} ({payload}) on the customer's local date",
            ev["customer_local_date"],
        )


def _price_book(book: EvidenceBook, data: dict[str, Any]) -> None:
    for plan in data.get("plans", []):
        book.add("get_price_book", plan["id"], f"unit price of {plan['name']}", plan["unit_price"])
    for rate in data.get("tax_rates", []):
        window = f"{rate['valid_from']} to {rate['valid_to'] or 'now'}"
        percent = f"{(Decimal(rate['rate']) * 100).normalize():f}"
        book.add(
            "get_price_book", rate["code"], f"tax rate for {rate['region']} valid {window} (percent)", percent
        )
    for coupon in data.get("coupons", []):
        book.add(
            "get_price_book",
            coupon["id"],
            f"{coupon['kind']} coupon for {coupon['duration_months']} months",
            coupon["value"],
        )


def _recompute(book: EvidenceBook, data: dict[str, Any]) -> None:
    ref, tool = data["invoice_id"], "recompute_invoice"
    book.add(tool, ref, "billed total", data["billed_total"])
    book.add(tool, ref, "should have billed (reference rules)", data["should_bill"])
    book.add(tool, ref, "paid (successful payments)", data["paid_total"])
    book.add(tool, ref, "successful payments", str(data["successful_payments"]))
    book.add(tool, ref, "overcharge (paid − should have paid)", data["overcharge"])
    book.add(tool, ref, "verdict", data["verdict"])
    for d in data.get("line_diffs", []):
        label = d["billed_description"] or d["expected_description"]
        book.add(tool, ref, f"{d['kind']} line billed: {label}", d["billed"])
        book.add(
            tool, ref, f"{d['kind']} line per rules: {d['expected_description'] or 'none'}", d["expected"]
        )
    for line in data.get("expected_lines", []):
        book.add(tool, ref, f"rules' {line['kind']} line: {line['description']}", line["amount"])


_HARVESTERS = {
    "list_invoices": _list_invoices,
    "get_invoice": _get_invoice,
    "list_payments": _list_payments,
    "list_subscription_events": _list_events,
    "get_price_book": _price_book,
    "recompute_invoice": _recompute,
}


def _as_decimal(token: str, language: Language) -> Decimal | None:
    try:
        return parse_number(token, language)
    except InvalidOperation:
        return None


def numbers_in(text: str, language: Language = "en") -> tuple[set[Decimal], set[str]]:
    """The numbers and ISO dates a text states, read as `language` writes numbers ("1.650,06" is 1650.06
    in German, 1.65 nowhere); ids and evidence references are not numbers."""
    text = EVIDENCE_REF.sub(" ", ID_PATTERN.sub(" ", text))
    dates = set(DATE_PATTERN.findall(text))
    text = DATE_PATTERN.sub(" ", text)
    tokens = number_pattern(language).findall(text)
    numbers = {n for n in (_as_decimal(t, language) for t in tokens) if n is not None}
    return numbers, dates


def grounded_values(evidence: Iterable[EvidenceItem]) -> tuple[set[Decimal], set[str]]:
    numbers: set[Decimal] = set()
    dates: set[str] = set()
    for item in evidence:
        for text in (item["claim"], item["value"]):
            found_numbers, found_dates = numbers_in(text)
            numbers |= found_numbers
            dates |= found_dates
            for day in found_dates:  # a date's parts (2026, 9, 25) may be stated on their own
                numbers |= {Decimal(part) for part in day.split("-")}
    return {n.copy_abs() for n in numbers}, dates


def without_ids(text: str, evidence: Iterable[EvidenceItem]) -> str:
    """The text less the ids its evidence is about (invoices, payments, plans, as the ledger names them):
    the digits of `in_1PzQ` or `cus_8f3aQz` are not figures, whatever shape the ids have."""
    refs = sorted({item["ref"] for item in evidence if item["ref"]}, key=len, reverse=True)
    for ref in refs:
        text = text.replace(ref, " ")
    return text


def ungrounded(text: str, evidence: Iterable[EvidenceItem], language: Language = "en") -> list[str]:
    """Numbers and dates in `text`, written in `language`, that no evidence item supports (empty when the
    text is grounded). The evidence is the ledger's own: its numbers are always written "1650.06"."""
    evidence = list(evidence)
    allowed_numbers, allowed_dates = grounded_values(evidence)
    numbers, dates = numbers_in(without_ids(text, evidence), language)
    bad = [f"{n}" for n in sorted(numbers) if n.copy_abs() not in allowed_numbers]
    bad += sorted(d for d in dates if d not in allowed_dates)
    return bad
