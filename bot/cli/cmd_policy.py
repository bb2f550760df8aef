"""billsleuth policy show [--json] | policy apply

The policy in force is stored in the database (approvals.policy_store): `show` prints it, where this
shell's environment disagrees, and the changes waiting for consent; `apply` proposes this environment's
values (like a bot start): what narrows power applies at once, what widens it waits until another current
approver approves it in Slack. Kept light: only SQLAlchemy and approvals/, no LangGraph, Slack or OpenAI.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.cli.common import CommandError, on_database


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("policy", help="the policy in force (approvers, limits, CLI decisions)")
    policy_sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    show = policy_sub.add_parser("show", help="the stored policy, and where this environment disagrees")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=run_show)
    apply = policy_sub.add_parser("apply", help="store this environment's policy (audited, like a bot start)")
    apply.set_defaults(handler=run_apply)


def _own_settings() -> Any:
    from approvals.config import ApprovalSettings, SettingsError

    try:
        return ApprovalSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None


def policy_json(stored: Any, own: Any, pending: Any = ()) -> dict[str, Any]:
    """`{"stored": bool, "policy": {VARIABLE: value} | null, "environment": {…}, "differences": [...],
    "pending": [{id, proposed_by, proposed_at, changes: [{variable, stored, proposed}]}]}`; values in their
    canonical text form (the form the database keeps)."""
    from approvals.policy_store import differences

    return {
        "stored": stored is not None,
        "policy": stored.as_env() if stored is not None else None,
        "environment": own.as_env(),
        "differences": [
            {"variable": d.variable, "stored": d.stored, "environment": d.own}
            for d in (differences(stored, own) if stored is not None else ())
        ],
        "pending": [change.as_json() for change in pending],
    }


def render(shown: dict[str, Any]) -> str:
    if not shown["stored"]:
        lines = ["No policy is stored yet; the first command that needs one stores its environment's:"]
        values = shown["environment"]
    else:
        lines = ["The policy in force (stored in the database):"]
        values = shown["policy"]
    lines += [f"  {name} = {value or '(empty)'}" for name, value in values.items()]
    for d in shown["differences"]:
        lines.append(f"  this environment differs: {d['variable']} = {d['environment'] or '(empty)'}")
    for change in shown.get("pending", ()):
        lines.append(render_change(change))
    return "\n".join(lines)


def render_change(change: dict[str, Any]) -> str:
    """A policy change as `policy show` and `policy apply` list it: who, when, each value old → new."""
    month = f" (the model budget for {change['month']})" if change.get("month") else ""
    head = f"Policy change #{change['id']}{month} proposed by {change['proposed_by']}: {change['status']}"
    if change["status"] == "pending":
        head += " until another current approver approves it in Slack"
    values = [
        f"    {c['variable']}: {c['stored'] or '(empty)'} -> {c['proposed'] or '(empty)'}"
        for c in change["changes"]
    ]
    return "\n".join([head, *values])


def run_show(args: argparse.Namespace) -> int:
    from approvals.policy_changes import pending_changes
    from approvals.policy_store import read_policy
    from bot.cli.common import print_json

    own = _own_settings()

    async def read(engine: Any) -> tuple[Any, Any]:
        return await read_policy(engine), await pending_changes(engine)

    stored, pending = on_database(read)
    shown = policy_json(stored, own, pending)
    if args.json:
        print_json(shown)
    else:
        print(render(shown))
    return 0


def run_apply(args: argparse.Namespace) -> int:
    from agent.model.budget import apply_policy_change
    from approvals.policy_store import APPLY, propose
    from bot.cli.common import cli_source

    own = _own_settings()
    source = cli_source()

    async def apply(engine: Any) -> Any:
        return await propose(
            engine, own, proposer=source, source=source, why=APPLY, on_apply=apply_policy_change
        )

    proposal = on_database(apply)
    if proposal.applied is None and proposal.pending is None:
        print("The stored policy already matches this environment; nothing changed.")
    for change in (proposal.applied, proposal.pending):
        if change is not None:
            print(render_change(change.as_json()))
    if proposal.pending is not None:
        print("Until then the stored policy holds; `billsleuth policy show` lists what waits.")
    return 0
