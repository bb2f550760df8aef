"""`billsleuth eval` end to end against real databases: the command run in this process as a process would
see it (tests/cli.py), and the installed console script where the process is the point (Ctrl-C).

The evaluation must score the offline investigator perfectly on the default dataset and on another seed's
(the extra kinds after the first 100 included, each its own row), print exactly DESIGN's JSON shape, and
leave the database at DATABASE_URL as it found it — every table, every sequence — with no scratch database
left behind on the server. A scenario naming its customer instead of numbering it fails when the words
find another customer, several or none.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent.cases.service import case_service
from agent.graph.configuration import Configuration
from approvals.config import ApprovalSettings
from bot.cli import main as cli
from engine.db import with_database
from scenarios.dataset import generate
from scenarios.eval_scratch import leftover_scratch_databases
from scenarios.evaluation import Run, ScenarioFile, cancelled_tasks_finished
from scenarios.extra_kinds import EXTRA_VARIANTS, PER_VARIANT, SCENARIOS_PER_SEED
from scenarios.generator import DEFAULT_SCENARIOS_DIR, DEFAULT_SEED
from scenarios.seed import seed_database
from scenarios.stripe_kinds import NO_ERROR, STRIPE_KINDS
from tests.cli import Done, billsleuth, billsleuth_async
from tests.openai_stub import Delay, OpenAIStub, call
from tests.pg import admin_execute, clone_database, database_name, drop_database

BILLSLEUTH = Path(sys.executable).parent / "billsleuth"
TOP_KEYS = {"n", "investigator", "k", "metrics", "by_variant", "failures"}
RATE_KEYS = (
    "root_cause",
    "invoice",
    "overcharge",
    "action",
    "false_credit",
    "missed_credit",
    "hallucinated_numbers",
)


def run_eval(url: str, home: Path, *args: str) -> Done:
    """`billsleuth eval ARGS` in this process, as a process would see it (tests/cli.py): each process paid
    a few seconds of imports again. The installed script and Ctrl-C keep processes of their own below."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "BILLSLEUTH_INVESTIGATOR")}
    env.update(DATABASE_URL=url, BILLSLEUTH_HOME=str(home))
    return billsleuth("eval", *args, env=env)


def fingerprint(url: str) -> dict[str, Any]:
    """Every table's row count and an md5 of its rows, and every sequence's position."""
    with psycopg.connect(url) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
            )
        ]
        state: dict[str, Any] = {}
        for table in tables:
            digest = "md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
            state[table] = conn.execute(f'SELECT count(*), {digest} FROM "{table}" t').fetchone()
        for name, last_value in conn.execute("SELECT sequencename, last_value FROM pg_sequences"):
            state[f"sequence {name}"] = last_value
    return state


