"""billsleuth costs [--since YYYY-MM-DD] [--by case|model|day] [--json]
billsleuth budget show [--json] | budget raise AMOUNT --as SLACK_USER_ID

`costs` sums the cost ledger (agent/costs.py); `budget` shows this month's model budget and lets an
approver raise it, lifting the pause (agent/budget.py). Kept light: SQLAlchemy and agent.costs /
agent.budget only, no LangGraph, OpenAI or Slack.
"""

from __future__ import annotations

import argparse
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
    from agent.costs import SpendSettings
    from engine.settings import SettingsError

    try:
        return SpendSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None


def render_costs(report: dict[str, Any]) -> str:
    from agent.costs import usd_display

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
    from decimal import Decimal

    return Decimal(text)


def run_costs(args: argparse.Namespace) -> int:
    from agent.costs import cost_report
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
    from agent.costs import usd_display

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


def run_show(args: argparse.Namespace) -> int:
    from agent.budget import standing
    from bot.cli.common import print_json

    settings = _spend_settings()
    shown = on_database(lambda engine: standing(engine, settings)).as_json()
    if args.json:
        print_json(shown)
    else:
        print(render_standing(shown))
    return 0


def run_raise(args: argparse.Namespace) -> int:
    from agent import budget
    from agent.costs import parse_usd, usd
    from approvals import activity, policy_store
    from approvals.config import ApprovalSettings
    from bot.cli.common import cli_source, print_json, warn_policy_differences
    from engine.settings import SettingsError

    settings = _spend_settings()
    try:
        amount = parse_usd("AMOUNT", args.amount)
        own = ApprovalSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None
    who, source = args.as_user.strip(), cli_source()

    async def raise_it(engine: Any) -> budget.Raised | None:
        in_force = await policy_store.policy_in_force(engine, own, actor_type=activity.USER, actor_id=source)
        warn_policy_differences(in_force.differences)
        if who not in in_force.settings.approvers:
            await activity.record_refusal(
                engine,
                activity.USER,
                who,
                budget.RAISED,
                budget.ENTITY,
                budget.month_of(),
                rule="not_an_approver",
                message=f"{who} is not an approver",
                details={"amount": usd(amount), "source": source},
            )
            return None
        return await budget.raise_limit(engine, settings, amount, by=who, source=source)

    raised = on_database(raise_it)
    if raised is None:
        raise CommandError(f"{who} is not an approver: only an approver may raise the model budget")
    if args.json:
        print_json(
            {
                "month": raised.month,
                "old": usd(raised.old),
                "new": usd(raised.new),
                "resumed": raised.resumed,
                "paused": raised.still_paused,
            }
        )
        return 0
    old = "none" if raised.old is None else f"${raised.old:f}"
    line = f"Model budget for {raised.month} set to ${raised.new:f} (was {old}) by {who}."
    if raised.resumed:
        line += " The model investigator is resumed."
    elif raised.still_paused:
        line += " Spend is still at or above it: the model investigator stays paused."
    print(line)
    return 0
