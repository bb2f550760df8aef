"""App Home: approvers see the credit notes waiting for a decision (with their buttons), the notes the daily
limit holds and today's room; everyone sees their own open cases."""

from __future__ import annotations

from bot.cards import home_view
from bot.presenters.home import home
from bot.runtime import BotRuntime
from engine import locks


async def publish_home(runtime: BotRuntime, user_id: str) -> None:
    """Read and publish the user's Home under a per-user lock (any process): whichever publish lands last
    read the newest state, so an outbox refresh that read before a click can never overwrite the
    click's own."""
    async with runtime.locks.locked(locks.home(user_id)):
        view = await home(runtime.service, user_id, runtime.is_approver(user_id))
        await runtime.client.views_publish(user_id=user_id, view=home_view(view))
