"""Who is at the CLI: the process's real OS account, from its uid.

One person, one vote, at every door (DESIGN.md §4). In Slack a person is the user id of a Slack-signed
payload; at the CLI they are the OS account the kernel says runs the process. LOGNAME, USER and
getpass.getuser() read the environment first, so anyone could be anyone by setting a variable: they never
count. The account is recorded as `cli:<os account>` on votes and on the cases opened from the CLI.
"""

from __future__ import annotations

import os
import pwd

from approvals.models import CLI_SOURCE


def os_account() -> str:
    """The name of the real uid's account (`pwd`), never the environment's. A uid with no passwd entry
    (a container's arbitrary uid) is still one account: `#<uid>`, which no account name can spell."""
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"#{uid}"


def cli_source() -> str:
    """`cli:<os account>`: where a CLI vote or case comes from (approvals.source, cases.opened_from)."""
    return f"{CLI_SOURCE}{os_account()}"
