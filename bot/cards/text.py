"""Block Kit as plain text, the way a person reads the card (for the demo and terminal output)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

LINK = re.compile(r"<([^|>]+)\|([^>]+)>")
MENTION = re.compile(r"<@([A-Z0-9]+)>")


BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
CODE = re.compile(r"```|`")


def _plain(text: str) -> str:
    """Slack mrkdwn as a terminal shows it: links by their label, no bold stars or code ticks."""
    text = MENTION.sub(r"@\1", LINK.sub(r"\2", text))
    text = CODE.sub("", BOLD.sub(r"\1", text))
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _wrap(text: str, indent: str, width: int) -> list[str]:
    lines: list[str] = []
    for raw in _plain(text).splitlines() or [""]:
        lines.extend(textwrap.wrap(raw, width, initial_indent=indent, subsequent_indent=indent) or [indent])
    return lines


def _text_of(obj: Mapping[str, Any] | None) -> str:
    return str(obj.get("text", "")) if obj else ""


def render_blocks(blocks: Iterable[Mapping[str, Any]], width: int = 100) -> str:
    out: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            title = _plain(_text_of(block.get("text")))
            out += [title, "═" * min(len(title), width)]
        elif kind == "section":
            if block.get("text"):
                out += _wrap(_text_of(block.get("text")), "", width)
            for field in block.get("fields") or []:
                out += _wrap(_text_of(field), "  ", width)
        elif kind == "context":
            out += _wrap(" · ".join(_text_of(e) for e in block.get("elements") or []), "  ┆ ", width)
        elif kind == "divider":
            out.append("─" * width)
        elif kind == "actions":
            out.append("  ".join(f"[ {_text_of(e.get('text'))} ]" for e in block.get("elements") or []))
        elif kind == "input":
            out.append(f"{_text_of(block.get('label'))}: ______")
    return "\n".join(out)
