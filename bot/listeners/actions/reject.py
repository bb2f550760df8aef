"""Reject: ack, then open the reason modal at once — the click's trigger_id lives three seconds, so
this happens in the listener itself, after only two quick reads (is the note still open? its currency).
Cancel (bot/listeners/actions/cancel.py) asks for its reason the same way."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from approvals import queries
from bot.cards import reason_modal
from bot.cards.models import RejectModalMetadata
from bot.decisions import Click, precheck, tell
from bot.presenters import card_revision, customer_of_invoice, note_model
from bot.runtime import runtime_of


async def reject_clicked(
    ack: Any,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    await ack()
    await ask_for_reason("reject", body, action, client, context)


async def ask_for_reason(
    decision: str,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    """Open the reason modal for `decision` (reject, cancel) — or, when the click can change nothing
    (the note moved on, the card is stale), tell the clicker why instead."""
    runtime = runtime_of(context)
    click = Click.from_payload(body, action)
    stop = await precheck(runtime, click.credit_note_id, click.revision, decision)
    if stop is not None:
        runtime.start(
            tell(
                runtime,
                click.user_id,
                stop,
                channel=click.channel,
                thread_ts=click.thread_ts,
                credit_note_id=click.credit_note_id,
            ),
            name=f"tell {click.user_id}",
        )
        return
    note = await queries.get_credit_note(runtime.engine, click.credit_note_id)
    currency = (await customer_of_invoice(runtime.engine, note.invoice_id)).currency
    meta = RejectModalMetadata(
        channel=click.channel or "",
        message_ts=click.message_ts or "",
        credit_note_id=note.id,
        revision=card_revision(note) if click.revision is None else click.revision,
    )
    await client.views_open(
        trigger_id=click.trigger_id, view=reason_modal(decision, meta, note_model(note), currency)
    )
