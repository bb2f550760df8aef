"""`billsleuth doctor`: what is configured and reachable, and what to fix. Checks never change anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from engine.migrate import Revision

Level = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗"}
REQUIRED_SCOPES = ("app_mentions:read", "chat:write", "commands")


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{MARK[self.level]} {self.name}: {self.detail}"
        return text + (f"\n    → {self.fix}" if self.fix else "")


async def check_database() -> list[Check]:
    from agent.database import revisions
    from engine.db import DatabaseSettings, create_engine, database_url
    from engine.schema import customers, dataset_info

    where = "DATABASE_URL" if DatabaseSettings.from_env().url else "the embedded server"
    try:
        url = database_url()
        schema, checkpoints = await revisions(url)
    except Exception as error:
        return [
            Check(
                "database", "fail", f"{where} is not reachable: {error}".splitlines()[0], "check DATABASE_URL"
            )
        ]
    checks = [
        Check("database", "ok", f"{where} answers"),
        revision_check("schema", schema),
        revision_check("graph checkpoints", checkpoints),
    ]
    current = schema.problem() is None
    engine = create_engine(url)
    try:
        chain = await check_activity_chain(engine, current=current)
        policy = await check_policy(engine, current=current)
        async with engine.connect() as conn:
            n_customers = (
                (await conn.execute(select(func.count()).select_from(customers))).scalar_one()
                if schema.current
                else 0
            )
            seeded = (
                (
                    await conn.execute(select(dataset_info.c.value).where(dataset_info.c.key == "seeded_by"))
                ).scalar()
                if schema.current
                else None
            )
    finally:
        await engine.dispose()
    ledger = f"{n_customers} customers" + (" (demo dataset)" if seeded else "")
    checks.append(
        Check(
            "ledger", "ok" if n_customers else "warn", ledger, "" if n_customers else "run `billsleuth seed`"
        )
    )
    role = await check_runtime_role(url) if where == "DATABASE_URL" else EMBEDDED_ROLE
    return [*checks, role, chain, policy]


EMBEDDED_ROLE = Check(
    "database role",
    "ok",
    "the embedded server runs the runtime as billsleuth_runtime (in billsleuth_app), the owner's commands "
    "as its superuser; it trusts local connections, so the roles stop mistakes, not an insider",
)
RUNTIME_ROLE_FIX = (
    "run the bot and the everyday commands as a login in billsleuth_app (GRANT billsleuth_app TO <login>) "
    "and keep the owner's login for BILLSLEUTH_OWNER_DATABASE_URL"
)


async def check_runtime_role(url: str) -> Check:
    """Who DATABASE_URL logs in as: the runtime must not be the schema owner or a superuser, which could
    disable the triggers and rewrite the activity log with its hashes."""
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT current_user, r.rolsuper,"
                " c.relowner IS NOT NULL AND pg_has_role(current_user, c.relowner, 'USAGE'),"
                " pg_has_role(current_user, to_regrole('billsleuth_app'), 'MEMBER')"
                " FROM pg_roles r LEFT JOIN pg_class c ON c.oid = to_regclass('alembic_version')"
                " WHERE r.rolname = current_user"
            )
            login, superuser, owner, member = await cursor.fetchone() or ("?", False, False, None)
    except psycopg.Error as error:
        return Check("database role", "warn", f"not checked: {error}".splitlines()[0])
    if superuser or owner:
        what = "a superuser" if superuser else "the schema owner"
        return Check(
            "database role",
            "warn",
            f"DATABASE_URL logs in as {login}, {what}: it could disable the triggers and rewrite history",
            RUNTIME_ROLE_FIX,
        )
    if not member:
        return Check("database role", "warn", f"{login} is not a member of billsleuth_app", RUNTIME_ROLE_FIX)
    return Check("database role", "ok", f"{login}, a member of billsleuth_app (not the schema owner)")


def revision_check(name: str, revision: Revision) -> Check:
    """Where one part of the schema stands; doctor only reports it (`db upgrade` changes it)."""
    if revision.problem() is None:
        return Check(name, "ok", f"at {revision.head}")
    return Check(name, "warn", revision.describe(), revision.remedy())


async def check_policy(engine: AsyncEngine, *, current: bool) -> Check:
    """The stored policy (what every process enforces) against this environment's."""
    from approvals.config import ApprovalSettings, SettingsError
    from approvals.policy_changes import pending_changes
    from approvals.policy_store import differences, read_policy

    if not current:
        return Check("policy", "warn", "not read: the schema is behind", "run `billsleuth db upgrade`")
    try:
        own = ApprovalSettings.from_env()
        stored = await read_policy(engine)
        pending = await pending_changes(engine)
    except SettingsError as error:
        return Check("policy", "fail", str(error))
    if stored is None:
        return Check("policy", "ok", "none stored yet: the bot's start (or the first command) stores it")
    if pending:
        return Check(
            "policy",
            "warn",
            f"{len(pending)} policy change(s) wait for an approver's consent in Slack: "
            + ", ".join(f"#{c.id} ({', '.join(c.new)})" for c in pending),
            "a current approver other than the proposer approves or rejects it on its card; "
            "`billsleuth policy show` lists them",
        )
    apart = differences(stored, own)
    if not apart:
        return Check("policy", "ok", "the stored policy matches this environment")
    return Check(
        "policy",
        "warn",
        "this environment differs from the stored policy, which is enforced: "
        + "; ".join(d.describe() for d in apart),
        "start the bot with the intended values, or run `billsleuth policy apply` here",
    )


