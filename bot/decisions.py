"""Decisions on a credit note from Slack — a button click, the reason modal, `/billsleuth
approve|reject|cancel` — all go through `decide` here, and from there through CaseService.decide (a vote:
claim, then resume) or CaseService.cancel (the end of an approved note that was never issued).

Identity is the Slack user id from the signed payload, handed in by the listener, with the workspace it
came from (`slack:<team id>`, recorded as the vote's source). What the person who
clicked should hear (a refusal naming its rule, "already decided", "that card was out of date") comes back
as a notice for them alone; what everyone should see (the card, the customer reply) is drawn here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.cases import CaseNotFound
from approvals import queries
from approvals.models import SLACK_SOURCE, DecisionOutcome, Refused, Rule, UnknownCreditNote
from bot.cards import already_decided_message, parse_block_id, refusal_message, stale_card_message
from bot.cards.models import Message, Refusal
from bot.case_messages import settle_card
from bot.identity import sent_by_a_bot
from bot.presenters import card_revision
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)

UNKNOWN_NOTE_RULE = "unknown_credit_note"
EXPIRE_DECISION = {"approver": "system", "decision": "expire", "comment": ""}
CANCEL = "cancel"
# The note status a decision acts on: votes on a draft, a cancel on an approved note never issued.
OPEN_STATUS = {"approve": "draft", "reject": "draft", CANCEL: "approved"}


@dataclass(frozen=True)
class DecisionReport:
    notice: Message | None  # for the person who decided only (ephemeral); None: the card says it all
    outcome: DecisionOutcome | None = None  # None: nothing was recorded
    case: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return self.outcome is not None and self.outcome.changed


@dataclass(frozen=True)
class Click:
    """A click on a card's button, as the signed block_actions payload tells it."""

    user_id: str
    credit_note_id: str
    revision: int | None  # the card revision clicked on (its block_id's rN); None: not one of our blocks
    channel: str | None  # None when clicked in App Home
    message_ts: str | None
    thread_ts: str | None
    in_home: bool
    trigger_id: str
    team_id: str | None = None  # the workspace the signed payload came from
    from_a_bot: bool = False  # the payload says a bot clicked (bot_id, or a bot user)

    @classmethod
    def from_payload(cls, body: Mapping[str, Any], action: Mapping[str, Any]) -> Click:
        container = body.get("container") or {}
        ref = parse_block_id(action.get("block_id"))
        return cls(
            user_id=str(body["user"]["id"]),
            credit_note_id=str(action.get("value") or ""),
            revision=ref.revision if ref is not None else None,
            channel=container.get("channel_id") or (body.get("channel") or {}).get("id"),
            message_ts=container.get("message_ts"),
            thread_ts=container.get("thread_ts"),
            in_home=container.get("type") == "view",
            trigger_id=str(body.get("trigger_id") or ""),
            team_id=team_of(body),
            from_a_bot=sent_by_a_bot(body, None, None),
        )

    @property
    def source(self) -> str:
        return slack_source(self.team_id)


def team_of(body: Mapping[str, Any]) -> str | None:
    """The workspace of a signed interaction payload: body.team.id, else the user's team_id."""
    team = (body.get("team") or {}).get("id") or (body.get("user") or {}).get("team_id")
    return str(team) if team else None


def slack_source(team_id: str | None) -> str:
    """A Slack vote's approvals.source: `slack:<team id>`."""
    return f"{SLACK_SOURCE}{team_id or 'unknown'}"


def refusal(rule: str, reason: str) -> Message:
    return refusal_message(Refusal(rule, reason))


async def precheck(
    runtime: BotRuntime, credit_note_id: str, seen_revision: int | None, decision: str = "approve"
) -> Message | None:
    """Why a click should change nothing (unknown note, already decided, stale card), or None."""
    try:
        note = await queries.get_credit_note(runtime.engine, credit_note_id)
    except UnknownCreditNote:
        return refusal(UNKNOWN_NOTE_RULE, f"there is no credit note {credit_note_id}")
    if note.status != OPEN_STATUS[decision]:
        return already_decided_message(note.id, note.status)
    if seen_revision is not None and seen_revision < card_revision(note):
        return stale_card_message(note.id)
    return None