def rows(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # type: ignore[index]


def assert_shape(report: dict[str, Any], n: int, k: int, stripe: bool = False) -> None:
    """`stripe`: the dataset's own evaluation, which scores the Stripe-sourced rows apart as well."""
    assert set(report) == TOP_KEYS | ({"stripe"} if stripe else set())
    if stripe:
        block = report["stripe"]
        assert set(block) == {"n", "metrics", "by_variant", "failures"}
        assert set(block["metrics"]) == {*RATE_KEYS, "pass_hat_k"}
        assert sum(row["n"] for row in block["by_variant"].values()) == block["n"] > 0
    assert (report["n"], report["investigator"], report["k"]) == (n, "offline", k)
    assert set(report["metrics"]) == {*RATE_KEYS, "pass_hat_k"}
    for key in RATE_KEYS:
        metric = report["metrics"][key]
        assert set(metric) == {"rate", "n", "ci95"}, key
        lo, hi = metric["ci95"]
        assert 0.0 <= lo <= metric["rate"] <= hi <= 1.0, key
    assert list(report["metrics"]["pass_hat_k"]) == [str(j) for j in range(1, k + 1)]
    assert all(set(row) == {"n", "passed"} for row in report["by_variant"].values())
    assert sum(row["n"] for row in report["by_variant"].values()) == n
    assert isinstance(report["failures"], list)


def assert_perfect(report: dict[str, Any]) -> None:
    metrics = report["metrics"]
    runs = report["n"] * report["k"]
    for key in ("root_cause", "invoice", "overcharge", "action"):
        failed = [(f["scenario"], f["got"]["status"], f["escalation_reason"]) for f in report["failures"]]
        assert (metrics[key]["rate"], metrics[key]["n"]) == (1.0, runs), (key, failed)
    assert metrics["false_credit"]["rate"] == 0.0
    assert metrics["missed_credit"]["rate"] == 0.0
    assert metrics["hallucinated_numbers"]["rate"] == 0.0
    assert set(metrics["pass_hat_k"].values()) == {1.0}
    assert all(row["passed"] == row["n"] for row in report["by_variant"].values())
    assert report["failures"] == []


def test_console_script_is_installed() -> None:
    assert BILLSLEUTH.is_file(), f"{BILLSLEUTH} is missing: install the project into the venv"


def test_eval_on_an_empty_database_seeds_the_default_dataset_and_scores_it(
    db_url: str, pg_server_url: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    result = run_eval(db_url, tmp_path, "--json", "--investigator", "offline")
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "seeded the default dataset" in result.stderr
    report = json.loads(result.stdout)
    assert_shape(report, n=SCENARIOS_PER_SEED, k=1, stripe=True)
    # The default dataset: 80 of the first 100 owe a credit and 20 are explain-only; then the extra kinds.
    owed = sum(s.truth.expected_action == "credit_note" for s in generate(DEFAULT_SEED))
    assert report["metrics"]["missed_credit"]["n"] == owed
    assert report["metrics"]["false_credit"]["n"] == SCENARIOS_PER_SEED - owed
    assert owed > 80 and SCENARIOS_PER_SEED - owed > 20
    for variant in EXTRA_VARIANTS:  # each its own row
        assert report["by_variant"][variant] == {"n": PER_VARIANT, "passed": PER_VARIANT}, variant
    # Seeded into the database itself; the cases ran elsewhere.
    assert rows(db_url, "customers") == SCENARIOS_PER_SEED
    for table in ("cases", "credit_notes", "audit_log", "activity_log"):
        assert rows(db_url, table) == 0, table
    assert leftover_scratch_databases(pg_server_url) == []
    assert_perfect(report)
    # Apart: one Stripe-sourced customer per kind that means something on Stripe, and one billed right.
    stripe = report["stripe"]
    assert stripe["by_variant"] == {kind: {"n": 1, "passed": 1} for kind in [*STRIPE_KINDS, NO_ERROR]}
    assert stripe["failures"] == [] and stripe["metrics"]["pass_hat_k"] == {"1": 1.0}
    assert stripe["metrics"]["false_credit"] == {"rate": 0.0, "n": 1, "ci95": [0.0, 0.7935]}
    print(f"\nfull offline eval of the {SCENARIOS_PER_SEED} default scenarios with seeding: {elapsed:.1f} s")


@pytest.fixture
async def busy_seeded_db_url(seeded_db_url: str) -> str:
    """The seeded default dataset after some real work: one case opened, its credit note drafted."""
    scenario = json.loads((DEFAULT_SCENARIOS_DIR / "S001.json").read_text(encoding="utf-8"))
    async with case_service(
        seeded_db_url, Configuration(investigator="offline"), ApprovalSettings()
    ) as service:
        case = await service.open_case(scenario["question"], requester="U0SUPPORT", customer_id="C-0001")
    assert case["credit_note"] is not None
    return seeded_db_url


def one_file_per_variant(target: Path) -> list[str]:
    target.mkdir()
    chosen: dict[str, str] = {}
    for path in sorted(DEFAULT_SCENARIOS_DIR.glob("S*.json")):
        variant = json.loads(path.read_text(encoding="utf-8"))["truth"]["variant"]
        if variant not in chosen:
            chosen[variant] = path.stem
            shutil.copy(path, target / path.name)
    return sorted(chosen.values())


def test_eval_leaves_the_ledger_as_it_stands_and_repeats_from_untouched_copies(
    busy_seeded_db_url: str, pg_server_url: str, tmp_path: Path
) -> None:
    # S001 is in the subset and its customer already has a draft credit note (CN numbers continue past it).
    chosen = one_file_per_variant(tmp_path / "subset")
    assert "S001" in chosen and len(chosen) == 16 + len(EXTRA_VARIANTS)
    before = fingerprint(busy_seeded_db_url)
    assert before["credit_notes"][0] == 1 and before["cases"][0] == 1

    result = run_eval(
        busy_seeded_db_url, tmp_path, "--json", "-k", "2", "--scenarios", str(tmp_path / "subset")
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_shape(report, n=len(chosen), k=2)
    assert report["metrics"]["root_cause"]["n"] == 2 * len(chosen)
    assert fingerprint(busy_seeded_db_url) == before
    assert leftover_scratch_databases(pg_server_url) == []
    assert_perfect(report)


async def test_eval_scores_another_seeds_dataset_from_its_files(
    pg_server_url: str, migrated_template: str, tmp_path: Path
) -> None:
    url = clone_database(pg_server_url, migrated_template, prefix="s3")
    try:
        await seed_database(url, 3, tmp_path / "seed3")
        before = fingerprint(url)
        result = run_eval(url, tmp_path, "--json", "--scenarios", str(tmp_path / "seed3"))
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert_shape(report, n=SCENARIOS_PER_SEED, k=1)
        assert set(EXTRA_VARIANTS) <= set(report["by_variant"])
        assert fingerprint(url) == before
        assert_perfect(report)
    finally:
        drop_database(pg_server_url, database_name(url))


def test_the_terminal_table(seeded_db_url: str, tmp_path: Path) -> None:
    subset = tmp_path / "two"
    subset.mkdir()
    for name in ("S001.json", "S081.json"):
        shutil.copy(DEFAULT_SCENARIOS_DIR / name, subset / name)
    result = run_eval(seeded_db_url, tmp_path, "--scenarios", str(subset), "--investigator", "offline")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("BillSleuth eval: 2 scenarios × 1 run, investigator offline")
    root_cause = next(line for line in lines if line.startswith("root cause"))
    assert root_cause.split()[2:] == ["100.0%", "[34.2%,", "100.0%]", "2"]
    assert "failures: none" in lines


def test_a_named_customer_the_words_do_not_find_fails_the_run(seeded_db_url: str, tmp_path: Path) -> None:
    """The evaluation opens a named scenario as `case open ""` does: the customer comes from the words. The
    same complaint signed by another customer's name, by two customers' names, or by nobody fails."""
    everyone = generate(DEFAULT_SEED)
    named = next(s for s in everyone if s.kind == "customer_by_name" and s.ledger.customer.name.isascii())
    name = named.ledger.customer.name
    someone_else = next(s.ledger.customer for s in everyone[:100] if s.ledger.customer.name.isascii())
    # Two customers whose names are as long as each other: both fit exactly, neither wins.
    by_base: dict[str, list[str]] = {}
    for s in everyone[:100]:
        by_base.setdefault(s.ledger.customer.name.rsplit("-", 1)[0], []).append(s.ledger.customer.name)
    several = " / ".join(next(names for names in by_base.values() if len(names) >= 2)[:2])
    original = json.loads((DEFAULT_SCENARIOS_DIR / f"{named.id}.json").read_text(encoding="utf-8"))
    assert original["customer_named_by"] == "name" and "C-" not in original["question"]
    subset = tmp_path / "named"
    subset.mkdir()
    signed = {"S901": name, "S902": someone_else.name, "S903": several, "S904": ""}
    for scenario_id, signature in signed.items():
        question = re.sub(re.escape(name), signature, original["question"], flags=re.IGNORECASE)
        data = {**original, "id": scenario_id, "question": question}
        (subset / f"{scenario_id}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    result = run_eval(seeded_db_url, tmp_path, "--json", "--scenarios", str(subset))

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["by_variant"] == {"customer_by_name": {"n": 4, "passed": 1}}
    got = {f["scenario"]: f for f in report["failures"]}
    assert sorted(got) == ["S902", "S903", "S904"]
    assert all(f["expected"]["customer_id"] == named.ledger.customer.id for f in got.values())
    assert got["S902"]["got"]["customer_id"] == someone_else.id
    assert got["S903"]["got"]["status"] == "error"
    assert "could mean several customers" in got["S903"]["escalation_reason"]
    assert (got["S904"]["got"]["status"], got["S904"]["got"]["customer_id"]) == ("needs_customer", None)


def test_the_terminal_table_shows_the_extra_kinds_as_their_own_rows() -> None:
    from bot.cli.cmd_eval import render
    from scenarios.eval_metrics import answer_from_case, score
    from scenarios.evaluation import EvalReport, load_scenario

    def run(scenario: ScenarioFile, case: dict[str, Any]) -> Run:
        answer = answer_from_case(case)
        return Run(scenario, 1, answer, score(scenario.truth, answer))

    first = load_scenario(DEFAULT_SCENARIOS_DIR / "S001.json")
    extra = [load_scenario(path) for path in sorted(DEFAULT_SCENARIOS_DIR.glob("S1[0-9][0-9].json"))]
    two = next(s for s in extra if s.truth.variant == "two_faults")
    right = {
        "root_cause": two.truth.root_cause,
        "invoice_ids": [two.truth.invoice_id],
        "overcharge": f"{two.truth.overcharge:.2f}",
        "expected_action": "credit_note",
    }
    note = {"id": "CN-0001", "invoice_id": two.truth.invoice_id, "amount": right["overcharge"]}
    case = {"status": "awaiting_approval", "findings": right, "credit_note": note, "escalation_reason": None}
    runs = [
        run(first, {"status": "needs_customer", "customer_id": None}),
        run(two, {**case, "customer_id": "C-0001", "other_findings": []}),
    ]
    report = EvalReport("offline", 1, [first, two], runs)
    lines = render(report).splitlines()
    heading = lines.index("beyond one complaint:")
    assert lines[heading - 1].split() == ["cancel_not_respected", "0", "1"]
    assert lines[heading + 1].split() == ["two_faults", "0", "1"]
    [(other,)] = [tuple(two.truth.other_findings or ())]
    failure = next(line for line in lines if line.startswith(f"  {two.id} [two_faults]"))
    others = f"{other[0]} {other[1]} {other[2]:.2f}"
    assert f"credit_note for {two.customer_id} + others [{others}]; got awaiting_approval:" in failure
    assert failure.endswith("credit_note for C-0001 + others []")


# ---------- refusals ----------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-k", "0"], "-k must be at least 1, got 0"),
        (["-k", "two"], "-k must be a whole number, got 'two'"),
        (["--investigator", "oracle"], "unknown investigator 'oracle': use offline or llm"),
        (["--scenarios", "/no/such/dir"], "--scenarios /no/such/dir is not a directory"),
        (
            ["--languages", "es,xx"],
            "unknown language 'xx' for --languages: use en, zh, es, fr, de, pt, ja, ko, it, nl",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BILLSLEUTH_INVESTIGATOR", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli(["eval", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == f"billsleuth: error: {message}\n"


def test_llm_without_a_key_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli(["eval", "--investigator", "llm"])
    assert exit_info.value.code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_scenarios_for_an_empty_ledger_are_refused(db_url: str, tmp_path: Path) -> None:
    result = run_eval(db_url, tmp_path, "--scenarios", str(DEFAULT_SCENARIOS_DIR))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "the ledger at DATABASE_URL is empty" in result.stderr
    assert rows(db_url, "customers") == 0  # with --scenarios it does not seed


def test_a_malformed_scenario_file_is_named(seeded_db_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "S001.json").write_text(
        '{"id": "S001", "customer_id": "C-0001", "question": "?"}', encoding="utf-8"
    )
    result = run_eval(seeded_db_url, tmp_path, "--scenarios", str(broken))
    assert result.returncode == 2
    assert result.stderr == "billsleuth: error: S001.json: lacks truth\n"


def test_a_role_that_cannot_create_databases_gets_one_clear_line(
    seeded_db_url: str, pg_server_url: str, tmp_path: Path
) -> None:
    role = f"bs_no_createdb_{os.getpid()}"
    database = database_name(seeded_db_url)
    try:
        admin_execute(
            pg_server_url, f'DROP ROLE IF EXISTS "{role}"', f'CREATE ROLE "{role}" LOGIN NOCREATEDB'
        )
    except psycopg.Error as error:
        pytest.skip(f"cannot create a role on this server: {error}")
    try:
        with psycopg.connect(seeded_db_url, autocommit=True) as conn:
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        url = with_database(pg_server_url, database).replace("postgres:@", f"{role}:@", 1)
        if f"{role}:@" not in url:
            pytest.skip("the server URL carries credentials this test cannot swap")
        result = run_eval(url, tmp_path, "--json")
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1
        assert "refused to create" in result.stderr and "CREATEDB" in result.stderr
    finally:
        with psycopg.connect(seeded_db_url, autocommit=True) as conn:
            conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
        admin_execute(pg_server_url, f'DROP ROLE IF EXISTS "{role}"')


async def test_an_interrupted_eval_drops_its_scratch_databases(seeded_db_url: str, tmp_path: Path) -> None:
    """Ctrl-C while cases run on the scratch copy. The model never answers, so the eval is still mid-run
    whenever the signal comes (an offline eval could finish before a timed signal on a fast machine)."""
    env = {k: v for k, v in os.environ.items() if k != "BILLSLEUTH_INVESTIGATOR"}
    env.update(DATABASE_URL=seeded_db_url, BILLSLEUTH_HOME=str(tmp_path))
    before = fingerprint(seeded_db_url)
    async with OpenAIStub([Delay(600) for _ in range(SCENARIOS_PER_SEED)]) as stub:
        env.update(OPENAI_API_KEY=stub.api_key, OPENAI_BASE_URL=stub.base_url)
        process = subprocess.Popen(
            [str(BILLSLEUTH), "eval", "--investigator", "llm"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # A child started from a non-interactive shell may inherit SIGINT ignored; Ctrl-C must reach it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        prefix = f"bs_eval_{process.pid}_"
        try:
            deadline = time.monotonic() + 120
            while not stub.requests:  # a case under way on the copy, waiting for the model
                assert process.poll() is None and time.monotonic() < deadline, "eval never asked the model"
                await asyncio.sleep(0.1)
            assert any(name.startswith(prefix) for name in leftover_scratch_databases(seeded_db_url))
            process.send_signal(signal.SIGINT)
            _, err = await asyncio.to_thread(process.communicate, timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert err.endswith("billsleuth: error: interrupted\n")
    assert not [name for name in leftover_scratch_databases(seeded_db_url) if name.startswith(prefix)]
    assert fingerprint(seeded_db_url) == before


async def test_an_interrupted_run_waits_for_the_tasks_still_unwinding_their_cancellation() -> None:
    """LangGraph cancels a run's node tasks without waiting for them. An interrupted repetition waits for
    them before its service closes: left to asyncio.run's shutdown, they were cancelled a second time in the
    middle of psycopg's cancellation of their query (the test above then found a traceback after the
    one-line error, under load)."""
    unwound = asyncio.Event()

    async def node() -> None:
        try:
            await asyncio.sleep(600)  # the model, or a query
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)  # the query's cancellation, to the server and back
            unwound.set()
            raise

    running = asyncio.create_task(node())
    idle = asyncio.create_task(asyncio.sleep(600))  # nobody cancelled it (a pool worker): not waited for
    await asyncio.sleep(0)
    running.cancel()  # and not awaited, as LangGraph leaves it
    started = time.monotonic()
    await cancelled_tasks_finished()
    assert unwound.is_set() and running.done()
    assert time.monotonic() - started < 5 and not idle.done()
    idle.cancel()


async def test_eval_with_a_model_that_invents_numbers_counts_them_and_still_exits_0(
    seeded_db_url: str, tmp_path: Path
) -> None:
    """The llm investigator through the real SDK against a local stub whose "model" always claims 999.99:
    every case escalates as ungrounded, nothing is credited, and the scores say so with exit 0."""
    subset = tmp_path / "two"
    subset.mkdir()
    for name in ("S001.json", "S081.json"):  # one credit owed, one explain-only
        shutil.copy(DEFAULT_SCENARIOS_DIR / name, subset / name)
    invent = call(
        "submit_findings",
        root_cause="wrong_plan_price",
        invoice_ids=["INV-0001-05"],
        overcharge="999.99",
        expected_action="credit_note",
        reasoning="The plan price looks wrong.",
    )
    async with OpenAIStub([invent, invent]) as stub:
        env = {k: v for k, v in os.environ.items() if k != "BILLSLEUTH_INVESTIGATOR"}
        env.update(
            DATABASE_URL=seeded_db_url,
            BILLSLEUTH_HOME=str(tmp_path),
            OPENAI_API_KEY=stub.api_key,
            OPENAI_BASE_URL=stub.base_url,
        )
        done = await billsleuth_async(
            "eval", "--json", "--investigator", "llm", "--scenarios", str(subset), env=env
        )  # off this loop, which serves the stub
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["n"], report["investigator"], report["k"]) == (2, "llm", 1)
    assert len(stub.requests) == 2 and stub.remaining == 0
    metrics = report["metrics"]
    assert metrics["hallucinated_numbers"] == {"rate": 1.0, "n": 2, "ci95": [0.3424, 1.0]}
    assert metrics["root_cause"]["rate"] == 0.0 and metrics["pass_hat_k"] == {"1": 0.0}
    assert metrics["missed_credit"]["rate"] == 1.0 and metrics["false_credit"]["rate"] == 0.0
    assert [f["got"]["status"] for f in report["failures"]] == ["escalated", "escalated"]
    assert all("999.99" in f["escalation_reason"] for f in report["failures"])


def test_the_terminal_table_shows_the_stripe_sourced_rows_apart() -> None:
    from bot.cli.cmd_eval import render
    from scenarios.eval_metrics import answer_from_case, score
    from scenarios.evaluation import EvalReport, load_scenario, stripe_file
    from scenarios.stripe_kinds import stripe_dataset

    def run(scenario: ScenarioFile, case: dict[str, Any]) -> Run:
        answer = answer_from_case(case)
        return Run(scenario, 1, answer, score(scenario.truth, answer))

    first = load_scenario(DEFAULT_SCENARIOS_DIR / "S001.json")
    duplicate, right = (
        stripe_file(s) for s in stripe_dataset().scenarios if s.kind in ("duplicate_invoice", NO_ERROR)
    )
    explained = {
        "status": "explained",
        "customer_id": right.customer_id,
        "findings": {**right.truth.as_json(), "invoice_ids": [right.truth.invoice_id], "reasoning": ""},
        "credit_note": None,
        "escalation_reason": None,
        "other_findings": [],
    }
    report = EvalReport(
        "offline", 1, [first], [run(first, {"status": "needs_customer", "customer_id": None})]
    )
    report.stripe_scenarios = [duplicate, right]
    report.stripe_runs = [
        run(duplicate, {"status": "needs_customer", "customer_id": None}),
        run(right, explained),
    ]
    lines = render(report).splitlines()
    heading = lines.index("Stripe-sourced (1 of 2 passed; one customer per kind, source stripe):")
    assert [line.split() for line in lines[heading + 1 : heading + 3]] == [
        ["duplicate_invoice", "0", "1"],
        ["no_error", "1", "1"],
    ]
    assert lines[heading + 3] == "failures, Stripe-sourced (1):"
    assert lines[heading + 4].startswith(f"  {duplicate.id} [duplicate_invoice] expected duplicate_invoice")
    assert report.to_json()["stripe"]["by_variant"] == {
        "duplicate_invoice": {"n": 1, "passed": 0},
        "no_error": {"n": 1, "passed": 1},
    }
