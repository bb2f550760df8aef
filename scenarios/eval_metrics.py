"""Scoring one case against its ground truth, and the rates the evaluation reports. Pure: no I/O.

A run is one case opened for one scenario. It is judged on its *verified* answer only: the case JSON carries
findings only once they passed verification, so a case escalated before that (or one that could not be
investigated) has no answer and scores false on root cause, invoice, overcharge and action alike. A case
escalated after verification — e.g. drafting refused because the verified overcharge exceeds what was
paid on the invoice — keeps its verified answer and is scored on it.

Two more things decide whether a run passed, without a rate of their own (the JSON's metrics stay as they
are): the case is about the scenario's customer (it matters where the customer is named instead of
numbered and the case had to find it), and — where both the scenario's truth and the case JSON list them —
the account's other overcharges (`other_findings`) are exactly the truth's. A case JSON without the key
(an agent that does not report them) is not judged on them.

Every rate comes with a Wilson 95% interval, and pass^k follows τ-bench: for each scenario with c passes
out of n runs, C(c, k) / C(n, k), averaged over scenarios.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

Z_95 = 1.96
DIGITS = 4  # rates and bounds are reported to four decimals (0.01 percentage points)

# How the agent words an escalation for a number the ledger does not support: the LLM investigator refuses
# a submitted overcharge no tool returned, verify refuses a claimed overcharge no recomputation shows, and
# write-up refuses a message stating an unsupported number (agent/model/investigator.py, verify.py, graph.py).
UNGROUNDED_REASON = re.compile(
    r"not supported by the ledger|ledger does not support|a number no tool it called returned|ungrounded",
    re.IGNORECASE,
)


# One other overcharge on the account: (invoice_id, root_cause, overcharge).
OtherFinding = tuple[str, str, Decimal]


@dataclass(frozen=True)
class Truth:
    root_cause: str
    variant: str
    invoice_id: str  # the invoice the evidence names: truth.invoice_ids[0]
    overcharge: Decimal
    expected_action: str
    customer_id: str | None = None  # None: not judged
    other_findings: frozenset[OtherFinding] | None = None  # None: the scenario does not say

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "root_cause": self.root_cause,
            "invoice_id": self.invoice_id,
            "overcharge": f"{self.overcharge:.2f}",
            "expected_action": self.expected_action,
        }
        if self.customer_id is not None:
            data["customer_id"] = self.customer_id
        if self.other_findings is not None:
            data["other_findings"] = others_json(self.other_findings)
        return data


def others_json(found: frozenset[OtherFinding]) -> list[dict[str, str]]:
    return [
        {"invoice_id": invoice_id, "root_cause": cause, "overcharge": f"{overcharge:.2f}"}
        for invoice_id, cause, overcharge in sorted(found)
    ]


@dataclass(frozen=True)
class Answer:
    """What a case concluded, read from DESIGN's case JSON (findings are present only once verified)."""

    status: str
    root_cause: str | None
    invoice_id: str | None
    overcharge: Decimal | None
    expected_action: str | None
    credit_note_amount: str | None
    escalation_reason: str | None
    customer_id: str | None = None
    other_findings: frozenset[OtherFinding] | None = None  # None: the case JSON has no other_findings

    @property
    def verified(self) -> bool:
        return self.root_cause is not None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "root_cause": self.root_cause,
            "invoice_id": self.invoice_id,
            "overcharge": None if self.overcharge is None else f"{self.overcharge:.2f}",
            "expected_action": self.expected_action,
            "credit_note": self.credit_note_amount,
            "customer_id": self.customer_id,
        }
        if self.other_findings is not None:
            data["other_findings"] = others_json(self.other_findings)
        return data


def _money(text: object) -> Decimal | None:
    try:
        return Decimal(str(text)) if text is not None else None
    except InvalidOperation:
        return None


