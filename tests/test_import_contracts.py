"""Our own import-linter contract finds a circle, even one closed by an import inside a function and
crossing packages; and keeps a house without one (pyproject.toml runs it over ours in `make lint`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from tests.import_contracts import AcyclicModulesContract, find_cycles

PACKAGE = {
    "house/__init__.py": "",
    "house/kinds/__init__.py": "",
    "house/kinds/extra.py": "from house.base.generator import make\n",
    "house/base/__init__.py": "",
    "house/base/generator.py": (
        "def make():\n    return 1\n\n\n"
        "def generate():\n    from house.kinds.extra import make as m\n    return m()\n"
    ),
    "house/base/clean.py": "from house.base.generator import make\n",
}


@pytest.fixture
def house(tmp_path: Path) -> Iterator[str]:
    for name, text in PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield "house"
    finally:
        sys.path.remove(str(tmp_path))


def test_a_circle_closed_inside_a_function_across_packages_is_found(house: str) -> None:
    graph = grimp.build_graph(house, cache_dir=None)
    circle = ["house.base.generator", "house.kinds.extra", "house.base.generator"]
    assert find_cycles(graph, [house]) == [circle]
    check = AcyclicModulesContract("no circle", {}, {"packages": [house]}).check(graph, verbose=False)
    assert not check.kept
    (steps,) = check.metadata["cycles"]
    assert [(importer, imported) for importer, imported, _ in steps] == [
        ("house.base.generator", "house.kinds.extra"),
        ("house.kinds.extra", "house.base.generator"),
    ]
    assert "l.6: from house.kinds.extra import make as m" in steps[0][2]  # where the hidden import is


def test_without_the_circle_the_contract_is_kept(house: str, tmp_path: Path) -> None:
    (tmp_path / "house/base/generator.py").write_text("def make():\n    return 1\n", encoding="utf-8")
    graph = grimp.build_graph(house, cache_dir=None)
    assert find_cycles(graph, [house]) == []
    assert AcyclicModulesContract("no circle", {}, {"packages": [house]}).check(graph, verbose=False).kept
