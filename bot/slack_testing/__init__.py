"""Slack without Slack: a recording Web API server, signed payloads shaped like Slack's, and a client that
delivers them. Production code: `billsleuth demo` drives the real Bolt app with these, and so do the tests."""

from bot.slack_testing.client import Delivery, SignedClient, deliver
from bot.slack_testing.payloads import DEMO, Workspace, sign, signature
from bot.slack_testing.recorder import SlackRecorder
from bot.slack_testing.slack_objects import EphemeralMessage, RecordedCall, StoredMessage, StoredView

__all__ = [
    "DEMO",
    "Delivery",
    "EphemeralMessage",
    "RecordedCall",
    "SignedClient",
    "SlackRecorder",
    "StoredMessage",
    "StoredView",
    "Workspace",
    "deliver",
    "sign",
    "signature",
]
