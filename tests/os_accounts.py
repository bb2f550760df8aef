"""Real OS accounts for tests that need a second person at the CLI.

A CLI caller is the process's real OS account (approvals.identity): no environment variable can stand in
for one, so a test that needs two people at the CLI creates a second account (useradd, idempotent) and
runs `billsleuth` under it (setpriv). That needs root, which these machines' test runs are; elsewhere the
test is skipped, saying why.

The account must reach what the command runs on: the interpreter (a pyenv build under /root, say), this
checkout, and the embedded Postgres server's socket directory (its data directory, mode 0700). Each
directory on those paths that others cannot traverse gets the others' search bit, and only that: names
inside stay unlistable, and every file keeps its own mode.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

SECOND = "bs_second"
THIRD = "bs_third"
REPO = Path(__file__).resolve().parents[1]
BILLSLEUTH = Path(sys.executable).with_name("billsleuth")
USERADD_BUSY = (1, 10)  # /etc/passwd or /etc/group locked by another useradd: try again
ALREADY_THERE = 9


@dataclass(frozen=True)
class OsAccount:
    name: str

    def command(self, *argv: str) -> list[str]:
        """`argv` run under this account: its uid, its gid and its groups, nothing inherited but the
        environment the caller passes."""
        return ["setpriv", f"--reuid={self.name}", f"--regid={self.name}", "--init-groups", "--", *argv]


def os_account_for(name: str, db_url: str) -> OsAccount:
    """The OS account `name`, created when missing, able to run this checkout's CLI on `db_url`."""
    if os.geteuid() != 0:
        pytest.skip(f"creating the OS account {name} for a second person at the CLI needs root")
    _create(name)
    for path in (Path(sys.executable).resolve(), Path(sys.prefix), REPO, *_socket_dirs(db_url)):
        _traversable(path)
    return OsAccount(name)


def _create(name: str) -> None:
    for _ in range(50):
        if _exists(name):
            return
        done = subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
            capture_output=True,
            text=True,
        )
        if done.returncode in (0, ALREADY_THERE):
            return
        if done.returncode not in USERADD_BUSY:
            raise RuntimeError(f"useradd {name} failed: {done.stderr.strip()}")
        time.sleep(0.1)  # another test run is adding its account right now
    raise RuntimeError(f"useradd {name} kept finding /etc/passwd locked")


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _socket_dirs(db_url: str) -> list[Path]:
    """The Unix socket directory the URL connects through, if it names one."""
    host = conninfo_to_dict(db_url).get("host") or ""
    return [Path(h) for h in str(host).split(",") if h.startswith("/")]


def _traversable(path: Path) -> None:
    """Every directory from / down to `path` (itself too, when it is one) searchable by others."""
    directories = [p for p in (path, *path.parents) if p.is_dir()]
    for directory in directories:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def run_cli(
    env: dict[str, str], *args: str, account: OsAccount | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `billsleuth` with `env`, as the test's own OS account or as `account` (run from /, which
    every account can reach)."""
    argv = [str(BILLSLEUTH), *args]
    command = account.command(*argv) if account else argv
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd="/")
