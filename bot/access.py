"""Who may read credit notes and open cases, as people are told when they may not (DESIGN §3/§4).

Reading notes (`/billsleuth show|list`, App Home's notes) is for approvers and BILLSLEUTH_SUPPORT. While
BILLSLEUTH_SUPPORT is empty anyone may open a case; once it names people, only they and the approvers may,
by mention, slash command or shortcut. `BotRuntime.may_read` / `may_open_cases` decide; this module holds
what a refused person reads, and the delivery keys that make a replayed payload run once.
"""

from __future__ import annotations

import hashlib

NOT_ALLOWED_TO_READ = (
    "credit notes are shown only to approvers (BILLSLEUTH_APPROVERS) and support staff (BILLSLEUTH_SUPPORT)"
)
# What the bot's start and `doctor` say while BILLSLEUTH_SUPPORT is empty (DESIGN §3: the default).
OPEN_TO_EVERYONE = (
    "BILLSLEUTH_SUPPORT is empty: any member of the workspace can open cases and see their cards"
)
SET_SUPPORT = "set BILLSLEUTH_SUPPORT=U0SUPPORT1,U0SUPPORT2 (support staff's Slack member IDs)"
NOT_ALLOWED_TO_OPEN = (
    "sorry, only support staff (BILLSLEUTH_SUPPORT) and approvers can open billing cases here; "
    "please ask someone in support to open this one"
)


def delivery_key(kind: str, raw_body: str | bytes) -> str:
    """A key for one signed delivery (slash command, modal submission), for `runtime.claim`.

    These have no event_id; their body does carry a trigger_id Slack makes unique per invocation, so
    the same body twice is a replay (within the signature's five-minute window), never a new request."""
    raw = raw_body.encode() if isinstance(raw_body, str) else raw_body
    return f"{kind}:{hashlib.sha256(raw).hexdigest()}"
