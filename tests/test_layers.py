"""The package's layers (docs/ARCHITECTURE.md): no module imports a unit of a higher layer.

Read from the source with `ast`, so every import counts: at module level, inside a function
(a lazy import is still a dependency) and under ``TYPE_CHECKING`` (a type from a higher layer
ties the lower one to it all the same). Units of one layer may import each other.
"""

from __future__ import annotations

import ast
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
    ("out", frozenset({"log", "stats", "results", "report", "calibration", "observers"})),
    ("runner", frozenset({"runner"})),
    (
        "front ends",
        frozenset({"_config", "pytest_plugin", "cli", "_calibrate_cli", "_align_cli", "__main__"}),
    ),
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


def imported_units(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, unit) for every rageval unit the file at `path` imports (its text, or `text` read
    as if it were there), wherever the import statement is."""
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
            # `from rageval import _env` imports the submodule, not the package root
            names = [f"{source}.{a.name}" for a in node.names] if source == "rageval" else [source]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "rageval":
                continue
            if len(parts) == 1 or not _is_unit(parts[1]):
                yield node.lineno, "__init__"
            else:
                yield node.lineno, parts[1]


def _is_unit(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


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
