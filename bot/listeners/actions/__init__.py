"""Buttons on the evidence card (in a channel or in App Home): Approve, Reject, Request changes and Cancel;
Resubmit, under an approver's question in the case's thread; a candidate under "Which customer is this?";
`Open a case` under one of a case's other findings; `Open case` on a finding of the findings digest;
Approve and Reject on a pending policy change's card."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.cards import APPROVE_ACTION_ID, CANCEL_ACTION_ID, REJECT_ACTION_ID
from bot.cards.ids import (
    OPEN_LINKED_CASE_ACTION_ID,
    PICK_CUSTOMER_ACTION_ID,
    POLICY_APPROVE_ACTION_ID,
    POLICY_REJECT_ACTION_ID,
    REQUEST_CHANGES_ACTION_ID,
    RESUBMIT_ACTION_ID,
    SWEEP_OPEN_CASE_ACTION_ID,
)
from bot.listeners.actions.approve import approve_clicked
from bot.listeners.actions.cancel import cancel_clicked
from bot.listeners.actions.open_linked import open_linked_clicked
from bot.listeners.actions.pick_customer import customer_picked
from bot.listeners.actions.policy_change import policy_approve_clicked, policy_reject_clicked
from bot.listeners.actions.reject import reject_clicked
from bot.listeners.actions.request_changes import request_changes_clicked
from bot.listeners.actions.resubmit import resubmit_clicked
from bot.listeners.actions.sweep_open_case import sweep_open_case_clicked


def register(app: AsyncApp) -> None:
    app.action(APPROVE_ACTION_ID)(approve_clicked)
    app.action(REJECT_ACTION_ID)(reject_clicked)
    app.action(CANCEL_ACTION_ID)(cancel_clicked)
    app.action(REQUEST_CHANGES_ACTION_ID)(request_changes_clicked)
    app.action(RESUBMIT_ACTION_ID)(resubmit_clicked)
    app.action(PICK_CUSTOMER_ACTION_ID)(customer_picked)
    app.action(OPEN_LINKED_CASE_ACTION_ID)(open_linked_clicked)
    app.action(SWEEP_OPEN_CASE_ACTION_ID)(sweep_open_case_clicked)
    app.action(POLICY_APPROVE_ACTION_ID)(policy_approve_clicked)
    app.action(POLICY_REJECT_ACTION_ID)(policy_reject_clicked)
