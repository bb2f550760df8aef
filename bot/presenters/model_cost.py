"""The line a card carries about the model: who investigated when the model could not (the month's model
budget), and what the model's calls for the case cost (DESIGN §3: a model-backed case carries model_cost)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from agent.model.costs import usd_display


def model_line(investigator_note: str | None, model_cost: Mapping[str, Any] | None) -> str:
    """ "Investigated by the offline auditor: … · Model: 3,000 in / 300 out tokens, $0.0060"; "" for none."""
    parts = [investigator_note] if investigator_note else []
    if model_cost:
        cost = model_cost.get("cost")
        parts.append(
            f"Model: {model_cost['input_tokens']:,} in / {model_cost['output_tokens']:,} out tokens, "
            f"{usd_display(None if cost is None else Decimal(cost))}"
        )
    return " · ".join(parts)
