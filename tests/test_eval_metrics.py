"""The evaluation's arithmetic and judging, against figures worked out by hand."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scenarios.eval_metrics import (
    Truth,
    answer_from_case,
    error_answer,
    pass_hat_k,
    rate,
    score,
    wilson_interval,
)
from scenarios.evaluation import (
    EvalInputError,
    Run,
    ScenarioFile,
    by_variant,
    failures,
    load_scenario,
    metrics,
)

# ---------- Wilson ----------


def test_wilson_with_no_observations_is_the_whole_unit_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert rate(0, 0) == {"rate": None, "n": 0, "ci95": [0.0, 1.0]}


def test_wilson_all_successes() -> None:
    # p = 1: the lower bound is n / (n + z²) = 10 / 13.8416, the upper bound is 1.
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.722460, abs=1e-6)
    assert hi == 1.0
    assert rate(10, 10) == {"rate": 1.0, "n": 10, "ci95": [0.7225, 1.0]}


def test_wilson_half() -> None:
    # p = 0.5, n = 10: centre 0.5, half-width 1.96·√(0.025 + 0.009604) / 1.38416 = 0.263410.
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.236590, abs=1e-6)
    assert hi == pytest.approx(0.763410, abs=1e-6)
    assert rate(5, 10)["ci95"] == [0.2366, 0.7634]


def test_wilson_none_and_the_textbook_95_of_100() -> None:
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.277540, abs=1e-6))
    assert rate(95, 100) == {"rate": 0.95, "n": 100, "ci95": [0.8882, 0.9785]}


def test_wilson_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(4, 3)


# ---------- pass^k ----------


def test_pass_hat_k_follows_tau_bench() -> None:
    # Three scenarios, three runs each, with 3, 2 and 0 passes:
    # pass^1 = (3/3 + 2/3 + 0) / 3, pass^2 = (1 + C(2,2)/C(3,2) + 0) / 3, pass^3 = (1 + 0 + 0) / 3.
    runs = [[True, True, True], [True, False, True], [False, False, False]]
    assert pass_hat_k(runs, 3) == {"1": 0.5556, "2": 0.4444, "3": 0.3333}


def test_pass_hat_k_needs_k_runs_per_scenario() -> None:
    with pytest.raises(ValueError):
        pass_hat_k([[True]], 2)
    assert pass_hat_k([[True], [False]], 1) == {"1": 0.5}


# ---------- judging one case ----------

CREDIT_TRUTH = Truth(
    "cancel_not_respected", "cancel_not_respected", "INV-0001-05", Decimal("174.90"), "credit_note"
)
EXPLAIN_TRUTH = Truth("no_error", "tax_line", "INV-0002-03", Decimal("0.00"), "explain_only")


def case(
    status: str,
    *,
    findings: dict[str, Any] | None = None,
    note: dict[str, Any] | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "case_id": "CASE-0001",
        "customer_id": "C-0001",
        "status": status,
        "findings": findings,
        "credit_note": note,
        "reply": None,
        "escalation_reason": reason,
    }


CREDIT_FINDINGS = {
    "root_cause": "cancel_not_respected",
    "invoice_ids": ["INV-0001-05"],
    "overcharge": "174.90",
    "expected_action": "credit_note",
    "reasoning": "…",
}


def test_a_drafted_credit_on_the_right_invoice_passes() -> None:
    note = {"id": "CN-0001", "invoice_id": "INV-0001-05", "amount": "174.90", "status": "draft"}
    result = score(
        CREDIT_TRUTH, answer_from_case(case("awaiting_approval", findings=CREDIT_FINDINGS, note=note))
    )
    assert result.passed and result.judged_credit and not result.hallucinated


def test_the_target_invoice_is_the_credit_notes_not_the_first_named() -> None:
    findings = {**CREDIT_FINDINGS, "invoice_ids": ["INV-0001-04", "INV-0001-05"]}
    note = {"id": "CN-0001", "invoice_id": "INV-0001-05", "amount": "174.90", "status": "draft"}
    assert score(
        CREDIT_TRUTH, answer_from_case(case("awaiting_approval", findings=findings, note=note))
    ).invoice
    note_elsewhere = {**note, "invoice_id": "INV-0001-04"}
    result = score(
        CREDIT_TRUTH, answer_from_case(case("awaiting_approval", findings=findings, note=note_elsewhere))
    )
    assert not result.invoice and not result.passed


def test_overcharge_must_match_to_the_cent() -> None:
    findings = {**CREDIT_FINDINGS, "overcharge": "174.91"}
    note = {"id": "CN-0001", "invoice_id": "INV-0001-05", "amount": "174.91", "status": "draft"}
    result = score(CREDIT_TRUTH, answer_from_case(case("awaiting_approval", findings=findings, note=note)))
    assert result.root_cause and result.invoice and result.action
    assert not result.overcharge and not result.passed


def test_a_case_escalated_before_verification_has_no_answer() -> None:
    reason = "the write-up states numbers the ledger does not support: 30"
    result = score(CREDIT_TRUTH, answer_from_case(case("escalated", reason=reason)))
    assert not any([result.root_cause, result.invoice, result.overcharge, result.action])
    assert not result.judged_credit  # nothing was drafted: counts as a missed credit
    assert result.hallucinated


def test_a_case_escalated_after_verification_is_scored_on_its_verified_findings() -> None:
    reason = (
        "the credit note could not be drafted (paid_total): credit 174.90 exceeds the 92.70 the customer paid"
    )
    result = score(CREDIT_TRUTH, answer_from_case(case("escalated", findings=CREDIT_FINDINGS, reason=reason)))
    assert result.passed and result.judged_credit and not result.hallucinated


def test_only_grounding_escalations_count_as_hallucinated_numbers() -> None:
    claimed = "the claimed overcharge 12.00 is not supported by the ledger (recomputed: INV-0001-05: 0.00)"
    assert score(CREDIT_TRUTH, answer_from_case(case("escalated", reason=claimed))).hallucinated
    invented = "the model claimed an overcharge of 12.00 on INV-0001-05, a number no tool it called returned"
    assert score(CREDIT_TRUTH, answer_from_case(case("escalated", reason=invented))).hallucinated
    refused = "the credit note could not be drafted (paid_total): credit exceeds what the customer paid"
    assert not score(CREDIT_TRUTH, answer_from_case(case("escalated", reason=refused))).hallucinated
    assert not score(CREDIT_TRUTH, error_answer("RuntimeError: boom")).hallucinated


def test_explain_only_answer_and_a_false_credit() -> None:
    findings = {
        "root_cause": "no_error",
        "invoice_ids": ["INV-0002-03"],
        "overcharge": "0.00",
        "expected_action": "explain_only",
        "reasoning": "…",
    }
    right = score(EXPLAIN_TRUTH, answer_from_case(case("explained", findings=findings)))
    assert right.passed and not right.judged_credit
    credited = {
        **findings,
        "root_cause": "wrong_tax_region",
        "overcharge": "3.00",
        "expected_action": "credit_note",
    }
    note = {"id": "CN-0002", "invoice_id": "INV-0002-03", "amount": "3.00", "status": "draft"}
    wrong = score(EXPLAIN_TRUTH, answer_from_case(case("awaiting_approval", findings=credited, note=note)))
    assert wrong.judged_credit and not wrong.passed and wrong.invoice


def test_a_case_that_needs_the_customer_scores_nothing() -> None:
    result = score(CREDIT_TRUTH, answer_from_case(case("needs_customer")))
    assert not result.passed and not result.judged_credit and not result.hallucinated


# ---------- aggregating runs ----------


def _run(
    scenario: ScenarioFile,
    repetition: int,
    status: str,
    findings: dict[str, Any] | None,
    note: dict[str, Any] | None = None,
) -> Run:
    answer = answer_from_case(case(status, findings=findings, note=note))
    return Run(scenario, repetition, answer, score(scenario.truth, answer))


def test_metrics_denominators_pass_hat_k_and_by_variant() -> None:
    credit = ScenarioFile("S001", "C-0001", "…", CREDIT_TRUTH)
    explain = ScenarioFile("S002", "C-0002", "…", EXPLAIN_TRUTH)
    note = {"id": "CN-0001", "invoice_id": "INV-0001-05", "amount": "174.90", "status": "draft"}
    explain_findings = {
        "root_cause": "no_error",
        "invoice_ids": ["INV-0002-03"],
        "overcharge": "0.00",
        "expected_action": "explain_only",
        "reasoning": "…",
    }
    runs = [
        _run(credit, 1, "awaiting_approval", CREDIT_FINDINGS, note),
        _run(credit, 2, "escalated", None),
        _run(explain, 1, "explained", explain_findings),
        _run(explain, 2, "explained", explain_findings),
    ]
    result = metrics(runs, [credit, explain], 2)
    assert result["root_cause"]["n"] == 4 and result["root_cause"]["rate"] == 0.75
    assert result["false_credit"] == {"rate": 0.0, "n": 2, "ci95": [0.0, round(wilson_interval(0, 2)[1], 4)]}
    assert result["missed_credit"]["n"] == 2 and result["missed_credit"]["rate"] == 0.5
    # pass^1 = (1/2 + 2/2) / 2; pass^2 = (C(1,2)/C(2,2) + 1) / 2 = 0.5.
    assert result["pass_hat_k"] == {"1": 0.75, "2": 0.5}
    assert by_variant(runs) == {
        "cancel_not_respected": {"n": 1, "passed": 1},
        "tax_line": {"n": 1, "passed": 1},
    }
    [failure] = failures(runs)
    assert failure["scenario"] == "S001" and failure["repetition"] == 2
    assert failure["expected"] == {
        "root_cause": "cancel_not_respected",
        "invoice_id": "INV-0001-05",
        "overcharge": "174.90",
        "expected_action": "credit_note",
    }
    assert failure["got"]["status"] == "escalated"


# ---------- the customer, and the account's other overcharges ----------

TWO_FAULT_TRUTH = Truth(
    "wrong_plan_price",
    "two_faults",
    "INV-0001-05",
    Decimal("35.70"),
    "credit_note",
    customer_id="C-0001",
    other_findings=frozenset({("INV-0001-04", "duplicate_charge", Decimal("174.90"))}),
)
TWO_FAULT_FINDINGS = {**CREDIT_FINDINGS, "root_cause": "wrong_plan_price", "overcharge": "35.70"}
TWO_FAULT_NOTE = {"id": "CN-0001", "invoice_id": "INV-0001-05", "amount": "35.70", "status": "draft"}


def two_fault_case(**extra: Any) -> dict[str, Any]:
    return case("awaiting_approval", findings=TWO_FAULT_FINDINGS, note=TWO_FAULT_NOTE) | extra


def test_other_findings_are_judged_only_where_the_case_lists_them() -> None:
    # An agent that does not report other_findings (no key) is judged on the rest alone.
    assert "other_findings" not in two_fault_case()
    assert score(TWO_FAULT_TRUTH, answer_from_case(two_fault_case())).passed
    listed = [{"invoice_id": "INV-0001-04", "root_cause": "duplicate_charge", "overcharge": "174.90"}]
    assert score(TWO_FAULT_TRUTH, answer_from_case(two_fault_case(other_findings=listed))).passed
    for wrong in (
        [],  # missed the second overcharge
        [{**listed[0], "overcharge": "174.00"}],
        [{**listed[0], "root_cause": "duplicate_invoice"}],
        [*listed, {"invoice_id": "INV-0001-03", "root_cause": "wrong_plan_price", "overcharge": "6.00"}],
        ["INV-0001-04"],  # not an entry at all
    ):
        result = score(TWO_FAULT_TRUTH, answer_from_case(two_fault_case(other_findings=wrong)))
        assert result.root_cause and result.invoice and result.overcharge and result.action
        assert not result.other_findings and not result.passed, wrong
    # A truth that says nothing of other overcharges (the first 100's files) never judges them.
    unsaid = case("awaiting_approval", findings=CREDIT_FINDINGS) | {"other_findings": listed}
    assert score(CREDIT_TRUTH, answer_from_case(unsaid)).other_findings


def test_a_case_about_another_customer_or_none_fails() -> None:
    assert score(TWO_FAULT_TRUTH, answer_from_case(two_fault_case())).customer
    elsewhere = score(TWO_FAULT_TRUTH, answer_from_case(two_fault_case(customer_id="C-0002")))
    assert elsewhere.invoice and not elsewhere.customer and not elsewhere.passed
    nobody = score(TWO_FAULT_TRUTH, answer_from_case(case("needs_customer") | {"customer_id": None}))
    assert not nobody.customer and not nobody.passed
    # A truth without a customer (a hand-made one) does not judge it.
    assert score(
        CREDIT_TRUTH,
        answer_from_case(case("awaiting_approval", findings=CREDIT_FINDINGS) | {"customer_id": "C-0099"}),
    ).customer


def test_a_failure_shows_the_customer_and_other_findings_expected_and_got() -> None:
    scenario = ScenarioFile("S106", "C-0001", "…", TWO_FAULT_TRUTH)
    answer = answer_from_case(two_fault_case(customer_id="C-0002", other_findings=[]))
    [failure] = failures([Run(scenario, 1, answer, score(TWO_FAULT_TRUTH, answer))])
    assert failure["expected"]["customer_id"] == "C-0001" and failure["got"]["customer_id"] == "C-0002"
    assert failure["expected"]["other_findings"] == [
        {"invoice_id": "INV-0001-04", "root_cause": "duplicate_charge", "overcharge": "174.90"}
    ]
    assert failure["got"]["other_findings"] == []


def test_scenario_files_with_the_new_keys_are_read_and_checked(tmp_path: Path) -> None:
    base = {
        "id": "S101",
        "customer_id": "C-0101",
        "question": "…",
        "truth": {
            "root_cause": "wrong_plan_price",
            "variant": "two_faults",
            "invoice_ids": ["INV-0101-06"],
            "overcharge": "35.70",
            "expected_action": "credit_note",
            "other_findings": [
                {"invoice_id": "INV-0101-05", "root_cause": "duplicate_charge", "overcharge": "89.25"}
            ],
        },
        "customer_named_by": "email",
    }
    path = tmp_path / "S101.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.named_by == "email" and scenario.truth.customer_id == "C-0101"
    assert scenario.truth.other_findings == {("INV-0101-05", "duplicate_charge", Decimal("89.25"))}
    for broken, message in (
        ({**base, "customer_named_by": "phone"}, "customer_named_by must be name or email, got 'phone'"),
        ({**base, "truth": {**base["truth"], "other_findings": {}}}, "truth.other_findings must be a list"),
        (
            {**base, "truth": {**base["truth"], "other_findings": [{"invoice_id": "INV-0101-05"}]}},
            "truth.other_findings entries need invoice_id, root_cause and overcharge",
        ),
    ):
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(EvalInputError) as refused:
            load_scenario(path)
        assert str(refused.value) == f"S101.json: {message}"
