"""billsleuth costs [--since YYYY-MM-DD] [--by case|model|day] [--json]
billsleuth budget show [--json] | budget raise AMOUNT --as SLACK_USER_ID

`costs` sums the cost ledger (agent/model/costs.py); `budget` shows this month's model budget and lets an
approver raise it, lifting the pause (agent/model/budget.py). Kept light: SQLAlchemy and agent.model.costs /
agent.model.budget only, no LangGraph, OpenAI or Slack.
"""

from __future__ import annotations

import argparse
from decimal import Decimal
from typing import Any

from bot.cli.common import CommandError, on_database

BY = ("case", "model", "day")


def add_parser(sub: argparse._SubParsersAction) -> None:
    costs = sub.add_parser("costs", help="what the model cost: tokens and USD by case, model or day")
    costs.add_argument("--since", default=None, metavar="YYYY-MM-DD", help="from this UTC day on")
    costs.add_argument("--by", choices=BY, default="day", help="group by (default: day)")
    costs.add_argument("--json", action="store_true")
    costs.set_defaults(handler=run_costs)

    budget = sub.add_parser("budget", help="this month's model budget: show it, or raise it (an approver)")
    budget_sub = budget.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    show = budget_sub.add_parser("show", help="limit, spent, reserved, paused")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=run_show)
    raise_ = budget_sub.add_parser(
        "raise", help="set this month's limit to AMOUNT (USD) and resume the model"
    )
    raise_.add_argument("amount", metavar="AMOUNT")
    raise_.add_argument("--as", dest="as_user", required=True, metavar="SLACK_USER_ID")
    raise_.add_argument("--json", action="store_true")
    raise_.set_defaults(handler=run_raise)


def _spend_settings() -> Any:
    from agent.model.costs import SpendSettings
    from engine.settings import SettingsError

    try:
        return SpendSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None


def render_costs(report: dict[str, Any]) -> str:
    from agent.model.costs import usd_display

    def line(key: str, row: dict[str, Any]) -> str:
        cost = usd_display(None if row["cost"] is None else _decimal(row["cost"]))
        tokens = (
            f"{row['input_tokens']:>12,} in {row['output_tokens']:>10,} out "
            f"{row['cached_tokens']:>10,} cached"
        )
        return f"{key:<24} {tokens}  {cost}"

    since = f" since {report['since']}" if report["since"] else ""
    if not report["rows"]:
        return f"No model calls recorded{since}."
    lines = [f"Model costs by {report['by']}{since} (USD; 'unknown': a model without a price):"]
    lines += [line(row["key"], row) for row in report["rows"]]
    lines.append(line("total", report["total"]))
    return "\n".join(lines)


def _decimal(text: str) -> Any:
    return Decimal(text)


def run_costs(args: argparse.Namespace) -> int:
    from agent.model.costs import cost_report
    from bot.cli.cmd_activity import parse_since
    from bot.cli.common import print_json

    since = parse_since(args.since)
    report = on_database(lambda engine: cost_report(engine, by=args.by, since=since))
    if args.json:
        print_json(report)
    else:
        print(render_costs(report))
    return 0


def render_standing(shown: dict[str, Any]) -> str:
    from agent.model.costs import usd_display

    month = shown["month"]
    if shown["limit"] is None:
        head = f"Model budget for {month}: none set (BILLSLEUTH_MODEL_BUDGET is unset)"
    else:
        where = "raised this month" if shown["limit_from"] == "raise" else "BILLSLEUTH_MODEL_BUDGET"
        head = f"Model budget for {month}: {usd_display(_decimal(shown['limit']))} ({where})"
    lines = [
        head,
        f"  spent:    {usd_display(_decimal(shown['spent']))}",
        f"  reserved: {usd_display(_decimal(shown['reserved']))} (model runs under way, worst case)",
        "  paused:   "
        + (
            "yes — new cases go to the offline auditor; `billsleuth budget raise` resumes"
            if shown["paused"]
            else "no"
        ),
    ]
    if shown["unpriced_calls"]:
        lines.append(
            f"  {shown['unpriced_calls']} call(s) of a model without a price are not in the spend "
            "(add it to BILLSLEUTH_MODEL_PRICES)"
        )
    return "\n".join(lines)


