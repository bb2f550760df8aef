"""The server: the one place that wires the bot — the Bolt app and its listeners (`app`), the runtime every
flow receives and the whole bot run (`running`), the chores beside them (`chores`: start-up recovery, the
periodic sweep, …) — and serves it over HTTP (aiohttp) or Socket Mode with a clean shutdown (`transport`).

Public API (what `billsleuth bot`, the demo and the latency benchmark build on):

    async with running_bot(database_url, slack_settings, host="127.0.0.1", port=0, ...) as bot:
        bot.url        # http://127.0.0.1:PORT/slack/events — POST signed payloads here
        bot.app        # the Bolt AsyncApp (BillSleuthApp) with every listener registered
        bot.runtime    # BotRuntime: .service (CaseService), .client (AsyncWebClient), .background, …
        await bot.settled()   # wait until all work started by requests so far has finished

    await run_bot(database_url, slack_settings, mode="http" | "socket", port=…)   # until SIGINT/SIGTERM

`database_url` is libpq's (`postgresql://…`); the schema and the checkpoint tables must be current
(`prepare_database` upgrades them on the embedded server, safely when several bots start at once, and
refuses a behind external database: only `billsleuth db upgrade` changes that one). How slow work stays
off Slack's 3-second ack path: bot/server/app.py's docstring.
"""

from bot.server.app import BillSleuthApp, build_app, create_app, create_web_client, keep_alive
from bot.server.chores import DEFAULT_EXPIRY_INTERVAL, Chores
from bot.server.running import Mode, RunningBot, open_runtime, prepare_database, run_bot, running_bot
from bot.server.transport import (
    EVENTS_PATH,
    HEALTH_PATH,
    HttpServer,
    build_web_app,
    run_http,
    run_socket_mode,
    start_http,
    start_socket_mode,
)

__all__ = [
    "DEFAULT_EXPIRY_INTERVAL",
    "EVENTS_PATH",
    "HEALTH_PATH",
    "BillSleuthApp",
    "Chores",
    "HttpServer",
    "Mode",
    "RunningBot",
    "build_app",
    "build_web_app",
    "create_app",
    "create_web_client",
    "keep_alive",
    "open_runtime",
    "prepare_database",
    "run_bot",
    "run_http",
    "run_socket_mode",
    "running_bot",
    "start_http",
    "start_socket_mode",
]
