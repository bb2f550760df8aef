"""billsleuth eval [--scenarios DIR] [--investigator offline|llm] [-k N] [--languages [CODES]] [--json]

Runs the agent on every scenario and scores it against the ground truth. The ledger at DATABASE_URL is
read as it stands and never changed (the cases run on scratch copies). Exit 0 whenever it could run,
whatever the scores; bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli.common import CommandError, print_json

if TYPE_CHECKING:
    from scenarios.evaluation import EvalReport

INVESTIGATORS = ("offline", "llm")
METRIC_LABELS = {
    "root_cause": "root cause",
    "invoice": "invoice",
    "overcharge": "overcharge (to the cent)",
    "action": "action",
    "false_credit": "false credit (explain-only)",
    "missed_credit": "missed credit (credit owed)",
    "hallucinated_numbers": "hallucinated numbers",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "eval",
        help="score the agent on the scenarios' ground truth (never changes the ledger)",
        description="Open a case for every scenario on a scratch copy of the ledger at DATABASE_URL and "
        "score root cause, invoice, overcharge and action against the ground truth, with Wilson 95%% "
        "intervals and pass^k. On a database with no ledger and no --scenarios, the default dataset is "
        "seeded first.",
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        metavar="DIR",
        help="the S*.json files (default: $BILLSLEUTH_HOME/scenarios if it has any, else the committed set)",
    )
    # Validated in run() rather than by argparse, so a wrong value is one line, not usage plus error.
    parser.add_argument(
        "--investigator",
        default=None,
        metavar="offline|llm",
        help="who investigates (default: BILLSLEUTH_INVESTIGATOR; llm with OPENAI_API_KEY, else offline)",
    )
    parser.add_argument("-k", default="1", metavar="N", help="runs per scenario, for pass^k (default 1)")
    parser.add_argument(
        "--languages",
        nargs="?",
        const="all",
        default=None,
        metavar="CODES",
        help="then run every scenario once more in each language, its complaint said in it, and report "
        "each language's metrics and how many replies were in it (all ten, or e.g. es,fr)",
    )
    parser.add_argument("--json", action="store_true", help="print {n, investigator, k, metrics, ...}")
    parser.set_defaults(handler=run)


def _languages(text: str | None) -> tuple[Any, ...]:
    from agent.language import LANGUAGES

    if text is None:
        return ()
    if text == "all":
        return LANGUAGES
    asked = tuple(code.strip() for code in text.split(",") if code.strip())
    unknown = [code for code in asked if code not in LANGUAGES]
    if unknown or not asked:
        raise CommandError(
            f"unknown language {(unknown or [text])[0]!r} for --languages: use {', '.join(LANGUAGES)}"
        )
    return tuple(dict.fromkeys(asked))


def _repetitions(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise CommandError(f"-k must be a whole number, got {text!r}") from None
    if k < 1:
        raise CommandError(f"-k must be at least 1, got {k}")
    return k


def _configuration(investigator: str | None) -> Any:
    from agent.graph.configuration import Configuration, ConfigurationError

    if investigator is not None and investigator not in INVESTIGATORS:
        raise CommandError(f"unknown investigator {investigator!r}: use offline or llm")
    try:
        return Configuration.from_env(investigator=investigator)  # the flag outranks the environment
    except ConfigurationError as error:
        raise CommandError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    k = _repetitions(args.k)
    languages = _languages(args.languages)
    scenarios_dir: Path | None = args.scenarios
    if scenarios_dir is not None and not scenarios_dir.is_dir():
        raise CommandError(f"--scenarios {scenarios_dir} is not a directory")
    configuration = _configuration(args.investigator)

    from approvals.config import ApprovalSettings, SettingsError
    from bot.cli.common import ready_owner_database
    from scenarios.eval_scratch import ScratchRefused
    from scenarios.evaluation import EvalInputError, evaluate

    try:
        settings = ApprovalSettings.from_env()
    except SettingsError as error:
        raise CommandError(str(error)) from None
    url = ready_owner_database(None)  # its scratch copies are the owner's work
    _unwind_on_sigterm()
    try:
        report = evaluate(
            url,
            scenarios_dir=scenarios_dir,
            configuration=configuration,
            k=k,
            approval_settings=settings,
            progress=_progress,
            languages=languages,
        )
    except EvalInputError as error:
        raise CommandError(str(error)) from None
    except ScratchRefused as error:
        raise CommandError(str(error), exit_code=1) from None
    except RuntimeError as error:
        raise CommandError(str(error), exit_code=1) from None
    if args.json:
        print_json(report.to_json())
    else:
        print(render(report))
    return 0


def _unwind_on_sigterm() -> None:
    """A terminated eval still drops its scratch databases: SIGTERM unwinds like Ctrl-C (exit 143)."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------- the terminal table ----------


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def render(report: EvalReport) -> str:
    data = report.to_json()
    runs = "run" if data["k"] == 1 else "runs"
    lines = [
        f"BillSleuth eval: {data['n']} scenarios × {data['k']} {runs}, investigator {data['investigator']} "
        f"({report.elapsed_s:.1f} s; {'; '.join(report.notes)})",
        "",
        f"{'metric':<30} {'rate':>7}  {'95% CI':<17} {'n':>5}",
    ]
    for key, label in METRIC_LABELS.items():
        m = data["metrics"][key]
        lo, hi = m["ci95"]
        ci = f"[{_percent(lo)}, {_percent(hi)}]"
        lines.append(f"{label:<30} {_percent(m['rate']):>7}  {ci:<17} {m['n']:>5}")
    for j, value in data["metrics"]["pass_hat_k"].items():
        lines.append(f"{'pass^' + j:<30} {_percent(value):>7}")
    lines += ["", f"{'variant':<30} {'passed':>7} {'n':>5}"]
    lines += _variant_rows(data["by_variant"])
    lines.append("")
    if not data["failures"]:
        lines.append("failures: none")
    else:
        lines.append(f"failures ({len(data['failures'])}):")
        lines += [_failure_line(failure, data["k"]) for failure in data["failures"]]
    if "stripe" in data:
        lines += ["", *_stripe_rows(data["stripe"], data["k"])]
    if "languages" in data:
        lines += ["", *_language_rows(data["languages"])]
    return "\n".join(lines)


