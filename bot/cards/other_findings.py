"""The account's other overpaid invoices under a case's card (the evidence card or the explanation): one
line each with an `Open a case` button (value `<case id> <invoice id>`), or the linked case opened for it,
or the open note that already credits it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.cards.blocks import Block, amount, button, context, escape, humanise, section
from bot.cards.ids import OPEN_LINKED_CASE_ACTION_ID
from bot.cards.models import OtherFindingView

MAX_SHOWN = 5  # each is a block; the rest are counted (`billsleuth case show` lists them all)
OPEN_A_CASE = "Open a case"


def other_findings_blocks(
    case_id: str, others: Sequence[OtherFindingView], currency: str, bid: Callable[[str], str]
) -> list[Block]:
    if not others:
        return []
    blocks: list[Block] = [
        section(
            bid("others"),
            f"*Also overpaid on this account* ({len(others)}), verified by a fresh recomputation; "
            "this case does not credit them:",
        )
    ]
    for n, other in enumerate(others[:MAX_SHOWN]):
        blocks.append(_finding_block(case_id, other, currency, bid(f"other{n}")))
    if len(others) > MAX_SHOWN:
        left = len(others) - MAX_SHOWN
        blocks.append(context(bid("others_more"), f"…and {left} more: `billsleuth case show {case_id}`"))
    return blocks


def _finding_block(case_id: str, other: OtherFindingView, currency: str, block_id: str) -> Block:
    text = (
        f"• `{escape(other.invoice_id)}` overcharged {amount(other.overcharge, currency)} "
        f"({escape(humanise(other.root_cause))})"
    )
    if other.linked_case_id is not None:
        return section(block_id, f"{text} · case `{escape(other.linked_case_id)}`")
    if other.credited_by is not None:  # a case may not draft a second note on it: no button
        return section(block_id, f"{text} · being credited by `{escape(other.credited_by)}`")
    block = section(block_id, text)
    block["accessory"] = button(OPEN_A_CASE, OPEN_LINKED_CASE_ACTION_ID, f"{case_id} {other.invoice_id}")
    return block
