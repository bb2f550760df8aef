"""billsleuth bot [--http] [--port N]"""

from __future__ import annotations

import argparse
import asyncio
import gc

from bot.cli.common import CommandError


def add_parser(sub: argparse._SubParsersAction) -> None:
    bot = sub.add_parser(
        "bot",
        help="run the Slack bot (Socket Mode when SLACK_APP_TOKEN is set, else HTTP at /slack/events)",
    )
    bot.add_argument(
        "--http",
        action="store_true",
        help="serve HTTP even when SLACK_APP_TOKEN is set (needs the signing secret)",
    )
    bot.add_argument("--port", type=int, metavar="N", help="HTTP port (default $PORT, else 3000)")
    bot.set_defaults(handler=run)


def freeze_the_startup_heap() -> None:
    """Once the bot is up, what is alive (the modules, the compiled graph, the Bolt app: several hundred
    thousand objects) lives as long as the process. Frozen (gc.freeze), a full collection no longer walks
    them: before, one such pass came in the middle of a 60-mention burst and stopped each process's event
    loop for 90-150 ms, acks included. Done here, in the process `billsleuth bot` starts, not in
    open_runtime: a test process starts many bots, and what it froze would never be collected."""
    gc.collect()
    gc.freeze()


def run(args: argparse.Namespace) -> int:
    from agent.database import SchemaNotReady
    from agent.graph.configuration import Configuration
    from approvals.config import ApprovalSettings
    from bot.cli.common import ready_database
    from bot.config import SlackConfigError, SlackSettings
    from bot.server import run_bot
    from engine.logcontext import setup_logging
    from engine.settings import SettingsError

    if args.port is not None and not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be from 0 to 65535, got {args.port}")
    try:
        settings = SlackSettings.from_env()
        mode = "http" if args.http or not settings.app_token.get_secret_value() else "socket"
        settings.require(mode)
        configuration = Configuration.from_env()
        approvals = ApprovalSettings.from_env()
        setup_logging()
    except SettingsError as error:  # Slack's, the investigator's, the policy's or the log format's
        raise CommandError(str(error)) from None
    # The schema and the checkpoint tables current (upgraded on the embedded server, one process at a
    # time), and the login the bot runs as: DATABASE_URL's, or the embedded server's runtime login.
    url = ready_database()

    def ready(where: str) -> None:
        freeze_the_startup_heap()
        print(f"BillSleuth is running ({where})", flush=True)

    async def serve() -> None:
        await run_bot(
            url,
            settings,
            mode=mode,
            port=args.port,
            configuration=configuration,
            approval_settings=approvals,
            on_ready=ready,
        )

    try:
        asyncio.run(serve())
    except (SlackConfigError, SchemaNotReady) as error:
        raise CommandError(str(error)) from None
    return 0