def _stripe_rows(block: dict[str, Any], k: int) -> list[str]:
    """The Stripe-sourced rows: one customer per kind, imported from Stripe's objects (scored apart)."""
    passed = sum(row["passed"] for row in block["by_variant"].values())
    rows = [f"Stripe-sourced ({passed} of {block['n']} passed; one customer per kind, source stripe):"]
    rows += [f"  {line}" for line in _variant_rows(block["by_variant"])]
    if block["failures"]:
        rows += [f"failures, Stripe-sourced ({len(block['failures'])}):"]
        rows += [_failure_line(failure, k) for failure in block["failures"]]
    return rows


LANGUAGE_COLUMNS = {
    "root_cause": "cause",
    "invoice": "invoice",
    "overcharge": "amount",
    "action": "action",
    "false_credit": "false cr",
    "missed_credit": "missed cr",
    "hallucinated_numbers": "halluc.",
    "reply_language": "reply lang",
}


def _language_rows(languages: dict[str, Any]) -> list[str]:
    """One row per language: the usual rates, pass^1, and the share of replies in the complaint's language;
    then each language's failures."""
    header = f"{'language':<9} {'n':>4} " + " ".join(f"{label:>10}" for label in LANGUAGE_COLUMNS.values())
    rows = [
        "by language (each scenario once, its complaint said in that language):",
        header + f" {'pass^1':>7}",
    ]
    failed: list[str] = []
    for language, block in languages.items():
        rates = block["metrics"]
        cells = " ".join(f"{_percent(rates[key]['rate']):>10}" for key in LANGUAGE_COLUMNS)
        rows.append(f"{language:<9} {block['n']:>4} {cells} {_percent(rates['pass_hat_k']['1']):>7}")
        failed += [f"  [{language}]" + _failure_line(failure, 1)[1:] for failure in block["failures"]]
    return rows + (["", f"failures by language ({len(failed)}):", *failed] if failed else [])


def _variant_rows(by_variant: dict[str, dict[str, int]]) -> list[str]:
    """The first 100's variants, then the kinds beyond one complaint about one invoice under their own
    heading."""
    from scenarios.extra_kinds import EXTRA_VARIANTS

    def row(variant: str) -> str:
        counts = by_variant[variant]
        return f"{variant:<30} {counts['passed']:>7} {counts['n']:>5}"

    rows = [row(variant) for variant in by_variant if variant not in EXTRA_VARIANTS]
    extra = [row(variant) for variant in by_variant if variant in EXTRA_VARIANTS]
    return rows + (["beyond one complaint:", *extra] if extra else [])


def _failure_line(failure: dict[str, Any], k: int) -> str:
    expected, got = failure["expected"], failure["got"]
    which = f"{failure['scenario']}" + (f" run {failure['repetition']}" if k > 1 else "")
    fields = ("root_cause", "invoice_id", "overcharge", "expected_action")
    wanted = " ".join(str(expected[key]) for key in fields)
    found = " ".join(str(got[key]) for key in fields)
    if "customer_id" in expected and expected["customer_id"] != got.get("customer_id"):
        wanted += f" for {expected['customer_id']}"
        found += f" for {got.get('customer_id') or 'no customer'}"
    others = expected.get("other_findings"), got.get("other_findings")
    if None not in others and others[0] != others[1]:
        wanted += f" + others {_others(expected['other_findings'])}"
        found += f" + others {_others(got['other_findings'])}"
    line = f"  {which} [{failure['variant']}] expected {wanted}; got {got['status']}: {found}"
    if failure["escalation_reason"]:
        line += f" — {failure['escalation_reason']}"
    return line


def _others(found: list[dict[str, str]]) -> str:
    return "[" + ", ".join(f"{f['invoice_id']} {f['root_cause']} {f['overcharge']}" for f in found) + "]"