async def check_activity_chain(engine: AsyncEngine, *, current: bool) -> Check:
    """`billsleuth activity verify`: the log's hash chain, recomputed."""
    from approvals.activity import verify_chain

    if not current:
        return Check(
            "activity log", "warn", "not verified: the schema is behind", "run `billsleuth db upgrade`"
        )
    report = await verify_chain(engine)
    if report.intact:
        return Check("activity log", "ok", report.line())
    return Check(
        "activity log",
        "fail",
        report.line(),
        "the log was changed around its triggers: compare with an earlier `billsleuth activity export`",
    )


async def check_slack() -> list[Check]:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.config import SlackConfigError, SlackSettings

    try:
        settings = SlackSettings.from_env()
    except SlackConfigError as error:
        return [Check("slack settings", "fail", str(error))]
    mode = "socket" if settings.app_token.get_secret_value() else "http"
    missing = settings.missing(mode)
    checks: list[Check] = []
    if missing:
        checks.append(
            Check(
                "slack credentials",
                "fail",
                f"{mode} mode needs {', '.join(missing)}",
                "see README: five steps",
            )
        )
    else:
        checks.append(Check("slack credentials", "ok", f"{mode} mode configured"))
    token = settings.bot_token.get_secret_value()
    if not token:
        return checks
    client = AsyncWebClient(token=token, base_url=settings.api_url, timeout=10)
    try:
        response = await client.auth_test()
    except SlackApiError as error:
        reason = error.response.get("error", "error")
        return [*checks, Check("slack auth.test", "fail", reason, "check SLACK_BOT_TOKEN")]
    except Exception as error:
        return [
            *checks,
            Check(
                "slack auth.test", "fail", f"{settings.api_url} unreachable: {error}", "check SLACK_API_URL"
            ),
        ]
    checks.append(
        Check("slack auth.test", "ok", f"bot {response.get('user')} in team {response.get('team')}")
    )
    granted = {s.strip() for s in (response.headers.get("x-oauth-scopes") or "").split(",") if s.strip()}
    lacking = [s for s in REQUIRED_SCOPES if granted and s not in granted]
    if lacking:
        checks.append(
            Check(
                "slack scopes",
                "fail",
                f"missing {', '.join(lacking)}",
                "reinstall the app from manifest.json",
            )
        )
    elif granted:
        checks.append(Check("slack scopes", "ok", ", ".join(sorted(granted))))
    return checks


async def check_model() -> list[Check]:
    from agent.graph.configuration import Configuration, ConfigurationError

    try:
        config = Configuration.from_env()
    except ConfigurationError as error:
        return [Check("investigator", "fail", str(error))]
    if config.investigator == "offline":
        return [
            Check("investigator", "ok", "offline (deterministic auditor; set OPENAI_API_KEY for a model)")
        ]
    from openai import AsyncOpenAI, OpenAIError

    client = AsyncOpenAI(api_key=config.openai_key(), base_url=config.base_url, timeout=10, max_retries=0)
    try:
        models = [m.id async for m in client.models.list()]
    except OpenAIError as error:
        endpoint = config.base_url or "the OpenAI API"
        return [
            Check(
                "model endpoint",
                "fail",
                f"{endpoint}: {error}".splitlines()[0],
                "check OPENAI_BASE_URL / key",
            )
        ]
    finally:
        await client.close()
    level: Level = "ok" if not models or config.model in models else "warn"
    fix = "" if level == "ok" else f"set BILLSLEUTH_MODEL to one of: {', '.join(models[:5])}"
    limit = f"a case escalates after {config.case_timeout_s:g} s (BILLSLEUTH_CASE_TIMEOUT)"
    return [Check("model endpoint", level, f"llm investigator, model {config.model}; {limit}", fix)]


