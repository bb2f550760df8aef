"""Signed requests as Slack sends them, for `billsleuth demo` and the tests: `payloads.app_mention(…)`,
`payloads.click(…)`, … (every builder is here), in modules by kind — the workspace and its ids, the Events
API, interactivity, Slack Connect, and the wire (signing and encoding).

The field structure follows the payloads in slackapi/bolt-python's scenario tests (events, block_actions,
view_submission, slash commands, message shortcuts); the values are our own.
"""

from bot.slack_testing.payloads.events import (
    app_home_opened,
    app_mention,
    channel_message,
    edited_mention,
    event_callback,
    mention_text,
    reaction_added,
)
from bot.slack_testing.payloads.interactions import (
    block_actions,
    block_suggestion,
    click,
    find_element,
    message_action,
    slash_command,
    view_block_actions,
    view_closed,
    view_submission,
)
from bot.slack_testing.payloads.shared_channels import in_shared_channel
from bot.slack_testing.payloads.wire import (
    INTERACTIVE_TYPES,
    RETRY_NUM_HEADER,
    RETRY_REASON_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    encode,
    sign,
    signature,
    socket_mode_type,
)
from bot.slack_testing.payloads.workspace import (
    DEMO,
    Workspace,
    fake_response_url,
    new_event_id,
    new_trigger_id,
    new_ts,
)

__all__ = [
    "DEMO",
    "INTERACTIVE_TYPES",
    "RETRY_NUM_HEADER",
    "RETRY_REASON_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Workspace",
    "app_home_opened",
    "app_mention",
    "block_actions",
    "block_suggestion",
    "channel_message",
    "click",
    "edited_mention",
    "encode",
    "event_callback",
    "fake_response_url",
    "find_element",
    "in_shared_channel",
    "mention_text",
    "message_action",
    "new_event_id",
    "new_trigger_id",
    "new_ts",
    "reaction_added",
    "sign",
    "signature",
    "slash_command",
    "socket_mode_type",
    "view_block_actions",
    "view_closed",
    "view_submission",
]
