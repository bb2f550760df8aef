"""Decisions on a credit note from Slack — a button click, the reason modal, `/billsleuth
approve|reject|cancel` — all go through `decide` here, and from there through CaseService.decide (a vote:
claim, then resume), CaseService.request_changes (a reject that sends the note back with a question) or
CaseService.cancel (the end of an approved note that was never issued).

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

from agent.cases.record import CaseNotFound
from agent.graph.state import EXPIRED_RESUME
from approvals import queries
from approvals.models import (
    SLACK_SOURCE,
    CreditNoteView,
    Decision,
    DecisionOutcome,
    NoteMovedOn,
    NoteStatus,
    Refused,
    Rule,
    UnknownCreditNote,
)
from bot.cards import already_decided_message, parse_block_id, reason_modal, stale_card_message
from bot.cards.models import Message, RejectModalMetadata
from bot.flows.home import publish_home
from bot.flows.one_person import refusal, tell
from bot.flows.show import settle_card
from bot.identity import sent_by_a_bot
from bot.presenters.notes import customer_of_invoice, note_model
from bot.runtime import BotRuntime

log = logging.getLogger(__name__)

# The note status a decision acts on: votes on a draft, a cancel on an approved note never issued.
OPEN_STATUS = {
    Decision.APPROVE: NoteStatus.DRAFT,
    Decision.REJECT: NoteStatus.DRAFT,
    Decision.REQUEST_CHANGES: NoteStatus.DRAFT,
    Decision.CANCEL: NoteStatus.APPROVED,
}


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


async def precheck(
    runtime: BotRuntime, credit_note_id: str, seen_revision: int | None, decision: Decision = Decision.APPROVE
) -> Message | None:
    """Why a click should change nothing (unknown note, already decided, stale card), or None."""
    return (await _open_note(runtime, credit_note_id, seen_revision, decision))[0]


async def _open_note(
    runtime: BotRuntime, credit_note_id: str, seen_revision: int | None, decision: Decision
) -> tuple[Message | None, CreditNoteView | None]:
    """`precheck`, and the note it read (None when there is none): the decision takes its case from it."""
    try:
        note = await queries.get_credit_note(runtime.engine, credit_note_id)
    except UnknownCreditNote:
        return refusal(Rule.UNKNOWN_CREDIT_NOTE, f"there is no credit note {credit_note_id}"), None
    return _moved_on(note, seen_revision, decision), note


def _moved_on(note: CreditNoteView, seen_revision: int | None, decision: Decision) -> Message | None:
    """What a click on a note that moved on since its card was drawn is told: already decided, or the
    card was out of date; None when it may go ahead."""
    if note.status != OPEN_STATUS[decision]:
        return already_decided_message(note.id, note.status)
    if seen_revision is not None and seen_revision < note.revision:
        return stale_card_message(note.id)
    return None


async def decide(
    runtime: BotRuntime,
    credit_note_id: str,
    *,
    user_id: str,
    decision: Decision,
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
    service = runtime.service
    try:
        is_bot = from_a_bot or sent_by_a_bot({}, user_id, await runtime.installation())
        if decision == Decision.CANCEL:
            note = None  # read by the click's check, it is not read again for its case
            if seen_revision is not None:
                stop, note = await _open_note(runtime, credit_note_id, seen_revision, decision)
                if stop is not None:
                    return DecisionReport(stop)
            outcome, case = await service.cancel(
                credit_note_id,
                approver=user_id,
                reason=comment,
                approver_is_bot=is_bot,
                source=source,
                note=note,
            )
        elif decision == Decision.REQUEST_CHANGES:
            # A vote checks the card under the note's lock, in its one read of the note (NoteMovedOn).
            outcome, case = await service.request_changes(
                credit_note_id,
                approver=user_id,
                question=comment,
                approver_is_bot=is_bot,
                source=source,
                seen_revision=seen_revision,
            )
        else:
            outcome, case = await service.decide(
                credit_note_id,
                approver=user_id,
                decision=decision,
                comment=comment,
                approver_is_bot=is_bot,
                source=source,
                seen_revision=seen_revision,
            )
    except NoteMovedOn as moved:
        return DecisionReport(_moved_on(moved.note, seen_revision, decision))
    except UnknownCreditNote:
        return DecisionReport(refusal(Rule.UNKNOWN_CREDIT_NOTE, f"there is no credit note {credit_note_id}"))
    except CaseNotFound as error:
        return DecisionReport(refusal(Rule.CASE_REQUIRED, str(error).strip("'\"")))
    except Refused as refused:
        if refused.rule == Rule.EXPIRED:
            await settle_expired(runtime, credit_note_id)
        return DecisionReport(refusal(refused.rule, refused.message))
    # And, for a note sent back, the question in the thread; the card is drawn from the note as the
    # decision's resumed case left it.
    await settle_card(runtime, credit_note_id, case, outcome.note)
    notice = None if outcome.changed else already_decided_message(credit_note_id, outcome.status)
    return DecisionReport(notice, outcome, case)


async def settle_expired(runtime: BotRuntime, credit_note_id: str) -> None:
    """A vote found the draft overdue (and expired it): let its case rewrite the reply, redraw the card."""
    note = await queries.get_credit_note(runtime.engine, credit_note_id)
    if note.case_id is not None:
        await runtime.service.resume(note.case_id, EXPIRED_RESUME)
    await settle_card(runtime, credit_note_id)


# ---- the doors: a click, a reason typed in the modal -------------------------------------------------------


async def approve(runtime: BotRuntime, click: Click) -> None:
    """An Approve click: vote as the clicking user (the id in the signed payload, nothing else)."""
    report = await decide(
        runtime,
        click.credit_note_id,
        user_id=click.user_id,
        decision=Decision.APPROVE,
        seen_revision=click.revision,
        source=click.source,
        from_a_bot=click.from_a_bot,
    )
    if report.notice is not None:
        await _tell_clicker(runtime, click, report.notice)
    if click.in_home:
        await publish_home(runtime, click.user_id)


async def ask_for_reason(runtime: BotRuntime, decision: Decision, click: Click) -> None:
    """Reject or Cancel clicked: open the reason modal for `decision` at once — the click's trigger_id
    lives three seconds, so this runs in the listener itself, after only two quick reads (is the note
    still open? its currency) — or, when the click can change nothing (the note moved on, the card is
    stale), tell the clicker why instead."""
    stop = await precheck(runtime, click.credit_note_id, click.revision, decision)
    if stop is not None:
        runtime.start(_tell_clicker(runtime, click, stop), name=f"tell {click.user_id}")
        return
    note = await queries.get_credit_note(runtime.engine, click.credit_note_id)
    currency = (await customer_of_invoice(runtime.engine, note.invoice_id)).currency
    meta = RejectModalMetadata(
        channel=click.channel or "",
        message_ts=click.message_ts or "",
        credit_note_id=note.id,
        revision=note.revision if click.revision is None else click.revision,
    )
    view = reason_modal(decision, meta, note_model(note), currency)
    await runtime.client.views_open(trigger_id=click.trigger_id, view=view)


async def decide_with_reason(
    runtime: BotRuntime,
    meta: RejectModalMetadata,
    user_id: str,
    decision: Decision,
    reason: str,
    source: str | None = None,
    *,
    from_a_bot: bool = False,
) -> None:
    """The reason modal submitted. The reason was typed against the card as it was when the button was
    clicked: if the card moved on meanwhile (another vote), say so instead of deciding on what the person
    did not see."""
    report = await decide(
        runtime,
        meta.credit_note_id,
        user_id=user_id,
        decision=decision,
        comment=reason,
        seen_revision=meta.revision,
        source=source,
        from_a_bot=from_a_bot,
    )
    if report.notice is not None:
        await tell(
            runtime, user_id, report.notice, channel=meta.channel or None, credit_note_id=meta.credit_note_id
        )


async def _tell_clicker(runtime: BotRuntime, click: Click, message: Message) -> None:
    await tell(
        runtime,
        click.user_id,
        message,
        channel=click.channel,
        thread_ts=click.thread_ts,
        credit_note_id=click.credit_note_id,
    )
