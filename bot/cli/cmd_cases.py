"""billsleuth case open|show, list, show, approve, reject, cancel"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from bot.cli.common import CommandError, cli_source, run_operation


def add_parser(sub: argparse._SubParsersAction) -> None:
    case = sub.add_parser("case", help="open or show an investigation")
    case_sub = case.add_subparsers(dest="case_command", metavar="ACTION", required=True)
    open_ = case_sub.add_parser("open", help="investigate a customer's complaint")
    open_.add_argument("customer_id", metavar="CUSTOMER_ID")
    open_.add_argument("message", metavar="MESSAGE", help="the customer's words")
    open_.add_argument(
        "--as",
        dest="requester",
        metavar="SLACK_USER_ID",
        help="required: the Slack user the case is opened for (its requester, told by DM)",
    )
    open_.add_argument("--json", action="store_true")
    open_.set_defaults(handler=run_open)
    show = case_sub.add_parser("show", help="a case's findings, credit note and reply")
    show.add_argument("case_id", metavar="CASE_ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=run_show_case)

    listing = sub.add_parser("list", help="credit notes waiting for a decision")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=run_list)

    note = sub.add_parser(
        "show", help="a credit note: fresh recomputation, approvals, the agent's tool trail"
    )
    note.add_argument("credit_note_id", metavar="CN-0001")
    note.add_argument("--json", action="store_true")
    note.set_defaults(handler=run_show_note)

    approve = sub.add_parser("approve", help="approve a credit note")
    approve.add_argument("credit_note_id", metavar="CN-0001")
    approve.add_argument("--as", dest="approver", metavar="SLACK_USER_ID", required=True)
    approve.add_argument("-m", dest="comment", metavar="NOTE", default="")
    approve.add_argument("--json", action="store_true")
    approve.set_defaults(handler=run_decide, decision="approve")

    reject = sub.add_parser("reject", help="reject a credit note (a reason is required)")
    reject.add_argument("credit_note_id", metavar="CN-0001")
    reject.add_argument("--as", dest="approver", metavar="SLACK_USER_ID", required=True)
    reject.add_argument("-m", dest="comment", metavar="REASON", default="")
    reject.add_argument("--json", action="store_true")
    reject.set_defaults(handler=run_decide, decision="reject")

    cancel = sub.add_parser(
        "cancel", help="cancel an approved credit note that was never issued (a reason is required)"
    )
    cancel.add_argument("credit_note_id", metavar="CN-0001")
    cancel.add_argument("--as", dest="approver", metavar="SLACK_USER_ID", required=True)
    cancel.add_argument("-m", dest="comment", metavar="REASON", default="")
    cancel.add_argument("--json", action="store_true")
    cancel.set_defaults(handler=run_decide, decision="cancel")


def money_text(note: dict[str, Any]) -> str:
    """A note's amount with its currency, "123.60 USD" or "12000 JPY" (JSON keeps the two-decimal string)."""
    from engine.money import fmt_amount

    return fmt_amount(Decimal(note["amount"]), note["currency"])


def render_case(case: dict[str, Any]) -> str:
    lines = [f"{case['case_id']}  customer {case['customer_id'] or '?'}  status {case['status']}"]
    if case["findings"]:
        f = case["findings"]
        lines.append(
            f"  finding: {f['root_cause']} on {', '.join(f['invoice_ids'])}, overcharge {f['overcharge']}"
            f" → {f['expected_action']}"
        )
    for other in case.get("other_findings") or []:
        lines.append(
            f"  also overpaid: {other['invoice_id']} {other['overcharge']} ({other['root_cause']}),"
            " not credited by this case"
        )
    if case["credit_note"]:
        n = case["credit_note"]
        lines.append(
            f"  credit note {n['id']}: {money_text(n)} on {n['invoice_id']}, {n['status']}"
            f" (approvals {n['approvals']} of {n['needed']})"
        )
    if case["escalation_reason"]:
        lines.append(f"  escalated: {case['escalation_reason']}")
    if case.get("investigator_note"):
        lines.append(f"  {case['investigator_note']}")
    if case.get("model_cost"):
        cost = case["model_cost"]
        lines.append(
            f"  model: {cost['input_tokens']:,} in / {cost['output_tokens']:,} out tokens,"
            f" USD {cost['cost'] if cost['cost'] is not None else 'unknown (no price for the model)'}"
        )
    if case["reply"]:
        if case["reply"].get("customer_message"):
            lines.append(
                "  reply to the customer:\n    " + case["reply"]["customer_message"].replace("\n", "\n    ")
            )
        if case["reply"].get("internal_note"):
            lines.append("  internal note:\n    " + case["reply"]["internal_note"])
    return "\n".join(lines)


def build(make: Callable[[], object]) -> object:
    """A request from the grammar the slash command shares; its one-line complaint becomes the CLI's."""
    from bot.grammar import OperationError

    try:
        return make()
    except OperationError as error:
        raise CommandError(str(error)) from None


def run_open(args: argparse.Namespace) -> int:
    from bot.grammar import open_case_request

    requester = checked_requester(args.requester)
    request = build(lambda: open_case_request(args.customer_id, args.message, requester))
    # Whoever is at this shell opened it, under any --as: they may not decide it from here, and the
    # requester is told by DM that this OS account opened a case in their name.
    request = replace(request, opened_from=cli_source())  # type: ignore[type-var]
    return run_operation(request, as_json=args.json, render=lambda r: render_case(r.payload))


def checked_requester(requester: str | None) -> str:
    """A case has a person behind it: the Slack user named by --as, who then decides nothing on it. Not
    optional, so that no case is opened in nobody's name (exit 2 before anything is written)."""
    from approvals.config import is_slack_user_id

    if not requester:
        raise CommandError(
            "case open needs --as SLACK_USER_ID: the Slack user the case is opened for (its requester)"
        )
    if not is_slack_user_id(requester):
        raise CommandError(f"--as {requester!r} is not a Slack user ID (like U012AB3CD)")
    return requester


def run_show_case(args: argparse.Namespace) -> int:
    from bot.grammar import show_case_request

    request = build(lambda: show_case_request(args.case_id))
    return run_operation(request, as_json=args.json, render=lambda r: render_case(r.payload))


def run_list(args: argparse.Namespace) -> int:
    from bot.grammar import ListNotes
    from bot.presenters.approver import waiting_for

    def render(result: Any) -> str:
        notes = result.payload["credit_notes"]
        if not notes:
            return "No credit notes are waiting for a decision."
        rows = [
            f"{n['id']}  {n['invoice_id']:<16} {money_text(n):>14}"
            f"  approvals {n['approvals']} of {n['needed']}"
            f"  case {n['case_id']}  {waiting_for(n).replace('`', '')}"
            for n in notes
        ]
        return "\n".join(rows)

    return run_operation(ListNotes(), as_json=args.json, render=render)


def run_show_note(args: argparse.Namespace) -> int:
    from bot.grammar import show_note_request

    request = build(lambda: show_note_request(args.credit_note_id, cli_source()))
    return run_operation(request, as_json=args.json, render=lambda r: r.text)


def run_decide(args: argparse.Namespace) -> int:
    from bot.grammar import decide_request

    request = build(lambda: decide_request(args.credit_note_id, args.approver, args.decision, args.comment))
    # The CLI is a break-glass door: approvals/ refuses it unless the stored policy has it on.
    request = replace(request, source=cli_source())  # type: ignore[type-var]
    return run_operation(
        request, as_json=args.json, render=lambda r: r.message + "\n" + render_case(r.payload)
    )
