"""billsleuth policy show [--json] | policy apply

The policy in force is stored in the database (approvals.policy_store): `show` prints it and where this
shell's environment disagrees; `apply` stores this environment's values on purpose (audited, like a bot
start). Kept light: only SQLAlchemy and approvals/, no LangGraph, Slack or OpenAI.
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


def policy_json(stored: Any, own: Any) -> dict[str, Any]:
    """`{"stored": bool, "policy": {VARIABLE: value} | null, "environment": {…}, "differences": [...]}`;
    values in their canonical text form (the form the database keeps)."""
    from approvals.policy_store import differences

    return {
        "stored": stored is not None,
        "policy": stored.as_env() if stored is not None else None,
        "environment": own.as_env(),
        "differences": [
            {"variable": d.variable, "stored": d.stored, "environment": d.own}
            for d in (differences(stored, own) if stored is not None else ())
        ],
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
    return "\n".join(lines)


def run_show(args: argparse.Namespace) -> int:
    from approvals.policy_store import read_policy
    from bot.cli.common import print_json

    own = _own_settings()
    shown = policy_json(on_database(read_policy), own)
    if args.json:
        print_json(shown)
    else:
        print(render(shown))
    return 0


def run_apply(args: argparse.Namespace) -> int:
    from approvals import activity
    from approvals.policy_store import APPLY, read_policy, store_policy
    from bot.cli.common import cli_source

    own = _own_settings()

    async def apply(engine: Any) -> Any:
        before = await read_policy(engine)
        await store_policy(engine, own, actor_type=activity.USER, actor_id=cli_source(), why=APPLY)
        return before

    before = on_database(apply)
    if before == own:
        print("The stored policy already matches this environment; nothing changed.")
    else:
        shown = policy_json(own, own)
        print(
            "Stored this environment's policy (recorded as policy.changed):\n"
            + render(shown).split("\n", 1)[1]
        )
    return 0
