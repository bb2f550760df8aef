"""App Home: approvers see the credit notes waiting for a decision (with their buttons); everyone sees
their own open cases."""

from __future__ import annotations

from bot.cards import home_view
from bot.presenters.home import home
from bot.runtime import BotRuntime


async def publish_home(runtime: BotRuntime, user_id: str) -> None:
    view = await home(runtime.service, user_id, runtime.is_approver(user_id))
    await runtime.client.views_publish(user_id=user_id, view=home_view(view))
