"""The package's layers (docs/ARCHITECTURE.md): no module imports a unit of a higher layer.

Read from the source with `ast`, so every import counts: at module level, inside a function
(a lazy import is still a dependency) and under ``TYPE_CHECKING`` (a type from a higher layer
ties the lower one to it all the same). Units of one layer may import each other, but no two
modules import each other, however far round (no import cycle, inside a unit either).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from helpers import SRC

PACKAGE = SRC / "rageval"

#: bottom to top; a unit is a top-level module or package of rageval
LAYERS: list[tuple[str, frozenset[str]]] = [
    (
        "foundation",
        frozenset({"errors", "_env", "_extras", "_sync", "_version", "_progress", "_rundir_lock"}),
    ),
    ("test support", frozenset({"testing"})),
    ("data in", frozenset({"samples", "labels", "traces"})),
    ("endpoint client", frozenset({"_client"})),
    ("judges and embeddings", frozenset({"judge", "embeddings"})),
    ("metrics", frozenset({"metrics"})),
    (
        "out",
        frozenset({"log", "stats", "results", "report", "calibration", "observers", "labelling"}),
    ),
    ("runner", frozenset({"runner"})),
    ("commands on the runner", frozenset({"generation"})),
    ("front ends", frozenset({"_config", "pytest_plugin", "cli", "__main__"})),
    ("the package root", frozenset({"__init__"})),
]
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def unit_of(path: Path) -> str:
    """The unit a source file belongs to: ``rageval/judge/_judge.py`` is ``judge``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def module_of(path: Path) -> str:
    parts = ("rageval", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every rageval module the file at `path` imports (its text, or `text`
    read as if it were there), wherever the import statement is: `from rageval.judge import
    Judge` imports ``rageval.judge``, `from rageval import _env` ``rageval._env``. Importing a
    module runs its packages' ``__init__`` first, so `import rageval.metrics.base` imports
    ``rageval.metrics`` too (not the root: its names load lazily, it imports nothing)."""
    module = module_of(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    source_text = path.read_text(encoding="utf-8") if text is None else text
    for node in ast.walk(ast.parse(source_text, str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] != "rageval":
                continue
            parts = _nearest_module(name).split(".")
            for depth in range(len(parts), 1 if len(parts) > 1 else 0, -1):
                yield node.lineno, ".".join(parts[:depth])


def imported_units(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, unit) for every rageval unit the file at `path` imports (see
    :func:`imported_modules`), once per line; the package root is the unit ``__init__``."""
    yield from dict.fromkeys(
        (line, _unit_of_module(module)) for line, module in imported_modules(path, text)
    )


def _unit_of_module(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _nearest_module(name: str) -> str:
    """`name` if it is a module of rageval, else the package it is taken from (``rageval.judge``
    for ``rageval.judge.Judge``)."""
    known = _modules()
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


@functools.cache
def _modules() -> frozenset[str]:
    return frozenset(module_of(path) for path in sources())


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(path) for path in sources()}
    assert units - RANK.keys() == set(), "place the new unit in LAYERS and docs/ARCHITECTURE.md"


def test_no_unit_imports_a_higher_layer() -> None:
    upward = []
    for path in sources():
        unit = unit_of(path)
        for line, imported in imported_units(path):
            if RANK[imported] > RANK[unit]:
                layer, higher = LAYERS[RANK[unit]][0], LAYERS[RANK[imported]][0]
                where = path.relative_to(SRC)
                upward.append(f"{where}:{line}: {unit} ({layer}) imports {imported} ({higher})")
    assert upward == []


def test_the_check_sees_imports_everywhere() -> None:
    """Module level, inside a function, under TYPE_CHECKING, relative and `from rageval import`."""
    text = (
        "from typing import TYPE_CHECKING\n"
        "import rageval.runner\n"
        "from rageval import _env, cli\n"
        "from .metrics import base\n"
        "if TYPE_CHECKING:\n"
        "    from rageval.results import EvaluationResult\n"
        "def f() -> None:\n"
        "    from rageval.judge import Judge\n"
        "    import rageval\n"
    )
    found = sorted(imported_units(PACKAGE / "samples.py", text))
    assert found == [
        (2, "runner"),
        (3, "_env"),
        (3, "cli"),
        (4, "metrics"),
        (6, "results"),
        (8, "judge"),
        (9, "__init__"),
    ]


def import_graph() -> dict[str, set[str]]:
    """Each module of rageval and the modules it imports. A package's ``__init__`` importing
    its own modules (to offer their names) is left out: that is what a package is, and no
    module below it can be imported without the ``__init__`` having run first."""
    graph: dict[str, set[str]] = {}
    for path in sources():
        module = module_of(path)
        own = f"{module}." if path.name == "__init__.py" else None
        graph[module] = {
            imported
            for _, imported in imported_modules(path)
            if imported != module and not (own and imported.startswith(own))
        }
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a longer path (the
    strongly connected components of more than one module, by Tarjan's algorithm)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_import_cycles() -> None:
    """Not even through a function-local or ``TYPE_CHECKING`` import: a cycle is two modules
    that can only be read together, and whichever loads first sees the other half-made."""
    assert import_cycles(import_graph()) == []


def test_the_cycle_check_finds_a_cycle_round_any_path() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": {"d"},  # d <-> e
        "f": {"a"},  # imports into a cycle without being in one
    }
    assert import_cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_an_import_reaches_the_packages_it_goes_through() -> None:
    text = (
        "def f() -> None:\n    from rageval.metrics.base import Metric\nfrom rageval import _env\n"
    )
    assert sorted(imported_modules(PACKAGE / "samples.py", text)) == [
        (2, "rageval.metrics"),  # its __init__ runs first
        (2, "rageval.metrics.base"),
        (3, "rageval._env"),  # not the root: it imports nothing when loaded
    ]