def answer_from_case(case: dict[str, Any]) -> Answer:
    """The target invoice is the credit note's for credit cases, else the first invoice the findings name."""
    findings = case.get("findings") or {}
    note = case.get("credit_note")
    invoice_ids = findings.get("invoice_ids") or []
    target = note["invoice_id"] if note else (invoice_ids[0] if invoice_ids else None)
    return Answer(
        status=str(case.get("status")),
        root_cause=findings.get("root_cause"),
        invoice_id=target,
        overcharge=_money(findings.get("overcharge")),
        expected_action=findings.get("expected_action"),
        credit_note_amount=note["amount"] if note else None,
        escalation_reason=case.get("escalation_reason"),
        customer_id=case.get("customer_id"),
        other_findings=_others(case["other_findings"]) if "other_findings" in case else None,
    )


def _others(listed: Any) -> frozenset[OtherFinding]:
    """The case's other_findings as comparable triples; an entry that is not one is kept as unmatched."""
    found: set[OtherFinding] = set()
    for entry in listed or []:
        overcharge = _money(entry.get("overcharge")) if isinstance(entry, dict) else None
        if overcharge is None:
            found.add((repr(entry), "", Decimal(-1)))  # never equal to a truth entry
            continue
        found.add((str(entry.get("invoice_id")), str(entry.get("root_cause")), overcharge))
    return frozenset(found)


def error_answer(message: str) -> Answer:
    """A case that raised instead of finishing: no answer, the error as the reason."""
    return Answer("error", None, None, None, None, None, message)


@dataclass(frozen=True)
class Score:
    root_cause: bool
    invoice: bool
    overcharge: bool
    action: bool
    judged_credit: bool  # the agent concluded a credit note is owed (a draft exists or was verified)
    hallucinated: bool  # escalated because a number was not supported by the ledger
    customer: bool = True  # the case is about the scenario's customer (or that is not judged)
    other_findings: bool = True  # the account's other overcharges match (or they are not judged)

    @property
    def passed(self) -> bool:
        answered = self.root_cause and self.invoice and self.overcharge and self.action
        return answered and self.customer and self.other_findings


def score(truth: Truth, answer: Answer) -> Score:
    verified = answer.verified
    return Score(
        root_cause=verified and answer.root_cause == truth.root_cause,
        invoice=verified and answer.invoice_id == truth.invoice_id,
        overcharge=verified and answer.overcharge == truth.overcharge,
        action=verified and answer.expected_action == truth.expected_action,
        judged_credit=answer.credit_note_amount is not None
        or (verified and answer.expected_action == "credit_note"),
        hallucinated=answer.status == "escalated"
        and bool(UNGROUNDED_REASON.search(answer.escalation_reason or "")),
        customer=truth.customer_id is None or answer.customer_id == truth.customer_id,
        other_findings=truth.other_findings is None
        or answer.other_findings is None
        or answer.other_findings == truth.other_findings,
    )


# ---------- rates ----------


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; [0, 1] when there is nothing to go on."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate(successes: int, n: int) -> dict[str, Any]:
    """DESIGN's rate shape: {rate, n, ci95: [lo, hi]}; rate is null when the denominator is empty."""
    lo, hi = wilson_interval(successes, n)
    return {
        "rate": round(successes / n, DIGITS) if n else None,
        "n": n,
        "ci95": [round(lo, DIGITS), round(hi, DIGITS)],
    }


def pass_hat_k(passes_per_scenario: Sequence[Sequence[bool]], k: int) -> dict[str, float]:
    """τ-bench's pass^j for j = 1 … k: mean over scenarios of C(c, j) / C(n, j), c passes out of n runs."""
    if not passes_per_scenario:
        return {str(j): 0.0 for j in range(1, k + 1)}
    result: dict[str, float] = {}
    for j in range(1, k + 1):
        total = 0.0
        for runs in passes_per_scenario:
            n, c = len(runs), sum(runs)
            if n < j:
                raise ValueError(f"pass^{j} needs at least {j} runs per scenario, one has {n}")
            total += math.comb(c, j) / math.comb(n, j)
        result[str(j)] = round(total / len(passes_per_scenario), DIGITS)
    return result


def count(flags: Iterable[bool]) -> tuple[int, int]:
    """(how many are true, how many there are)."""
    values = list(flags)
    return sum(values), len(values)