async def check_model_costs() -> list[Check]:
    """The model's price (without one its calls are recorded with tokens but no cost, and the budget cannot
    hold them) and this month's model budget."""
    from agent.graph.configuration import Configuration, ConfigurationError
    from agent.model.budget import standing
    from agent.model.costs import usd_display
    from engine.db import create_engine, database_url

    try:
        config = Configuration.from_env()
    except ConfigurationError as error:
        if "BILLSLEUTH_MODEL_" in str(error):
            return [Check("model costs", "fail", str(error))]
        return []  # check_model says what is wrong
    checks: list[Check] = []
    if config.investigator == "llm":
        if config.spend.price_for(config.model) is None:
            checks.append(
                Check(
                    "model costs",
                    "warn",
                    f"no price for model {config.model}: its calls are recorded with tokens but cost null, "
                    "and the model budget cannot hold them",
                    f'add it to BILLSLEUTH_MODEL_PRICES, e.g. {{"{config.model}": '
                    '{"input": 0.15, "output": 0.60, "cached_input": 0.075}} (USD per 1M tokens)',
                )
            )
        else:
            price = config.spend.price_for(config.model)
            assert price is not None
            checks.append(
                Check(
                    "model costs",
                    "ok",
                    f"{config.model} at ${price.input:f} in / ${price.output:f} out per 1M tokens",
                )
            )
    engine = create_engine(database_url())
    try:
        spend = await _spend_in_force(engine, config.spend)
        if spend.monthly_budget is None and config.investigator != "llm":
            return checks
        shown = await standing(engine, spend)
    except Exception:
        return checks  # check_database says why the database cannot be read
    finally:
        await engine.dispose()
    if shown.limit is None:
        checks.append(Check("model budget", "ok", "none (set BILLSLEUTH_MODEL_BUDGET, USD a month)"))
        return checks
    detail = (
        f"{usd_display(shown.limit)} for {shown.month}; spent {usd_display(shown.spent)}, "
        f"reserved {usd_display(shown.reserved)}"
    )
    if shown.unpriced_calls:
        detail += f"; {shown.unpriced_calls} call(s) without a price are not counted"
    if shown.paused:
        checks.append(
            Check(
                "model budget",
                "warn",
                detail + "; paused: new cases go to the offline auditor",
                "an approver can raise it: billsleuth budget raise AMOUNT --as U…",
            )
        )
    else:
        checks.append(Check("model budget", "ok", detail))
    return checks


async def _spend_in_force(engine: AsyncEngine, own: Any) -> Any:
    """The stored policy's model budget and prices (what every process enforces); this environment's
    while none is stored."""
    from agent.model.costs import SpendSettings
    from approvals.policy_store import read_policy

    stored = await read_policy(engine)
    return own if stored is None else SpendSettings.of_policy(stored)


async def check_approvers() -> list[Check]:
    from approvals.config import ApprovalSettings, SettingsError

    try:
        settings = ApprovalSettings.from_env()
    except SettingsError as error:
        return [Check("approvers", "fail", str(error))]
    if not settings.approvers:
        approvers = Check(
            "approvers", "warn", "nobody can approve", "set BILLSLEUTH_APPROVERS=U012AB3CD,U045EF6GH"
        )
    else:
        approvers = Check(
            "approvers",
            "ok",
            f"{len(settings.approvers)} finance user(s); two approvers from "
            f"{settings.describe_two_person_threshold()}, "
            f"daily limit {settings.describe_daily_limit()}, "
            f"drafts expire after {settings.approval_ttl_hours} h",
        )
    return [approvers, _support_check(settings.support)]


def _support_check(support: frozenset[str]) -> Check:
    from bot.access import OPEN_TO_EVERYONE, SET_SUPPORT

    if not support:
        return Check("support", "warn", OPEN_TO_EVERYONE, SET_SUPPORT)
    return Check(
        "support", "ok", f"{len(support)} support member(s) and the approvers open cases and read notes"
    )


async def check_logs() -> list[Check]:
    from engine.logcontext import LogSettings
    from engine.settings import SettingsError

    try:
        chosen = LogSettings.from_env().format
    except SettingsError as error:
        return [Check("log format", "fail", str(error), "set BILLSLEUTH_LOG_FORMAT=text or json")]
    return [Check("log format", "ok", "json, one object a line" if chosen == "json" else "text")]


async def check_findings_digest() -> list[Check]:
    """Where and when the bot posts the daily findings digest (`billsleuth sweep --post` by hand)."""
    from bot.config import SlackConfigError, SlackSettings

    try:
        settings = SlackSettings.from_env()
    except SlackConfigError as error:
        return [Check("findings digest", "fail", str(error))]
    if not settings.sweep_channel:
        return [Check("findings digest", "ok", "off (set BILLSLEUTH_SWEEP_CHANNEL to post one daily)")]
    when = f"{settings.sweep_hour:02d}:00 UTC (BILLSLEUTH_SWEEP_HOUR)"
    return [Check("findings digest", "ok", f"daily to {settings.sweep_channel} at {when}")]


async def check_mcp() -> list[Check]:
    """Whether `billsleuth mcp --http` can start (stdio needs no token: the client starts the process)."""
    from agent.mcp_server import McpSettings
    from engine.settings import SettingsError

    try:
        token = McpSettings.from_env().token
    except SettingsError as error:
        return [Check("MCP tools", "fail", str(error))]
    if token is None:
        return [Check("MCP tools", "ok", "stdio only (set BILLSLEUTH_MCP_TOKEN to serve them over --http)")]
    return [Check("MCP tools", "ok", "stdio, and --http on 127.0.0.1 with BILLSLEUTH_MCP_TOKEN (set)")]


CHECKS: tuple[Callable[[], Awaitable[list[Check]]], ...] = (
    check_database,
    check_approvers,
    check_model,
    check_model_costs,
    check_slack,
    check_findings_digest,
    check_mcp,
    check_logs,
)


async def run_checks() -> list[Check]:
    results: list[Check] = []
    for check in CHECKS:
        results.extend(await check())
    return results
