"""The explain-only result: what happened, and the reply to send the customer (no credit note)."""

from __future__ import annotations

from bot.cards.blocks import clip, context, escape, header, humanise, quote, quoted_code, section
from bot.cards.ids import block_id
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import ExplanationView, Message
from bot.cards.other_findings import other_findings_blocks

MAX_NAME = 80
MAX_COMPLAINT = 600
MAX_EXPLANATION = 2800
MAX_REPLY = 2800


def explanation_message(view: ExplanationView) -> Message:
    def bid(part: str) -> str:
        return block_id("case", view.case_id, part, view.revision)

    verdict = (
        f"Explained: {humanise(view.root_cause)}" if view.root_cause else "Explained: the bill was right"
    )
    invoices = ", ".join(f"`{escape(i)}`" for i in view.invoice_ids[:10])
    blocks = [
        header(bid("head"), f"Case {view.case_id} · {verdict}"),
        section(
            bid("customer"),
            f"*{clip(view.customer.name, MAX_NAME)}* (`{escape(view.customer.id)}`)\n"
            + quote(view.complaint, MAX_COMPLAINT),
        ),
        section(bid("explain"), "*What happened*\n" + clip(view.explanation, MAX_EXPLANATION)),
        section(
            bid("reply"),
            "*Reply to the customer* (copy it as it is)\n" + quoted_code(view.customer_reply, MAX_REPLY),
        ),
    ]
    if invoices:
        blocks.append(context(bid("refs"), f"Invoices looked at: {invoices} · no credit note was drafted"))
    if view.model_line:
        blocks.append(context(bid("model"), clip(view.model_line, 500)))
    blocks += other_findings_blocks(view.case_id, view.other_findings, view.customer.currency, bid)
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    return Message(text=f"Case {escape(view.case_id)}: {clip(verdict, 150)}", blocks=blocks)
