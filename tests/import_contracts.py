"""An import-linter contract type of our own: no module imports itself back through others, anywhere.

import-linter's `acyclic_siblings` looks at siblings (bot.flows against bot.cards); a circle between two
modules of different packages, or one hidden in a function-local import, is the one this finds. grimp's
graph counts imports inside functions too, so a lazy import cannot hide a circle. Registered in
pyproject.toml (`contract_types`); lint-imports puts the working directory on sys.path, so it is found
there without being shipped in the package.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from itertools import pairwise

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicModulesContract(Contract):
    """`packages`: the packages whose modules (the packages themselves included) may import each other in
    no circle. A circle may pass through any of them, whichever package each module is in."""

    type_name = "acyclic_modules"

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        cycles = find_cycles(graph, self.packages)  # type: ignore[arg-type]
        details = [[_step(graph, a, b) for a, b in pairwise(cycle)] for cycle in cycles]
        return ContractCheck(kept=not cycles, metadata={"cycles": details})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for steps in check.metadata["cycles"]:
            output.print_error(f"{steps[0][0]} imports itself back:", bold=True)
            for importer, imported, where in steps:
                output.print_error(f"  {importer} -> {imported} ({where})", bold=False)
            output.new_line()


def find_cycles(graph: grimp.ImportGraph, packages: Iterable[str]) -> list[list[str]]:
    """One circle for each group of modules that import each other round (a strongly connected component
    of more than one module), as the modules in import order, the first repeated at the end."""
    ours = {m for p in packages for m in (p, *graph.find_descendants(p))}
    imports = {m: sorted(graph.find_modules_directly_imported_by(m) & ours) for m in sorted(ours)}
    return [_circle_through(min(group), imports, group) for group in _components(imports) if len(group) > 1]


def _components(imports: Mapping[str, list[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (the house is deeper than Python's stack)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in imports:
        if root in index:
            continue
        work = [(root, iter(imports[root]))]
        index[root] = lowest[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, onward = work[-1]
            following = next(onward, None)
            if following is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowest[parent] = min(lowest[parent], lowest[module])
                if lowest[module] == index[module]:
                    group: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == module:
                            break
                    found.append(group)
            elif following not in index:
                index[following] = lowest[following] = len(index)
                stack.append(following)
                on_stack.add(following)
                work.append((following, iter(imports[following])))
            elif following in on_stack:
                lowest[module] = min(lowest[module], index[following])
    return found


def _circle_through(start: str, imports: Mapping[str, list[str]], group: set[str]) -> list[str]:
    """The shortest way from `start` back to itself inside its group (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for following in imports[module]:
            if following not in group:
                continue
            if following == start:
                back = [module]
                while back[-1] != start:
                    back.append(came_from[back[-1]])
                return [*reversed(back), start]
            if following not in came_from:
                came_from[following] = module
                queue.append(following)
    raise AssertionError(f"{start} is in a group it cannot get back from")  # Tarjan's groups are circles


def _step(graph: grimp.ImportGraph, importer: str, imported: str) -> tuple[str, str, str]:
    """One import of the circle, with where it is written (a function-local one shows by its indent)."""
    lines = graph.get_import_details(importer=importer, imported=imported)
    where = "; ".join(f"l.{d['line_number']}: {d['line_contents']}" for d in lines[:2]) or "import"
    return importer, imported, where