async def decide(
    runtime: BotRuntime,
    credit_note_id: str,
    *,
    user_id: str,
    decision: str,
    comment: str = "",
    seen_revision: int | None = None,
    source: str | None = None,
    from_a_bot: bool = False,
) -> DecisionReport:
    """One person's vote, or their cancel. With `seen_revision` (a click) a decided note or an
    out-of-date card changes nothing; without it (the slash command) approvals/ judges a repeat or a
    conflict itself.

    `from_a_bot`: the payload says a bot sent it. Slackbot and this app's own bot user are known here
    too; either way approvals/ refuses the decision (approver_is_bot), whatever the allowlist says."""
    if seen_revision is not None:
        stop = await precheck(runtime, credit_note_id, seen_revision, decision)
        if stop is not None:
            return DecisionReport(stop)
    service = runtime.service
    try:
        is_bot = from_a_bot or sent_by_a_bot({}, user_id, await runtime.installation())
        if decision == CANCEL:
            outcome, case = await service.cancel(
                credit_note_id, approver=user_id, reason=comment, approver_is_bot=is_bot, source=source
            )
        else:
            outcome, case = await service.decide(
                credit_note_id,
                approver=user_id,
                decision=decision,
                comment=comment,
                approver_is_bot=is_bot,
                source=source,
            )
    except UnknownCreditNote:
        return DecisionReport(refusal(UNKNOWN_NOTE_RULE, f"there is no credit note {credit_note_id}"))
    except CaseNotFound as error:
        return DecisionReport(refusal("case_required", str(error).strip("'\"")))
    except Refused as refused:
        if refused.rule == Rule.EXPIRED:
            await settle_expired(runtime, credit_note_id)
        return DecisionReport(refusal(str(refused.rule), refused.message))
    await settle_card(runtime, credit_note_id)
    notice = None if outcome.changed else already_decided_message(credit_note_id, outcome.status)
    return DecisionReport(notice, outcome, case)


async def settle_expired(runtime: BotRuntime, credit_note_id: str) -> None:
    """A vote found the draft overdue (and expired it): let its case rewrite the reply, redraw the card."""
    note = await queries.get_credit_note(runtime.engine, credit_note_id)
    if note.case_id is not None:
        await runtime.service.resume(note.case_id, dict(EXPIRE_DECISION))
    await settle_card(runtime, credit_note_id)


async def expire_overdue_and_update(runtime: BotRuntime) -> list[str]:
    """The periodic sweep: expire overdue drafts (their cases rewrite the reply), resume the cases whose
    notes were settled meanwhile (an approved note the daily credit limit held back is issued once there is
    room) and cancel notes held too long; then redraw their cards and post the customer replies. Returns
    the expired notes."""
    swept = await runtime.service.sweep()
    touched = [*swept.expired, *swept.cancelled]
    for case_id in swept.settled:
        note = await queries.credit_note_for_case(runtime.engine, case_id)
        if note is not None and note.id not in touched:
            touched.append(note.id)
    for credit_note_id in touched:
        try:
            await settle_card(runtime, credit_note_id)
        except Exception:
            log.exception("could not update the card of %s after the sweep", credit_note_id)
    pruned = await runtime.service.prune_finished()
    if pruned:
        log.info("deleted the checkpoints of %d finished case(s)", len(pruned))
    return swept.expired


async def tell(
    runtime: BotRuntime,
    user_id: str,
    message: Message,
    *,
    channel: str | None,
    thread_ts: str | None = None,
    credit_note_id: str | None = None,
) -> bool:
    """An ephemeral message for one person, in the channel they clicked in — or, for a click in App
    Home, in the channel of the note's card. False when there is nowhere to say it."""
    if not channel and credit_note_id:
        channel, thread_ts = await _card_channel(runtime, credit_note_id)
    if not channel:
        log.warning("no channel to tell %s: %s", user_id, message.text)
        return False
    kwargs: dict[str, Any] = {"channel": channel, "user": user_id, **message.as_kwargs()}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    await runtime.client.chat_postEphemeral(**kwargs)
    return True


async def _card_channel(runtime: BotRuntime, credit_note_id: str) -> tuple[str | None, str | None]:
    try:
        note = await queries.get_credit_note(runtime.engine, credit_note_id)
        if note.case_id is None:
            return None, None
        row = await runtime.service.case_row(note.case_id)
    except (UnknownCreditNote, CaseNotFound):
        return None, None
    return row.channel, row.thread_ts
