"""`billsleuth` run inside the test process: the console script's entry (`bot.cli.main`) with argv, its own
environment and working directory, stdout, stderr and exit code captured.

A fresh `billsleuth` process pays about a second of interpreter start and imports before it does anything;
a few hundred of them were a large part of the suite's time. Tests whose point is not the process
boundary run the command here instead, as a process would see it: `os.environ` is exactly the `env`
given (the whole environment, as for subprocess.run), nothing the test process configured for logging
or warnings reaches the output (Python's own last-resort handler prints warnings to the captured
stderr, as in a fresh process), and the command runs on a thread of its own, so its `asyncio.run`
never meets the test's running loop; the signal handlers a command installs (eval's SIGTERM) stay its own.
Tests about the process itself — signals, exit on a dead
database pool, the installed script, import costs, several processes at once — keep subprocess.run.

One command at a time per test process: the environment, sys.stdout and sys.stderr are process-wide.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from bot.cli import main

_one_at_a_time = threading.Lock()


@dataclass(frozen=True)
class Done:
    """What subprocess.run(..., capture_output=True, text=True) returns, for the fields tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def billsleuth(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Done:
    """Run `billsleuth ARGS…` in this process and wait for it. `env`: the command's whole environment
    (default: this process's, as subprocess.run does)."""
    outcome: list[Done | BaseException] = []
    worker = threading.Thread(target=lambda: outcome.append(_run(list(args), env, cwd)), name="billsleuth")
    with _one_at_a_time:
        worker.start()
        worker.join()
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result


async def billsleuth_async(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Done:
    """The same, off the running loop (which may serve the recording Slack API the command calls)."""
    return await asyncio.to_thread(billsleuth, *args, env=env, cwd=cwd)


def _run(args: list[str], env: Mapping[str, str] | None, cwd: Path | None) -> Done | BaseException:
    out, err = io.StringIO(), io.StringIO()
    try:
        with _as_a_process(env, cwd, err), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as stop:
                code = _exit_code(stop.code, err)
            except Exception:
                # An uncaught error: a process prints the traceback and exits 1.
                import traceback

                traceback.print_exc(file=err)
                code = 1
    except BaseException as error:  # the runner's own failure: raised in the caller's thread
        return error
    return Done(["billsleuth", *args], code, out.getvalue(), err.getvalue())


def _exit_code(code: object, err: io.StringIO) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)  # sys.exit("message") prints it and exits 1
    return 1


@contextlib.contextmanager
def _as_a_process(env: Mapping[str, str] | None, cwd: Path | None, err: io.StringIO) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        # A fresh process has no handler on the root logger: WARNING and above reach stderr through
        # logging.lastResort, which writes to sys.stderr as it is at the time (the captured one).
        root.handlers, root.level = [], logging.WARNING
        with warnings.catch_warnings(), _own_signal_handlers():
            warnings.resetwarnings()
            for action, category in _PYTHON_DEFAULT_FILTERS:
                warnings.simplefilter(action, category)
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")  # as pyproject's
            yield
    finally:
        root.handlers, root.level = saved_handlers, saved_level
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """signal.signal kept to the command: it works only on the main thread (the command runs on another),
    and a handler installed for real would outlive the command in the test process. Nothing signals a
    command run here; tests about signals run a process."""
    installed: dict[int, Any] = {}

    def install(signum: int, handler: Any) -> Any:
        previous = installed.get(signum, signal.getsignal(signum))
        installed[signum] = handler
        return previous

    with mock.patch.object(signal, "signal", install):
        yield


# Python's default warning filters outside __main__ (`python -W` unset): what a console script shows.
_PYTHON_DEFAULT_FILTERS: tuple[tuple[Any, type[Warning]], ...] = (
    ("default", Warning),
    ("ignore", DeprecationWarning),
    ("ignore", PendingDeprecationWarning),
    ("ignore", ImportWarning),
    ("ignore", ResourceWarning),
)
