"""`billsleuth audit` end to end: the console script's entry on a seeded database (DATABASE_URL)."""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent.auditor.run import audit_all
from engine.money import fmt
from scenarios.dataset import generate
from scenarios.extra_kinds import SCENARIOS_PER_SEED
from scenarios.generator import DEFAULT_SEED
from tests import cli
from tests.cli import Done

BILLSLEUTH = str(Path(sys.executable).with_name("billsleuth"))


def billsleuth(*args: str) -> Done:
    """The command in this process (tests/cli.py), with this process's environment."""
    return cli.billsleuth(*args)


def injected() -> set[tuple[str, str, str, str]]:
    """Every overcharge in the default dataset: each scenario's, and the others on a two-fault account."""
    found = set()
    for s in generate(DEFAULT_SEED):
        customer = s.ledger.customer.id
        if s.truth.root_cause != "no_error":
            found.add((customer, s.truth.invoice_ids[0], s.truth.root_cause, fmt(s.truth.overcharge)))
        for other in s.truth.other_findings or ():
            found.add((customer, other.invoice_id, other.root_cause, fmt(other.overcharge)))
    return found


def as_rows(output: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {(f["customer_id"], f["invoice_id"], f["root_cause"], f["overcharge"]) for f in output["findings"]}


def test_all_json_finds_every_injected_overcharge_and_nothing_else(seeded_db_url: str) -> None:
    done = billsleuth("audit", "--all", "--json")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) == {"as_of", "findings"}
    assert output["as_of"] == "2026-10-15"  # the latest invoice issue date in the ledger
    assert as_rows(output) == injected()
    for finding in output["findings"]:
        assert set(finding) == {
            "customer_id",
            "invoice_id",
            "root_cause",
            "overcharge",
            "currency",
            "evidence",
        }
        assert finding["currency"] == "USD"  # the seeded ledger is all USD; tests/test_currency.py mixes
        assert isinstance(finding["overcharge"], str) and Decimal(finding["overcharge"]) > 0
        assert finding["evidence"] and all(isinstance(e, str) for e in finding["evidence"])
        assert f"overcharge {finding['overcharge']}" in finding["evidence"][-1]


def test_one_customer(seeded_db_url: str) -> None:
    done = billsleuth("audit", "C-0011", "--json")
    assert done.returncode == 0, done.stderr
    [finding] = json.loads(done.stdout)["findings"]
    assert (finding["invoice_id"], finding["root_cause"], finding["overcharge"]) == (
        "INV-0011-03",
        "timezone_change_date",
        "26.02",
    )


def test_a_customer_whose_bill_is_right_has_no_findings(seeded_db_url: str) -> None:
    benign = next(s for s in generate(DEFAULT_SEED) if s.truth.root_cause == "no_error")
    done = billsleuth("audit", benign.ledger.customer.id, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"as_of": "2026-10-15", "findings": []}


def test_as_of_leaves_later_periods_unjudged(seeded_db_url: str) -> None:
    done = billsleuth("audit", "C-0011", "--json", "--as-of", "2026-07-31")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"as_of": "2026-07-31", "findings": []}  # INV-0011-03 is 2026-08-01


def test_unknown_customer_is_a_one_line_error_with_exit_2(seeded_db_url: str) -> None:
    done = billsleuth("audit", "C-9999", "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == ["billsleuth: error: no customer 'C-9999' in the ledger"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["C-0001", "--all"], "give either a CUSTOMER_ID or --all, not both"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--as-of", "2026-13-01"], "not a date (YYYY-MM-DD): '2026-13-01'"),
    ],
)
def test_bad_arguments_are_refused(seeded_db_url: str, args: list[str], message: str) -> None:
    done = billsleuth("audit", *args)
    assert done.returncode == 2
    assert message in done.stderr.strip().splitlines()[-1]


def test_the_table_is_readable_with_a_total_line(seeded_db_url: str) -> None:
    done = billsleuth("audit", "--all")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == f"audit as of 2026-10-15: {SCENARIOS_PER_SEED} customers"
    assert lines[2].split() == ["CUSTOMER", "INVOICE", "ROOT", "CAUSE", "OVERCHARGE"]
    assert "C-0011    INV-0011-03" in done.stdout and "timezone_change_date" in done.stdout
    expected_total = fmt(sum((Decimal(row[3]) for row in injected()), Decimal(0)))
    findings, customers = len(injected()), len({row[0] for row in injected()})
    assert lines[-2:] == [
        f"total: {findings} findings on {customers} customers",
        f"  USD: {findings} findings, overcharge {expected_total} USD",
    ]


def test_one_customer_table_shows_the_evidence(seeded_db_url: str) -> None:
    done = billsleuth("audit", "C-0011")
    assert done.returncode == 0, done.stderr
    assert "    - INV-0011-03 billed 1438.44; the rules give 1412.42" in done.stdout
    assert done.stdout.strip().splitlines()[-2:] == [
        "total: 1 finding on 1 customer",
        "  USD: 1 finding, overcharge 26.02 USD",
    ]


def test_an_empty_ledger_reports_nothing(db_url: str) -> None:
    done = billsleuth("audit", "--all", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []
    done = billsleuth("audit")
    assert done.stdout.strip().endswith(": 0 customers, no invoice paid beyond the rules")


def test_worker_processes_and_small_chunks_give_the_same_findings(seeded_db_url: str) -> None:
    alone = asyncio.run(audit_all(seeded_db_url, workers=1, chunk_size=7))
    pooled = asyncio.run(audit_all(seeded_db_url, workers=2, chunk_size=7))
    assert alone.customers == pooled.customers == SCENARIOS_PER_SEED
    assert [f.as_json() for f in alone.findings] == [f.as_json() for f in pooled.findings]
    assert {
        (f.customer_id, f.invoice_id, f.root_cause, fmt(f.overcharge)) for f in pooled.findings
    } == injected()
