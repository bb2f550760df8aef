"""Block Kit primitives as plain dicts, and the text helpers every card shares."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from bot.cards.limits import (
    MAX_CONFIRM_BUTTON,
    MAX_CONFIRM_TEXT,
    MAX_CONFIRM_TITLE,
    MAX_CONTEXT_TEXT,
    MAX_FIELD_TEXT,
    MAX_HEADER_TEXT,
    MAX_SECTION_TEXT,
    truncate,
)
from engine.money import fmt, fmt_amount

Block = dict[str, Any]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CUT_ENTITY = re.compile(r"&[a-z]{0,3}…$")


def escape(text: str) -> str:
    """Slack mrkdwn control characters in text we did not write (customers' words, descriptions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    """Someone else's text, escaped and then cut to `limit` characters (escaping can triple its length,
    so the cut comes after it, and never through the middle of an entity). Control characters go: they
    would print as nothing and cost six characters each in the JSON."""
    cut = truncate(escape(_CONTROL.sub("", text)), limit)
    return _CUT_ENTITY.sub("…", cut)


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def header(block_id: str, text: str) -> Block:
    return {"type": "header", "block_id": block_id, "text": plain(truncate(text, MAX_HEADER_TEXT))}


def section(block_id: str, text: str) -> Block:
    return {"type": "section", "block_id": block_id, "text": mrkdwn(truncate(text, MAX_SECTION_TEXT))}


def fields(block_id: str, texts: Sequence[str]) -> Block:
    return {
        "type": "section",
        "block_id": block_id,
        "fields": [mrkdwn(truncate(t, MAX_FIELD_TEXT)) for t in texts],
    }


def context(block_id: str, *texts: str) -> Block:
    return {
        "type": "context",
        "block_id": block_id,
        "elements": [mrkdwn(truncate(t, MAX_CONTEXT_TEXT)) for t in texts],
    }


def divider(block_id: str) -> Block:
    return {"type": "divider", "block_id": block_id}


def button(
    text: str,
    action_id: str,
    value: str,
    style: str | None = None,
    confirm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "action_id": action_id, "text": plain(text), "value": value}
    if style:
        element["style"] = style
    if confirm:
        element["confirm"] = confirm
    return element


def confirm_dialog(title: str, text: str, confirm: str, deny: str, *, danger: bool = False) -> dict[str, Any]:
    """Block Kit's `confirm` object: Slack asks "are you sure?" before the click is sent at all."""
    dialog: dict[str, Any] = {
        "title": plain(truncate(title, MAX_CONFIRM_TITLE)),
        "text": plain(truncate(text, MAX_CONFIRM_TEXT)),
        "confirm": plain(truncate(confirm, MAX_CONFIRM_BUTTON)),
        "deny": plain(truncate(deny, MAX_CONFIRM_BUTTON)),
    }
    if danger:
        dialog["style"] = "danger"
    return dialog


def actions(block_id: str, *elements: dict[str, Any]) -> Block:
    return {"type": "actions", "block_id": block_id, "elements": list(elements)}


def quoted_code(text: str, limit: int) -> str:
    """Text in a code block, easy to copy as it is; backtick fences inside it are broken up."""
    return f"```{clip(text.replace('```', 'ʼʼʼ'), limit)}```"


def quote(text: str, limit: int) -> str:
    """Someone's words as a Slack block quote, escaped, at most about `limit` characters."""
    lines = clip(text, limit).splitlines() or [""]
    return "\n".join(f">{line}" for line in lines)


def amount(value: Decimal, currency: str) -> str:
    """ "123.60 USD", "12000 JPY": every amount a card shows goes with its currency, in its decimals."""
    return fmt_amount(value, currency)


def signed(value: Decimal) -> str:
    """+12.00 / -3.50 / 0.00: differences read better with their sign."""
    text = fmt(value)
    return text if value <= 0 else f"+{text}"


def day(value: date | datetime) -> str:
    return value.date().isoformat() if isinstance(value, datetime) else value.isoformat()


def slack_time(when: datetime) -> str:
    """A timestamp Slack shows in each reader's own time zone, with a UTC fallback."""
    utc = when.astimezone(UTC)
    fallback = utc.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(utc.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def user(user_id: str) -> str:
    return f"<@{user_id}>"


def humanise(code: str) -> str:
    """A snake_case root cause as words: duplicate_charge → duplicate charge."""
    return code.replace("_", " ")


@dataclass(frozen=True)
class Bounded:
    """Rows that fit a budget, and how many were left out."""

    rows: list[str]
    left_out: int


def bounded_rows(rows: Sequence[str], *, max_rows: int, max_chars: int) -> Bounded:
    """The first rows that fit both the row cap and the character budget (newline-joined)."""
    kept: list[str] = []
    used = 0
    for row in rows[:max_rows]:
        cost = len(row) + 1
        if used + cost > max_chars:
            break
        kept.append(row)
        used += cost
    return Bounded(kept, len(rows) - len(kept))


def more_line(left_out: int, command: str) -> str:
    return f"_…and {left_out} more — `{command}` for all_"
