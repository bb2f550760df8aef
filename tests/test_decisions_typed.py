"""Decisions typed (issue 26 item 4): one Decision enum, one resume payload whose dict keeps the shape
checkpoints already hold, and every refusal the bot shows named by a member of approvals' Rule."""

from __future__ import annotations

import ast
from pathlib import Path

from agent.graph.state import EXPIRED_RESUME, Resume
from approvals.models import Decision, Rule

BOT = Path(__file__).resolve().parent.parent / "bot"


def test_a_resume_dict_from_an_older_checkpoint_reads_back_unchanged() -> None:
    stored = {"approver": "U0ALICE", "decision": "request_changes", "comment": "which invoice?"}
    heard = Resume.from_dict(stored)
    assert heard == Resume("U0ALICE", Decision.REQUEST_CHANGES, "which invoice?")
    assert heard.to_dict() == stored
    assert Resume.from_dict({"approver": "system", "decision": "issued"}).comment == ""


def test_the_expire_resume_is_the_dict_older_processes_sent() -> None:
    assert EXPIRED_RESUME.to_dict() == {"approver": "system", "decision": "expire", "comment": ""}


def test_the_decision_values_are_the_ones_votes_are_stored_with() -> None:
    assert [d.value for d in Decision] == ["approve", "reject", "request_changes", "cancel"]


def _refusal_rules(path: Path) -> list[str]:
    """The source of each `refusal(...)` call's first argument in one module."""
    tree = ast.parse(path.read_text())
    return [
        ast.unparse(call.args[0])
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "refusal" and call.args
    ]


def test_every_refusal_the_bot_shows_names_a_rule_member() -> None:
    rules = [(path.name, rule) for path in sorted(BOT.rglob("*.py")) for rule in _refusal_rules(path)]
    assert len(rules) >= 10  # the walk found the flows' refusals
    for module, rule in rules:
        named = rule.startswith("Rule.") and rule.removeprefix("Rule.") in Rule.__members__
        assert named or rule in ("refused.rule", "*why"), f"{module}: refusal({rule}, …) is not a Rule"


def test_no_two_rules_share_a_value() -> None:
    # An alias (a second name for one value) reads as two rules; iterating an enum skips aliases.
    aliases = sorted(set(Rule.__members__) - {rule.name for rule in Rule})
    assert aliases == []
