"""billsleuth stripe sync [--since YYYY-MM-DD] [--json]

The Stripe account (STRIPE_API_KEY; BILLSLEUTH_STRIPE_API_BASE for tests) read with the official SDK and
written through `ledger import`'s own loader as one `billsleuth-ledger/2` input with source "stripe"
(engine.stripe_sync): a re-sync changes nothing, and after the first run only what is new or changed is
read. Prints what was added, changed and left unchanged per type, and what Stripe holds that the ledger
cannot (skipped, per type).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from bot.cli.common import CommandError


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("stripe", help="read a Stripe account into the ledger")
    stripe_sub = parser.add_subparsers(dest="stripe_command", metavar="ACTION", required=True)
    sync = stripe_sub.add_parser(
        "sync",
        help="import the Stripe account's billing objects (incremental after the first run)",
        description="Read customers, prices, coupons, tax rates, subscriptions, invoices with their "
        "payments, refunds and credit notes, and upsert them by Stripe's ids (source stripe).",
    )
    sync.add_argument(
        "--since",
        default=None,
        metavar="YYYY-MM-DD",
        help="read invoices, credit notes and refunds created from this day (default: where the last "
        "sync stopped; everything on the first)",
    )
    sync.add_argument("--json", action="store_true", help="print the counts as JSON")
    sync.set_defaults(handler=run_sync)


def run_sync(args: argparse.Namespace) -> int:
    from approvals.identity import os_account
    from approvals.ledger_import import LedgerRejected
    from bot.cli.cmd_activity import parse_since
    from bot.cli.cmd_ledger import summary
    from bot.cli.common import print_json, ready_database
    from engine.stripe_api import StripeNotConfigured, stripe_client

    since = parse_since(args.since)
    try:
        client = stripe_client()
    except StripeNotConfigured as error:
        raise CommandError(str(error)) from None
    url = ready_database()
    try:
        synced = asyncio.run(_sync(url, client, os_account(), since))
    except LedgerRejected as rejected:  # a mapping the loader refuses: a bug of ours, named in full
        raise CommandError("Stripe's data did not import; nothing was written:\n" + str(rejected)) from None
    if args.json:
        print_json(synced.payload())
    else:
        print(summary(synced.report).replace("imported", "synced from Stripe:", 1))
        if synced.skipped:
            listed = ", ".join(f"{n} {kind}" for kind, n in synced.skipped.items())
            print(f"  skipped (the ledger cannot hold them): {listed}")
    return 0


async def _sync(url: str, client: Any, actor: str, since: Any) -> Any:
    import stripe

    from approvals.stripe_ledger import sync_stripe
    from engine.db import create_engine

    engine = create_engine(url)
    try:
        return await sync_stripe(engine, client, actor=actor, since=since)
    except stripe.StripeError as error:  # after the SDK's own retries
        raise CommandError(f"Stripe refused or did not answer: {error.user_message or error}") from None
    finally:
        await engine.dispose()
