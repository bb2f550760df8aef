"""The evaluation: open a case for every scenario, score its verified answer against the ground truth.

It reads the ledger at DATABASE_URL as it stands and never changes it: the cases run on a scratch copy of
that ledger (scenarios/eval_scratch.py), and each of the k repetitions starts from an untouched clone of
the copy. The one exception is a database with no ledger at all when no scenario directory was given:
then the default dataset is seeded into it first (DESIGN §3), matching the committed scenario files.

Cases run concurrently (asyncio, a bounded number at a time); the investigation is the real graph, the
same CaseService the CLI and the bot use, with requester "eval". A scenario whose question names its
customer instead of numbering it (`customer_named_by`) is opened as `billsleuth case open "" …` opens
one: the customer is found from the words, and a wrong, ambiguous or missing customer fails the run.

The dataset's own evaluation (no scenario directory given) also scores one Stripe-sourced row per fault
kind that has a meaning on Stripe, and one whose bill is right (scenarios.stripe_kinds): that account's
objects are mapped by `stripe sync`'s own code from memory and imported into the scratch copy with source
"stripe", and their cases run beside the others; they are reported apart (`stripe` in the JSON), so the
dataset's figures stay what they were.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from agent.cases.customers import find_customer
from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
from agent.language import Language, detect, warm_up_beside
from approvals.config import ApprovalSettings
from engine import schema
from engine.db import create_engine, home
from scenarios.eval_metrics import (
    Answer,
    OtherFinding,
    Score,
    Truth,
    answer_from_case,
    count,
    error_answer,
    pass_hat_k,
    rate,
    score,
)
from scenarios.eval_scratch import ScratchServer
from scenarios.generator import DEFAULT_SCENARIOS_DIR, DEFAULT_SEED
from scenarios.languages import in_language
from scenarios.stripe_kinds import StripeScenario, import_dataset, stripe_dataset

CONCURRENT_CASES = 8
# How long an interrupted run waits for its cancelled tasks to unwind (psycopg gives a query's
# cancellation 5 s) before asyncio.run's shutdown cancels whatever is left.
UNWIND_SECONDS = 10.0
REQUESTER = "eval"
NAMED_BY = ("name", "email")
Progress = Callable[[str], None]


class EvalInputError(ValueError):
    """Bad input to the evaluation (a missing directory, a malformed scenario file, k < 1, …)."""


class SeveralCustomers(LookupError):
    """The question could mean several customers: no case is opened (as the CLI opens none)."""


@dataclass(frozen=True)
class ScenarioFile:
    id: str
    customer_id: str
    question: str
    truth: Truth
    named_by: str | None = None  # "name" or "email": open without an id, find the customer from the words


@dataclass(frozen=True)
class Run:
    scenario: ScenarioFile
    repetition: int  # 1-based
    answer: Answer
    score: Score
    replied_in: Language | None = None  # the language of the case's reply to the customer, if it has one


@dataclass
class EvalReport:
    investigator: str
    k: int
    scenarios: list[ScenarioFile]
    runs: list[Run]
    seeded_default: bool = False
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    # `eval --languages`: per language, one run of every scenario with its complaint said in it.
    by_language: dict[Language, list[Run]] = field(default_factory=dict)
    # The Stripe-sourced rows (the dataset's own evaluation only), scored apart.
    stripe_scenarios: list[ScenarioFile] = field(default_factory=list)
    stripe_runs: list[Run] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """DESIGN's `eval --json` shape; with --languages, also `languages` (see language_metrics); with the
        Stripe-sourced rows, also `stripe`: `{n, metrics, by_variant, failures}` over them alone."""
        data = {
            "n": len(self.scenarios),
            "investigator": self.investigator,
            "k": self.k,
            "metrics": metrics(self.runs, self.scenarios, self.k),
            "by_variant": by_variant(self.runs),
            "failures": failures(self.runs),
        }
        if self.stripe_scenarios:
            data["stripe"] = {
                "n": len(self.stripe_scenarios),
                "metrics": metrics(self.stripe_runs, self.stripe_scenarios, self.k),
                "by_variant": by_variant(self.stripe_runs),
                "failures": failures(self.stripe_runs),
            }
        if self.by_language:
            data["languages"] = {
                language: language_metrics(language, runs) for language, runs in self.by_language.items()
            }
        return data


# ---------- scenario files ----------


def default_scenarios_dir() -> Path:
    """$BILLSLEUTH_HOME/scenarios when `billsleuth seed` wrote files there, else the committed default."""
    local = home() / "scenarios"
    return local if any(local.glob("S*.json")) else DEFAULT_SCENARIOS_DIR


def _truth(path: Path, raw: Any, customer_id: str) -> Truth:
    if not isinstance(raw, dict):
        raise EvalInputError(f"{path.name}: truth must be an object")
    missing = [
        k for k in ("root_cause", "variant", "invoice_ids", "overcharge", "expected_action") if k not in raw
    ]
    if missing:
        raise EvalInputError(f"{path.name}: truth lacks {', '.join(missing)}")
    invoice_ids = raw["invoice_ids"]
    if not isinstance(invoice_ids, list) or not invoice_ids:
        raise EvalInputError(f"{path.name}: truth.invoice_ids must name at least one invoice")
    return Truth(
        root_cause=str(raw["root_cause"]),
        variant=str(raw["variant"]),
        invoice_id=str(invoice_ids[0]),
        overcharge=_amount(path, "truth.overcharge", raw["overcharge"]),
        expected_action=str(raw["expected_action"]),
        customer_id=customer_id,
        other_findings=_other_findings(path, raw["other_findings"]) if "other_findings" in raw else None,
    )


def _amount(path: Path, where: str, text: Any) -> Decimal:
    if not isinstance(text, str):
        raise EvalInputError(f'{path.name}: {where} must be a money string like "26.02"')
    try:
        return Decimal(text)
    except InvalidOperation:
        raise EvalInputError(f"{path.name}: {where} {text!r} is not an amount") from None


def _other_findings(path: Path, raw: Any) -> frozenset[OtherFinding]:
    where = "truth.other_findings"
    if not isinstance(raw, list):
        raise EvalInputError(f"{path.name}: {where} must be a list")
    found: set[OtherFinding] = set()
    for entry in raw:
        if not isinstance(entry, dict) or not {"invoice_id", "root_cause", "overcharge"} <= set(entry):
            raise EvalInputError(f"{path.name}: {where} entries need invoice_id, root_cause and overcharge")
        overcharge = _amount(path, f"{where} overcharge", entry["overcharge"])
        found.add((str(entry["invoice_id"]), str(entry["root_cause"]), overcharge))
    return frozenset(found)


def load_scenario(path: Path) -> ScenarioFile:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise EvalInputError(f"{path.name}: cannot read it as JSON ({error})") from None
    if not isinstance(raw, dict):
        raise EvalInputError(f"{path.name}: a scenario file holds one JSON object")
    missing = [k for k in ("id", "customer_id", "question", "truth") if k not in raw]
    if missing:
        raise EvalInputError(f"{path.name}: lacks {', '.join(missing)}")
    named_by = raw.get("customer_named_by")
    if named_by is not None and named_by not in NAMED_BY:
        raise EvalInputError(f"{path.name}: customer_named_by must be name or email, got {named_by!r}")
    customer_id = str(raw["customer_id"])
    return ScenarioFile(
        str(raw["id"]), customer_id, str(raw["question"]), _truth(path, raw["truth"], customer_id), named_by
    )


def load_scenarios(directory: Path) -> list[ScenarioFile]:
    if not directory.is_dir():
        raise EvalInputError(f"scenario directory {directory} does not exist")
    paths = sorted(directory.glob("S*.json"))
    if not paths:
        raise EvalInputError(f"no scenario files (S*.json) in {directory}")
    scenarios = [load_scenario(path) for path in paths]
    seen: set[str] = set()
    for scenario in scenarios:
        if scenario.id in seen:
            raise EvalInputError(f"scenario id {scenario.id} appears twice in {directory}")
        seen.add(scenario.id)
    return scenarios


# ---------- aggregation ----------


def metrics(runs: list[Run], scenarios: list[ScenarioFile], k: int) -> dict[str, Any]:
    """Rates over all runs (every scenario × every repetition); the two credit rates over their kind only."""
    explain_only = [r for r in runs if r.scenario.truth.expected_action == "explain_only"]
    owed_credit = [r for r in runs if r.scenario.truth.expected_action == "credit_note"]
    passes: dict[str, list[bool]] = {s.id: [] for s in scenarios}
    for r in runs:
        passes[r.scenario.id].append(r.score.passed)
    return {
        "root_cause": rate(*count(r.score.root_cause for r in runs)),
        "invoice": rate(*count(r.score.invoice for r in runs)),
        "overcharge": rate(*count(r.score.overcharge for r in runs)),
        "action": rate(*count(r.score.action for r in runs)),
        "false_credit": rate(*count(r.score.judged_credit for r in explain_only)),
        "missed_credit": rate(*count(not r.score.judged_credit for r in owed_credit)),
        "hallucinated_numbers": rate(*count(r.score.hallucinated for r in runs)),
        "pass_hat_k": pass_hat_k(list(passes.values()), k),
    }


def language_metrics(language: Language, runs: list[Run]) -> dict[str, Any]:
    """One language's run: `{n, metrics{…the usual…, reply_language}, failures[…]}`. `reply_language` is
    over the cases that drafted a reply for the customer: it is in the language the complaint was in."""
    replied = [r for r in runs if r.replied_in is not None]
    return {
        "n": len(runs),
        "metrics": {
            **metrics(runs, [r.scenario for r in runs], 1),
            "reply_language": rate(*count(r.replied_in == language for r in replied)),
        },
        "failures": failures(runs),
    }


def by_variant(runs: list[Run]) -> dict[str, dict[str, int]]:
    """{variant: {n, passed}} on the first repetition, variants in alphabetical order."""
    table: dict[str, dict[str, int]] = {}
    for r in runs:
        if r.repetition != 1:
            continue
        row = table.setdefault(r.scenario.truth.variant, {"n": 0, "passed": 0})
        row["n"] += 1
        row["passed"] += int(r.score.passed)
    return dict(sorted(table.items()))


def failures(runs: list[Run]) -> list[dict[str, Any]]:
    return [
        {
            "scenario": r.scenario.id,
            "variant": r.scenario.truth.variant,
            "repetition": r.repetition,
            "expected": r.scenario.truth.as_json(),
            "got": r.answer.as_json(),
            "escalation_reason": r.answer.escalation_reason,
        }
        for r in sorted(runs, key=lambda r: (r.scenario.id, r.repetition))
        if not r.score.passed
    ]


# ---------- running ----------


async def ledger_customers(libpq_url: str) -> int:
    engine = create_engine(libpq_url)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(select(func.count()).select_from(schema.customers))).scalar_one()
    finally:
        await engine.dispose()


async def run_repetition(
    libpq_url: str,
    scenarios: list[ScenarioFile],
    repetition: int,
    configuration: Configuration,
    approval_settings: ApprovalSettings,
    concurrency: int = CONCURRENT_CASES,
) -> list[Run]:
    """Open one case per scenario on this (scratch) database, at most `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    async with case_service(libpq_url, configuration, approval_settings) as service:

        async def one(scenario: ScenarioFile) -> Run:
            replied_in: Language | None = None
            async with gate:
                try:
                    case = await open_case_for(service, scenario)
                    answer = answer_from_case(case)
                    replied_in = reply_language(case)
                except Exception as error:  # one broken case is a failed run, not a failed evaluation
                    answer = error_answer(f"{type(error).__name__}: {error}")
            return Run(scenario, repetition, answer, score(scenario.truth, answer), replied_in)

        try:
            return list(await asyncio.gather(*(one(s) for s in scenarios)))
        finally:  # before the service closes the engine and the checkpointer pool they use
            await cancelled_tasks_finished()


async def cancelled_tasks_finished(within: float = UNWIND_SECONDS) -> None:
    """Wait (at most `within` seconds) for the tasks still unwinding from a cancellation.

    Ctrl-C cancels the cases; LangGraph cancels a run's node and checkpoint tasks without waiting for
    them. Left to asyncio.run's shutdown, they are cancelled a second time, partway through psycopg's
    cancellation of their query: psycopg drops the connection mid-query, the pool finds it unreturned, and
    a generator left running prints "generator already executing" at exit, after the one-line error."""
    me = asyncio.current_task()
    deadline = time.monotonic() + within
    while unwinding := [t for t in asyncio.all_tasks() if t is not me and t.cancelling() and not t.done()]:
        left = deadline - time.monotonic()
        if left <= 0:
            return  # asyncio.run's shutdown cancels what is left
        await asyncio.wait(unwinding, timeout=left)


def reply_language(case: dict[str, Any]) -> Language | None:
    message = (case.get("reply") or {}).get("customer_message")
    return detect(message).language if message else None


async def open_case_for(service: CaseService, scenario: ScenarioFile) -> dict[str, Any]:
    """The scenario's case JSON. Numbered: opened for its customer. Named: opened as `case open ""`
    opens one — one customer the words fit is investigated, several open nothing, none opens a case
    without a customer (which asks for one)."""
    if scenario.named_by is None:
        return await service.open_case(
            scenario.question, requester=REQUESTER, customer_id=scenario.customer_id
        )
    match = await find_customer(service.engine, scenario.question)
    if match.customer is None and match.candidates:
        named = ", ".join(c.id for c in match.candidates)
        raise SeveralCustomers(f"the message could mean several customers: {named}")
    return await service.open_case(
        scenario.question,
        requester=REQUESTER,
        customer_id=match.customer.id if match.customer else None,
        found_by=match.found_by if match.customer else None,
    )


def _all_errored(runs: list[Run]) -> bool:
    return bool(runs) and all(r.answer.status == "error" for r in runs)


def evaluate(
    source_url: str,
    *,
    scenarios_dir: Path | None = None,
    configuration: Configuration,
    k: int = 1,
    approval_settings: ApprovalSettings | None = None,
    concurrency: int = CONCURRENT_CASES,
    progress: Progress | None = None,
    languages: tuple[Language, ...] = (),
) -> EvalReport:
    """Run the evaluation against the ledger at source_url without changing it (see the module doc).
    `languages`: after the usual run, one more per language, each from its own untouched clone, with every
    complaint said in that language (scenarios/languages.py)."""
    if k < 1:
        raise EvalInputError(f"-k must be at least 1, got {k}")
    say = progress or (lambda _message: None)
    started = time.monotonic()
    warm_up_beside()  # the language model loads while the scratch ledger is copied, not in the first case
    seeded, with_stripe = False, scenarios_dir is None
    if scenarios_dir is None:
        if asyncio.run(ledger_customers(source_url)) == 0:
            from scenarios.seed import seed_database

            asyncio.run(seed_database(source_url, DEFAULT_SEED))
            seeded = True
            say(f"the ledger was empty: seeded the default dataset (seed {DEFAULT_SEED}) into it first")
            scenarios_dir = DEFAULT_SCENARIOS_DIR
        else:
            scenarios_dir = default_scenarios_dir()
    elif asyncio.run(ledger_customers(source_url)) == 0:
        raise EvalInputError(
            f"the ledger at DATABASE_URL is empty: run `billsleuth seed` with the seed that wrote "
            f"{scenarios_dir} first"
        )
    scenarios = load_scenarios(scenarios_dir)
    settings = approval_settings or ApprovalSettings()
    report = EvalReport(configuration.investigator, k, scenarios, [], seeded_default=seeded)
    report.notes.append(f"scenarios from {scenarios_dir}")

    with ScratchServer(source_url) as scratch:
        base = scratch.copy_of_source()
        if with_stripe:
            report.stripe_scenarios = asyncio.run(stripe_rows(base))
            report.notes.append(f"{len(report.stripe_scenarios)} Stripe-sourced rows")
        stripe_ids = {s.id for s in report.stripe_scenarios}
        for repetition in range(1, k + 1):
            # With one run the copy itself is used; with more, each starts from its own untouched clone.
            target = base if k == 1 and not languages else scratch.clone(base, f"r{repetition}")
            say(f"run {repetition} of {k}: {len(scenarios)} cases ({configuration.investigator})")
            everything = scenarios + report.stripe_scenarios
            both = asyncio.run(
                run_repetition(target, everything, repetition, configuration, settings, concurrency)
            )
            if target != base:
                scratch.drop(target)
            runs = [r for r in both if r.scenario.id not in stripe_ids]
            if _all_errored(runs):
                raise RuntimeError(
                    f"every case failed with an error, e.g. {runs[0].answer.escalation_reason}"
                )
            report.runs.extend(runs)
            report.stripe_runs.extend(r for r in both if r.scenario.id in stripe_ids)
        for language in languages:
            report.by_language[language] = _language_run(
                scratch, base, scenarios, language, configuration, settings, say
            )
    report.elapsed_s = time.monotonic() - started
    return report


async def stripe_rows(libpq_url: str) -> list[ScenarioFile]:
    """Import the Stripe account of one customer per kind into this (scratch) ledger; its scenarios."""
    dataset = stripe_dataset()
    await import_dataset(libpq_url, dataset, actor=REQUESTER)
    return [stripe_file(s) for s in dataset.scenarios]


def stripe_file(scenario: StripeScenario) -> ScenarioFile:
    truth = scenario.truth
    return ScenarioFile(
        scenario.id,
        scenario.customer_id,
        scenario.question,
        Truth(
            truth.root_cause,
            scenario.kind,
            truth.invoice_ids[0],
            truth.overcharge,
            truth.expected_action,
            scenario.customer_id,
            frozenset(),
        ),
    )


def _language_run(
    scratch: ScratchServer,
    base: str,
    scenarios: list[ScenarioFile],
    language: Language,
    configuration: Configuration,
    settings: ApprovalSettings,
    say: Progress,
) -> list[Run]:
    target = scratch.clone(base, f"lang_{language.lower()}")
    said = [in_language(s, language) for s in scenarios]
    say(f"in {language}: {len(said)} cases ({configuration.investigator})")
    try:
        return asyncio.run(run_repetition(target, said, 1, configuration, settings))
    finally:
        scratch.drop(target)
