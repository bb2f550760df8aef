"""The ids that tie Slack's callbacks back to our cards.

Buttons cannot be disabled, so every revision of a card gets new block_ids: `kind:key:part:rN` (for
example `cn:CN-0001:decide:r3`). A click carries the block_id of the card the person was looking at;
`parse_block_id` gives back its revision, and a listener that finds an older revision than the note's
current one knows the click came from a stale card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.cards.limits import MAX_ID

APPROVE_ACTION_ID = "credit_note_approve"
REJECT_ACTION_ID = "credit_note_reject"
CANCEL_ACTION_ID = "credit_note_cancel"
REQUEST_CHANGES_ACTION_ID = "credit_note_request_changes"
RESUBMIT_ACTION_ID = "case_resubmit"
PICK_CUSTOMER_ACTION_ID = "case_pick_customer"
OPEN_LINKED_CASE_ACTION_ID = "case_open_linked"
SWEEP_OPEN_CASE_ACTION_ID = "sweep_open_case"  # a finding's button on the findings digest
POLICY_APPROVE_ACTION_ID = "policy_change_approve"  # a pending policy change's card
POLICY_REJECT_ACTION_ID = "policy_change_reject"
REQUEST_CHANGES_MODAL_CALLBACK_ID = "credit_note_request_changes_question"
RESUBMIT_MODAL_CALLBACK_ID = "case_resubmit_answer"
ANSWER_BLOCK_ID = "answer"
ANSWER_ACTION_ID = "answer"
REJECT_MODAL_CALLBACK_ID = "credit_note_reject_reason"
CANCEL_MODAL_CALLBACK_ID = "credit_note_cancel_reason"
REJECT_REASON_BLOCK_ID = "reject_reason"
REJECT_REASON_ACTION_ID = "reason"
INVESTIGATE_SHORTCUT_CALLBACK_ID = "investigate_billing"
SLASH_COMMAND = "/billsleuth"

_BLOCK_ID = re.compile(r"^(?P<kind>[a-z]+):(?P<key>.+):(?P<part>[a-z0-9_]+):r(?P<revision>\d+)$")


@dataclass(frozen=True)
class BlockRef:
    kind: str  # "cn" (credit note card), "case" (progress / explanation), "home", "pc" (policy change)
    key: str  # the credit note or case id
    part: str  # which block of the card: "decide", "head", …
    revision: int

    def __str__(self) -> str:
        return block_id(self.kind, self.key, self.part, self.revision)


def block_id(kind: str, key: str, part: str, revision: int) -> str:
    if revision < 0:
        raise ValueError(f"a card revision cannot be negative: {revision}")
    value = f"{kind}:{key}:{part}:r{revision}"
    if len(value) > MAX_ID or _BLOCK_ID.match(value) is None:
        raise ValueError(f"not a usable block_id: {value!r}")
    return value


def parse_block_id(value: str | None) -> BlockRef | None:
    """The parts of one of our block_ids; None for anything else (another app's or Slack's own ids)."""
    match = _BLOCK_ID.match(value or "")
    if match is None:
        return None
    return BlockRef(match["kind"], match["key"], match["part"], int(match["revision"]))
