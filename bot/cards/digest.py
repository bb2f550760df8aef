"""The findings digest: the overcharges the findings sweep found that no digest listed before.

Count and total per currency (never one sum across currencies), then the largest findings (compared
within their currency, the currencies taking turns) up to ten, each with an `Open case` button, and the
rest counted. Pure: the presenter (bot/presenters/digest.py) reads the database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from bot.cards.blocks import Block, amount, button, clip, context, header, humanise, section
from bot.cards.ids import SWEEP_OPEN_CASE_ACTION_ID, block_id
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import Message
from engine.money import fmt, total

MAX_SHOWN = 10  # findings with a button; the rest are counted
MAX_NAME = 60


@dataclass(frozen=True)
class DigestItem:
    invoice_id: str
    overcharge: Decimal
    currency: str
    customer_id: str
    customer_name: str
    root_cause: str
    case_id: str | None = None  # the case opened from its `Open case`
    credited_by: str | None = None  # the open credit note another case has on its invoice

    @property
    def settled_elsewhere(self) -> bool:
        """Its button gives way: a case was opened from it, or its invoice is being credited."""
        return self.case_id is not None or self.credited_by is not None

    def value(self, as_of: date) -> str:
        """The `Open case` button's value: the finding's key, and the date the digest's audit judged up
        to (so a redraw needs no lookup of the digest itself)."""
        return f"{self.invoice_id} {fmt(self.overcharge)} {as_of.isoformat()}"


@dataclass(frozen=True)
class DigestView:
    as_of: date
    items: tuple[DigestItem, ...]  # every finding the digest lists


@dataclass(frozen=True)
class ClickedFinding:
    invoice_id: str
    overcharge: Decimal
    as_of: date


def read_finding_value(value: str) -> ClickedFinding | None:
    """What an `Open case` button carries; None for anything else."""
    parts = value.split()
    if len(parts) != 3:
        return None
    try:
        return ClickedFinding(parts[0], Decimal(parts[1]), date.fromisoformat(parts[2]))
    except (ArithmeticError, ValueError):
        return None


def shown_findings(items: Sequence[DigestItem], limit: int = MAX_SHOWN) -> list[DigestItem]:
    """The largest findings, compared only within a currency; each currency takes a turn, so one busy
    currency cannot hide another's largest."""
    queues: dict[str, list[DigestItem]] = defaultdict(list)
    for item in sorted(items, key=lambda i: (-i.overcharge, i.invoice_id)):
        queues[item.currency].append(item)
    shown: list[DigestItem] = []
    while len(shown) < limit and any(queues.values()):
        for currency in sorted(queues):
            if queues[currency] and len(shown) < limit:
                shown.append(queues[currency].pop(0))
    return sorted(shown, key=lambda i: (i.currency, -i.overcharge, i.invoice_id))


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _totals(items: Sequence[DigestItem]) -> list[str]:
    lines = []
    for currency in sorted({i.currency for i in items}):
        mine = [i for i in items if i.currency == currency]
        overcharge = amount(total(i.overcharge for i in mine), currency)
        lines.append(f"• *{currency}*: {_count(len(mine), 'finding')}, {overcharge} in total")
    return lines


def _line(item: DigestItem) -> str:
    who = f"{clip(item.customer_name, MAX_NAME)} (`{item.customer_id}`)"
    money = amount(item.overcharge, item.currency)
    line = f"*{money}* on `{item.invoice_id}` · {who} · {humanise(item.root_cause)}"
    if item.case_id is not None:
        return f"{line} · case `{item.case_id}` opened"
    if item.credited_by is not None:
        return f"{line} · being credited by `{item.credited_by}`"
    return line


def digest_message(view: DigestView) -> Message:
    """The digest; redrawn each time a case is opened from it (that finding's button gives way to the
    case id), each redraw a new revision of block ids so a click on an older one is recognisable."""
    key = view.as_of.isoformat()
    items = list(view.items)
    revision = sum(i.settled_elsewhere for i in items)
    shown = shown_findings(items)
    headline = f"Findings sweep: {_count(len(items), 'new overcharge')}"
    intro = (
        f"The audit of every customer (as of {key}) found overcharges no digest listed before and "
        "nobody is crediting yet:\n" + "\n".join(_totals(items))
    )
    blocks: list[Block] = [
        header(block_id("sweep", key, "head", revision), headline),
        section(block_id("sweep", key, "totals", revision), intro),
    ]
    for n, item in enumerate(shown):
        row = section(block_id("sweep", key, f"f{n}", revision), _line(item))
        if not item.settled_elsewhere:
            row["accessory"] = button("Open case", SWEEP_OPEN_CASE_ACTION_ID, item.value(view.as_of))
        blocks.append(row)
    rest = len(items) - len(shown)
    if rest:
        by_currency = defaultdict(int)
        for item in items:
            by_currency[item.currency] += 1
        for item in shown:
            by_currency[item.currency] -= 1
        split = ", ".join(f"{c} {n}" for c, n in sorted(by_currency.items()) if n)
        more = f"…and {rest} more not shown ({split}): `billsleuth sweep` lists them all."
        blocks.append(context(block_id("sweep", key, "more", revision), more))
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=headline, blocks=blocks)


def finding_notice(text: str) -> Message:
    """To the clicker alone: why an `Open case` click opened nothing."""
    blocks = [section("sweep_notice", f":information_source: {text}")]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=text, blocks=blocks)


def finding_had_case(invoice_id: str, case_id: str) -> Message:
    return finding_notice(f"`{invoice_id}` already has case `{case_id}`; no second case was opened.")


def finding_being_credited(invoice_id: str, credit_note_id: str, case_id: str | None) -> Message:
    """Since the digest was posted, another case drafted a note on the finding's invoice."""
    case = f" (case `{case_id}`)" if case_id else ""
    return finding_notice(
        f"`{invoice_id}` is already being credited by `{credit_note_id}`{case}; no case was opened."
    )
