"""Slack's Block Kit limits (DESIGN.md §5), checked on plain block dicts.

slack_sdk's block models check a single block (text lengths, ids) but not the limits of a whole message:
the block count and the total size that makes Slack answer `msg_blocks_too_long`. Cards are built to fit
and then checked here; the recording Web API server refuses what Slack would refuse, with this code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Surface = Literal["message", "modal", "home"]

MAX_BLOCKS = {"message": 50, "modal": 100, "home": 100}
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_VALUE = 2000
MAX_BUTTON_TEXT = 75
MAX_CONFIRM_TITLE = 100  # a button's `confirm` dialog
MAX_CONFIRM_TEXT = 300
MAX_CONFIRM_BUTTON = 30
MAX_ID = 255  # action_id, block_id, callback_id
MAX_PRIVATE_METADATA = 3000
MAX_VIEW_TITLE = 24
# Slack starts refusing a message's blocks (msg_blocks_too_long) at about 13k characters of JSON;
# cards stay under our own budget so a few long ids or escapes never tip them over.
SLACK_BLOCKS_JSON_LIMIT = 13_000
CARD_BLOCKS_JSON_BUDGET = 12_000

ELLIPSIS = "…"


class CardLimitError(ValueError):
    """Blocks that Slack would refuse."""


def truncate(text: str, limit: int) -> str:
    """At most `limit` characters; a cut text ends with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def blocks_json_size(blocks: Sequence[Mapping[str, Any]]) -> int:
    """The characters the blocks take as compact JSON (what the size limit is about)."""
    return len(json.dumps(list(blocks), ensure_ascii=False, separators=(",", ":")))


def block_problems(
    blocks: Sequence[Mapping[str, Any]], surface: Surface = "message", json_limit: int | None = None
) -> list[str]:
    """Every limit these blocks break, as short sentences; empty when Slack would take them."""
    problems: list[str] = []
    if len(blocks) > MAX_BLOCKS[surface]:
        problems.append(f"{len(blocks)} blocks; a {surface} takes at most {MAX_BLOCKS[surface]}")
    if surface == "message":
        limit = SLACK_BLOCKS_JSON_LIMIT if json_limit is None else json_limit
        size = blocks_json_size(blocks)
        if size > limit:
            problems.append(f"blocks take {size} characters of JSON; the limit is {limit}")
    seen: set[str] = set()
    for index, block in enumerate(blocks):
        where = f"block {index} ({block.get('type')})"
        block_id = block.get("block_id")
        if block_id is not None:
            if len(block_id) > MAX_ID:
                problems.append(f"{where}: block_id longer than {MAX_ID}")
            if block_id in seen:
                problems.append(f"{where}: block_id {block_id!r} is used twice")
            seen.add(block_id)
        problems.extend(f"{where}: {p}" for p in _single_block_problems(block))
    return problems


def check_blocks(
    blocks: Sequence[Mapping[str, Any]], surface: Surface = "message", json_limit: int | None = None
) -> None:
    problems = block_problems(blocks, surface, json_limit)
    if problems:
        raise CardLimitError("; ".join(problems))


def _text_of(obj: Mapping[str, Any] | None) -> str:
    return "" if not obj else str(obj.get("text", ""))


def _single_block_problems(block: Mapping[str, Any]) -> list[str]:
    kind = block.get("type")
    problems: list[str] = []
    if kind == "section":
        if len(_text_of(block.get("text"))) > MAX_SECTION_TEXT:
            problems.append(f"section text longer than {MAX_SECTION_TEXT}")
        fields = block.get("fields") or []
        if len(fields) > MAX_FIELDS:
            problems.append(f"more than {MAX_FIELDS} fields")
        if any(len(_text_of(f)) > MAX_FIELD_TEXT for f in fields):
            problems.append(f"a field longer than {MAX_FIELD_TEXT}")
    elif kind == "header" and len(_text_of(block.get("text"))) > MAX_HEADER_TEXT:
        problems.append(f"header longer than {MAX_HEADER_TEXT}")
    elif kind == "context":
        elements = block.get("elements") or []
        if len(elements) > MAX_CONTEXT_ELEMENTS:
            problems.append(f"more than {MAX_CONTEXT_ELEMENTS} context elements")
        if any(len(_text_of(e)) > MAX_CONTEXT_TEXT for e in elements):
            problems.append(f"a context element longer than {MAX_CONTEXT_TEXT}")
    elif kind == "actions":
        elements = block.get("elements") or []
        if len(elements) > MAX_ACTIONS_ELEMENTS:
            problems.append(f"more than {MAX_ACTIONS_ELEMENTS} elements in an actions block")
        problems.extend(p for e in elements for p in _element_problems(e))
    if kind == "section" and block.get("accessory"):
        problems.extend(_element_problems(block["accessory"]))
    if kind == "input" and block.get("element"):
        problems.extend(_element_problems(block["element"]))
    return problems


def _element_problems(element: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if len(str(element.get("action_id", ""))) > MAX_ID:
        problems.append(f"action_id longer than {MAX_ID}")
    if element.get("type") == "button":
        if len(str(element.get("value", ""))) > MAX_BUTTON_VALUE:
            problems.append(f"button value longer than {MAX_BUTTON_VALUE}")
        if len(_text_of(element.get("text"))) > MAX_BUTTON_TEXT:
            problems.append(f"button text longer than {MAX_BUTTON_TEXT}")
    if element.get("confirm"):
        problems.extend(_confirm_problems(element["confirm"]))
    return problems


def _confirm_problems(confirm: Mapping[str, Any]) -> list[str]:
    limits = {
        "title": MAX_CONFIRM_TITLE,
        "text": MAX_CONFIRM_TEXT,
        "confirm": MAX_CONFIRM_BUTTON,
        "deny": MAX_CONFIRM_BUTTON,
    }
    problems = [
        f"confirm {key} is missing" for key in ("title", "text", "confirm", "deny") if key not in confirm
    ]
    problems.extend(
        f"confirm {key} longer than {limit}"
        for key, limit in limits.items()
        if len(_text_of(confirm.get(key))) > limit
    )
    return problems


def view_problems(view: Mapping[str, Any]) -> list[str]:
    """What Slack would refuse in a modal or Home tab view."""
    surface: Surface = "home" if view.get("type") == "home" else "modal"
    problems = block_problems(view.get("blocks") or [], surface)
    if view.get("type") not in ("modal", "home"):
        problems.append(f"view type must be modal or home, not {view.get('type')!r}")
    if len(str(view.get("private_metadata", ""))) > MAX_PRIVATE_METADATA:
        problems.append(f"private_metadata longer than {MAX_PRIVATE_METADATA}")
    if len(str(view.get("callback_id", ""))) > MAX_ID:
        problems.append(f"callback_id longer than {MAX_ID}")
    if surface == "modal":
        for key in ("title", "submit", "close"):
            if len(_text_of(view.get(key))) > MAX_VIEW_TITLE:
                problems.append(f"{key} longer than {MAX_VIEW_TITLE}")
        if not _text_of(view.get("title")):
            problems.append("a modal needs a title")
    return problems
