"""Log lines that name their case, credit note and Slack event: JSON when asked, text by default."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.logcontext import bind, bind_for_task, log_handler
from engine.settings import SettingsError

JSON = {"BILLSLEUTH_LOG_FORMAT": "json"}
log = logging.getLogger("tests.logcontext")


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """What the root logger writes in JSON, for the test to read."""
    stream = io.StringIO()
    handler, root = log_handler(JSON, stream), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_ids_bound_and_only_those(json_lines: io.StringIO) -> None:
    log.info("before")
    with bind(case_id="K-0001"), bind(credit_note_id="CN-0001"):
        log.warning("inside %s", "both")
    first, second = lines(json_lines)
    assert first["message"] == "before" and "case_id" not in first and "event_id" not in first
    assert {k: second[k] for k in ("level", "logger", "message", "case_id", "credit_note_id")} == {
        "level": "WARNING",
        "logger": "tests.logcontext",
        "message": "inside both",
        "case_id": "K-0001",
        "credit_note_id": "CN-0001",
    }
    assert str(second["ts"]).endswith("+00:00")


def test_a_traceback_is_one_string_in_the_line(json_lines: io.StringIO) -> None:
    try:
        raise RuntimeError("ledger unreachable")
    except RuntimeError:
        log.exception("failed")
    (line,) = lines(json_lines)
    assert "RuntimeError: ledger unreachable" in str(line["exc_info"])


async def test_ids_follow_work_into_asyncio_tasks(json_lines: io.StringIO) -> None:
    started = asyncio.Event()

    async def later(message: str) -> None:
        await started.wait()  # logs after the block that started it has ended
        log.info(message)

    with bind(case_id="K-0002", event_id="Ev01"):
        inherited = asyncio.create_task(later("inherited"))
    bound_later = asyncio.create_task(bind_for_task(later("bound for the task"), credit_note_id="CN-0002"))
    started.set()
    await asyncio.gather(inherited, bound_later)
    log.info("outside")
    by_message = {line["message"]: line for line in lines(json_lines)}
    assert (by_message["inherited"]["case_id"], by_message["inherited"]["event_id"]) == ("K-0002", "Ev01")
    assert by_message["bound for the task"]["credit_note_id"] == "CN-0002"
    assert "case_id" not in by_message["bound for the task"]
    assert not {"case_id", "credit_note_id", "event_id"} & set(by_message["outside"])


def test_text_is_the_default() -> None:
    stream = io.StringIO()
    handler = log_handler({"BILLSLEUTH_LOG_FORMAT": ""}, stream)
    with bind(case_id="K-0003"):
        handler.handle(log.makeRecord(log.name, logging.INFO, __file__, 1, "plain %s", ("words",), None))
    assert stream.getvalue().rstrip().endswith("INFO tests.logcontext: plain words")


def test_a_bad_format_is_one_line_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"^BILLSLEUTH_LOG_FORMAT must be text or json, got 'xml'$"):
        log_handler({"BILLSLEUTH_LOG_FORMAT": "xml"})


def test_the_bot_command_refuses_a_bad_format_in_one_line(tmp_path: Path) -> None:
    billsleuth = Path(sys.executable).with_name("billsleuth")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    env.update(SLACK_BOT_TOKEN="xoxb-1", SLACK_APP_TOKEN="xapp-1", BILLSLEUTH_LOG_FORMAT="xml")
    done = subprocess.run(
        [str(billsleuth), "bot"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "BILLSLEUTH_LOG_FORMAT must be text or json, got 'xml'" in done.stderr


def test_setup_logging_writes_json_lines_to_stderr() -> None:
    program = (
        "import logging\n"
        "from engine.logcontext import bind, setup_logging\n"
        "setup_logging()\n"
        "with bind(event_id='Ev02'):\n"
        "    logging.getLogger('billsleuth').info('started')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env={**os.environ, **JSON},
        timeout=60,
    )
    (line,) = [json.loads(text) for text in done.stderr.splitlines()]
    assert (line["logger"], line["message"], line["event_id"]) == ("billsleuth", "started", "Ev02")
