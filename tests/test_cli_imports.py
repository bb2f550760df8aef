"""The read commands import only what they use: no LangGraph, LangChain, Alembic, openai, Slack or MCP SDK.

Those cost a read command most of its start-up time (benchmarks/cli_latency.py prints the figures); a
command that opens or decides a case loads the graph when it first runs one (agent.graph.lazy_graph)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "langgraph",
    "langchain_core",
    "langsmith",
    "alembic",
    "openai",
    "slack_sdk",
    "slack_bolt",
    "mcp",
    "mcp_types",
)
PROBE = """
import json, sys
from bot.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:  # a one-line refusal exits through fail()
    code = stop.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.stdin.read())))
print("HEAVY=" + json.dumps(heavy), file=sys.stderr)
sys.exit(code)
"""


def run_probe(url: str, *args: str, heavy: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    env = {**os.environ, "DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        input=json.dumps(heavy),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    marker = [line for line in done.stderr.splitlines() if line.startswith("HEAVY=")]
    assert marker, done.stderr
    return done.returncode, json.loads(marker[-1].removeprefix("HEAVY=")), done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["mcp", "--help"],
        ["list", "--json"],
        ["policy", "show"],
        ["activity", "verify"],
        ["case", "show", "CASE-0001"],
        ["costs", "--json"],
        ["budget", "show"],
    ],
    ids=" ".join,
)
def test_a_read_command_loads_no_graph_model_or_slack_library(db_url: str, args: list[str]) -> None:
    code, heavy, _ = run_probe(db_url, *args)
    assert heavy == []
    assert code == (2 if args[0] == "case" else 0)  # no CASE-0001 here: a one-line refusal


def test_an_unknown_case_is_named_whole_in_the_refusal(db_url: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "billsleuth"), "case", "show", "CASE-0404"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": db_url},
        timeout=120,
    )
    assert (done.returncode, done.stderr.strip()) == (2, "billsleuth: error: no case 'CASE-0404'")


def test_opening_a_case_still_loads_the_graph_when_it_runs_one(seeded_db_url: str) -> None:
    code, heavy, out = run_probe(
        seeded_db_url, "case", "open", "C-0001", "why this charge?", "--as", "U0SUPPORT1", "--json"
    )
    assert code == 0, out
    assert "langgraph" in heavy
    assert json.loads(out)["status"] in ("explained", "awaiting_approval", "escalated")


@pytest.mark.parametrize("args", [["audit", "--all", "--json"], ["sweep", "--json"]], ids=" ".join)
def test_the_audit_and_the_sweep_read_and_record_without_sqlalchemy(
    seeded_db_url: str, args: list[str]
) -> None:
    """Importing SQLAlchemy takes longer here than auditing 3,000 customers: the audit streams on plain
    psycopg and the sweep records its findings on it too (agent.auditor.sweep_record)."""
    code, heavy, out = run_probe(seeded_db_url, *args, heavy=("sqlalchemy", "pydantic", *HEAVY))
    assert code == 0, out
    assert heavy == []
    assert json.loads(out)["findings"]
