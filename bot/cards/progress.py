"""The live progress message: what the investigation has done so far, updated in place with chat.update."""

from __future__ import annotations

from collections.abc import Sequence

from bot.cards.blocks import bounded_rows, clip, context, escape, section, user
from bot.cards.ids import block_id
from bot.cards.limits import CARD_BLOCKS_JSON_BUDGET, check_blocks
from bot.cards.models import Message, ProgressStep, ProgressView

MAX_STEPS_SHOWN = 12
MAX_STEP_CHARS = 200
STEPS_CHAR_BUDGET = 2600

_ICONS = {"tool": ":mag:", "finding": ":pushpin:", "note": ":speech_balloon:", "error": ":warning:"}
_STATE = {
    "running": ":hourglass_flowing_sand: Investigating…",
    "done": ":white_check_mark: Investigation finished",
    "failed": ":x: Investigation stopped",
}


def progress_message(view: ProgressView) -> Message:
    def bid(part: str) -> str:
        return block_id("case", view.case_id, part, view.revision)

    blocks = [
        section(
            bid("head"),
            f"*Case {escape(view.case_id)}* · customer `{escape(view.customer_id)}` · "
            f"asked by {user(view.requested_by)}\n{_STATE[view.state]}",
        ),
        section(bid("steps"), _steps_text(view.steps)),
        context(bid("tally"), _tally(view.steps)),
    ]
    check_blocks(blocks, "message", CARD_BLOCKS_JSON_BUDGET)
    latest = f": {clip(view.steps[-1].text, 80)}" if view.steps else ""  # the text pings too
    return Message(text=f"Case {view.case_id}: {_STATE[view.state]}{latest}", blocks=blocks)


def _steps_text(steps: Sequence[ProgressStep]) -> str:
    rows = [f"{_ICONS[s.kind]} {clip(s.text, MAX_STEP_CHARS)}" for s in steps]
    if not rows:
        return "_Starting: reading the customer's ledger…_"
    # The newest steps matter most while it runs: keep the tail, summarise the head.
    shown = bounded_rows(rows[::-1], max_rows=MAX_STEPS_SHOWN, max_chars=STEPS_CHAR_BUDGET)
    text = "\n".join(reversed(shown.rows))
    if shown.left_out:
        text = f"_…{shown.left_out} earlier steps_\n{text}"
    return text


def _tally(steps: Sequence[ProgressStep]) -> str:
    tools = sum(1 for s in steps if s.kind == "tool")
    findings = sum(1 for s in steps if s.kind == "finding")
    return f"{tools} tool call{'s' * (tools != 1)} · {findings} finding{'s' * (findings != 1)}"
