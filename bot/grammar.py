"""One grammar for the words people type: the `/billsleuth` slash command, the @mention, and the request
builders the CLI shares with them.

Every parser here turns words into a request (the dataclasses below, run by bot/flows/operations.py), or
says what was wrong in one line (an OperationError); rules about people and money are not checked here
but by approvals/, wherever the request came from. The identity is always given by the caller — the
Slack user who typed or clicked, or the CLI's `--as` — never read from the words themselves.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.cases.intake import quoted_customer_ids
from approvals.models import Decision

# ---- requests: what people ask for, whichever door they use ----------------------------------------------

CREDIT_NOTE_ID = re.compile(r"^CN-\d{4,}$")
CASE_ID = re.compile(r"^CASE-\d{4,}$")
# A vote on a draft (approve, reject), or the end of an approved note that was never issued (cancel).
DECISIONS = (Decision.APPROVE, Decision.REJECT, Decision.CANCEL)


class OperationError(Exception):
    """A request that cannot be carried out: bad input or a refused rule. One line; exit code non-zero."""

    def __init__(self, message: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class OpenCase:
    customer_id: str | None
    message: str
    requester: str
    channel: str | None = None
    thread_ts: str | None = None
    opened_from: str | None = None  # cli:<os account> from the CLI: that OS account may not decide the case


@dataclass(frozen=True)
class ShowCase:
    case_id: str


@dataclass(frozen=True)
class ListNotes:
    pass


@dataclass(frozen=True)
class ShowNote:
    credit_note_id: str
    viewer: str


@dataclass(frozen=True)
class Decide:
    credit_note_id: str
    approver: str
    decision: str  # approve | reject | cancel
    comment: str = ""
    approver_is_bot: bool = False
    source: str | None = (
        None  # slack:<team id> or cli:<os account> (approvals.source); the CLI's door is checked
    )


Request = OpenCase | ShowCase | ListNotes | ShowNote | Decide


MAX_ID = 200


def check_customer_id(value: str) -> str:
    """A customer id as the ledger writes it, any shape (C-0007, cus_8f3aQz): whether the ledger holds it
    is the case's to find out. Seed 002's ids are read in any case (c-0007 is C-0007)."""
    value = value.strip()
    if quoted_customer_ids(value) == [value.upper()]:  # the word is one id, as the ledger writes it
        return value.upper()
    if not value or len(value) > MAX_ID or any(c.isspace() for c in value):
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise OperationError(f"{shown!r} is not a customer id (one word of at most {MAX_ID} characters)")
    return value


def check_credit_note_id(value: str) -> str:
    value = value.strip().upper()
    if not CREDIT_NOTE_ID.match(value):
        raise OperationError(f"{value!r} is not a credit note id (like CN-0001)")
    return value


def check_case_id(value: str) -> str:
    value = value.strip().upper()
    if not CASE_ID.match(value):
        raise OperationError(f"{value!r} is not a case id (like CASE-0001)")
    return value


USAGE = {
    "help": "/billsleuth help",
    "list": "/billsleuth list",
    "show": "/billsleuth show CN-0001",
    "case": "/billsleuth case C-0007 the customer's words…",
    "approve": "/billsleuth approve CN-0001 [note]",
    "reject": "/billsleuth reject CN-0001 reason…",
    "cancel": "/billsleuth cancel CN-0001 reason…",
}
VERBS = tuple(USAGE)

HELP_TEXT = "\n".join(
    [
        "*BillSleuth* — billing cases and credit notes",
        f"• `{USAGE['list']}` — credit notes waiting for a decision",
        f"• `{USAGE['show']}` — the evidence card: fresh recomputation, approvals, the agent's tool trail",
        f"• `{USAGE['case']}` — investigate a customer's complaint here",
        f"• `{USAGE['approve']}` — approve a credit note",
        f"• `{USAGE['reject']}` — reject it (a reason is required)",
        f"• `{USAGE['cancel']}` — cancel an approved note that was never issued (a reason is required)",
        "Or mention me in a thread: `@BillSleuth C-0007 <the customer's words>`.",
    ]
)

# `<@U0BILLSLTH>` or `<@U0BILLSLTH|billsleuth>`: how Slack writes a user mention in message text.
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
# What may stand between a leading customer id and the customer's words: "C-0007: charged twice".
_AFTER_LEADING_ID = r"(?![\w-])[\s:,.;—-]*"


@dataclass(frozen=True)
class Help:
    """`/billsleuth help` (or no words at all)."""


Command = Request | Help


# ---- request builders (the CLI calls these too) ---------------------------------------------------------


def open_case_request(
    customer_id: str | None,
    message: str,
    requester: str,
    *,
    channel: str | None = None,
    thread_ts: str | None = None,
) -> OpenCase:
    words = message.strip()
    if not words:
        raise OperationError("the customer's message is empty: say what the customer wrote")
    checked = check_customer_id(customer_id) if customer_id else None
    return OpenCase(checked, words, requester, channel=channel, thread_ts=thread_ts)


def show_case_request(case_id: str) -> ShowCase:
    return ShowCase(check_case_id(case_id))


def show_note_request(credit_note_id: str, viewer: str) -> ShowNote:
    return ShowNote(check_credit_note_id(credit_note_id), viewer)


def decide_request(credit_note_id: str, approver: str, decision: str, comment: str = "") -> Decide:
    """A decision. A reject or cancel without a reason is still a request: approvals/ refuses it and
    records the refusal, exactly as it would for a click or the CLI."""
    if decision not in DECISIONS:
        raise OperationError(f"a decision is approve, reject or cancel, not {decision!r}")
    return Decide(check_credit_note_id(credit_note_id), approver, decision, (comment or "").strip())


# ---- the slash command ----------------------------------------------------------------------------------


def parse_command(words: str | Sequence[str], user_id: str) -> Command:
    """`/billsleuth …` words → a request made on behalf of `user_id`; OperationError (one line) if bad."""
    tokens = words.split() if isinstance(words, str) else [w for w in words if w.strip()]
    if not tokens:
        return Help()
    verb, rest = tokens[0].lower(), tokens[1:]
    if verb not in VERBS:
        raise OperationError(f"unknown command {tokens[0]!r}; try one of: {', '.join(VERBS)}")
    try:
        return _parse_verb(verb, rest, user_id)
    except OperationError as error:
        raise OperationError(f"{error} — usage: {USAGE[verb]}", error.rule) from None


def _parse_verb(verb: str, rest: list[str], user_id: str) -> Command:
    if verb in ("help", "list"):
        if rest:
            raise OperationError(f"{verb} takes no arguments")
        return Help() if verb == "help" else ListNotes()
    if not rest:
        raise OperationError(f"{verb} needs {'a customer id' if verb == 'case' else 'a credit note id'}")
    target, text = rest[0], " ".join(rest[1:])
    if verb == "show":
        if text:
            raise OperationError("show takes one credit note id")
        return show_note_request(target, user_id)
    if verb == "case":
        return open_case_request(target, text, user_id)
    return decide_request(target, user_id, verb, text)


# ---- the @mention -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    customer_id: str | None  # None: the bot must ask for one
    words: str  # the customer's words, as the support agent quoted them


def parse_mention(text: str, bot_user_id: str | None = None) -> Mention:
    """`<@BOT> C-0007 I was charged twice` → (C-0007, "I was charged twice").

    The customer id is the leading word after the mention; an id written further on in the words
    ("customer C-0007 says …") counts too, and the words are then kept as they are."""
    words = strip_bot_mention(text, bot_user_id)
    quoted = quoted_customer_ids(words)
    if not quoted:
        return Mention(None, words.strip())
    leading = re.match(rf"\s*{re.escape(quoted[0])}{_AFTER_LEADING_ID}", words, re.IGNORECASE)
    return Mention(quoted[0], words[leading.end() :].strip() if leading else words.strip())


def strip_bot_mention(text: str, bot_user_id: str | None) -> str:
    """The message's words without the bot's own mention (Slack's escaping undone)."""

    def drop(match: re.Match[str]) -> str:
        # Other people mentioned in the complaint stay (as their ids); only the bot's own mention goes.
        is_bot = match.group(1) == bot_user_id if bot_user_id else match.start() == 0
        return "" if is_bot else match.group(0)

    without = _MENTION.sub(drop, text.strip())
    return html.unescape(without).strip()  # Slack escapes &, < and > in message text