async def _spend_in_force(engine: Any, source: str) -> tuple[Any, Any]:
    """The stored policy (warning where this shell's environment disagrees) and its model budget and prices:
    what every process enforces, whatever its own BILLSLEUTH_MODEL_BUDGET says."""
    from agent.model.costs import SpendSettings
    from approvals import activity, policy_store
    from approvals.config import ApprovalSettings
    from bot.cli.common import warn_policy_differences
    from engine.settings import SettingsError

    try:
        own = ApprovalSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None
    in_force = await policy_store.policy_in_force(engine, own, actor_type=activity.USER, actor_id=source)
    warn_policy_differences(in_force.differences)
    return in_force.settings, SpendSettings.of_policy(in_force.settings)


def run_show(args: argparse.Namespace) -> int:
    from agent.model.budget import standing
    from bot.cli.common import cli_source, print_json

    async def show(engine: Any) -> Any:
        _, spend = await _spend_in_force(engine, cli_source())
        return await standing(engine, spend)

    shown = on_database(show).as_json()
    if args.json:
        print_json(shown)
    else:
        print(render_standing(shown))
    return 0


def run_raise(args: argparse.Namespace) -> int:
    """Propose this month's limit: a policy change (DESIGN §3), so a higher one waits for a second
    approver in Slack; like approve/reject/cancel --as it is a CLI decision, refused unless the stored
    policy opens that door."""
    from agent.model import budget
    from agent.model.costs import parse_usd
    from approvals.models import Rule
    from bot.cli.common import cli_source
    from engine.settings import SettingsError

    try:
        amount = parse_usd("AMOUNT", args.amount)
    except SettingsError as error:
        raise CommandError(str(error)) from None
    who, source = args.as_user.strip(), cli_source()

    async def raise_it(engine: Any) -> tuple[Any, Any] | tuple[str, str]:
        policy, spend = await _spend_in_force(engine, source)
        if not policy.cli_decisions:
            message = "decisions from the CLI are off in the stored policy; a budget raise is one of them"
            return await _refuse(engine, who, source, amount, Rule.CLI_DECISIONS_OFF, message)
        if who not in policy.approvers:
            message = f"{who} is not an approver: only an approver may raise the model budget"
            return await _refuse(engine, who, source, amount, Rule.NOT_AN_APPROVER, message)
        was_paused = (await budget.standing(engine, spend)).paused
        change = await budget.propose_raise(engine, spend, amount, by=who, source=source)
        return change, (was_paused, (await budget.standing(engine, spend)).paused)

    first, second = on_database(raise_it)
    if isinstance(first, str):
        raise CommandError(second if first == Rule.NOT_AN_APPROVER else f"{second} ({first})")
    return _print_raise(first, second, as_json=args.json)


async def _refuse(
    engine: Any, who: str, source: str, amount: Any, rule: str, message: str
) -> tuple[str, str]:
    from agent.model import budget
    from agent.model.costs import usd
    from approvals import activity

    await activity.record_refusal(
        engine, activity.USER, who, budget.RAISED, budget.ENTITY, budget.month_of(),
        rule=rule, message=message, details={"amount": usd(amount), "source": source},
    )  # fmt: skip
    return rule, message


def _print_raise(change: Any, pauses: tuple[bool, bool], *, as_json: bool) -> int:
    """`--json`: `{month, old, new, status, paused, policy_change{…}}`; else one line."""
    from agent.model.budget import BUDGET
    from bot.cli.common import print_json

    old, new = change.old.get(BUDGET) or None, change.new[BUDGET]
    if as_json:
        print_json(
            {
                "month": change.month,
                "old": old,
                "new": new,
                "status": change.status,
                "paused": pauses[1],
                "policy_change": change.as_json(),
            }
        )
        return 0
    was = "none" if old is None else f"${old}"
    if change.status == "pending":
        print(
            f"Proposed the model budget for {change.month}: ${new} (now {was}) as policy change "
            f"#{change.id}; it takes effect once another approver approves it in Slack."
        )
        return 0
    line = f"Model budget for {change.month} set to ${new} (was {was}) by {change.proposed_by}."
    if pauses == (True, False):
        line += " The model investigator is resumed."
    elif pauses[1]:
        line += " Spend is still at or above it: the model investigator stays paused."
    print(line)
    return 0
