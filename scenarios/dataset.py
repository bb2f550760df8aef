"""The whole benchmark dataset for a seed: the first 100 scenarios (scenarios/generator.py), then the extra
kinds (scenarios/extra_kinds.py: S101 on, customers C-0101 on), and the files they are written to.

    python -m scenarios.dataset [DIR]    # rewrite the committed default files (or DIR) without a database
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from scenarios.extra_kinds import extra_scenarios
from scenarios.generator import DEFAULT_SCENARIOS_DIR, DEFAULT_SEED, Scenario, base_scenarios, scenario_json


def generate(seed: int = DEFAULT_SEED) -> list[Scenario]:
    """The whole dataset for a seed: the first 100, then the extra kinds."""
    return base_scenarios(seed) + extra_scenarios(seed)


def write_scenario_files(directory: Path, scenarios: Iterable[Scenario]) -> list[Path]:
    """Replace the S*.json files in a directory with these scenarios' files."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("S*.json"):
        stale.unlink()
    written = []
    for scenario in scenarios:
        path = directory / f"{scenario.id}.json"
        path.write_text(scenario_json(scenario), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else DEFAULT_SCENARIOS_DIR
    written = write_scenario_files(directory, generate(DEFAULT_SEED))
    print(f"wrote {len(written)} scenario files (seed {DEFAULT_SEED}) to {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
