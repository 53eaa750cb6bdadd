"""A metric of the user's own, named on the command line by its module (``-m
my_metrics:ClassName``): it runs with its parameters and gates, the manifest records where it
lives, and ``--resume DIR`` alone finds it again in a new process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import cli_child_command, run_cli_in_child, write_jsonl
from rageval.log import read_lines, read_manifest
from rageval.metrics.base import metric_class

MODULE = '''
from typing import Any

from rageval.metrics import Metric, MetricResult


class LongerThan(Metric):
    """1 if the response has more than `words` words, else 0 (not registered: -m does it)."""

    name = "longer_than"
    required_fields = ("response",)

    def __init__(self, *, words: int = 3, **kw: Any) -> None:
        super().__init__(**kw)
        self.words = words

    async def measure(self, sample, ctx):
        return MetricResult.ok(float(len(sample.text("response").split()) > self.words))
'''

RESPONSES = ["one two", "one two three four five", "a b c d", "x"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding the user's metric module and data; the CLI runs from it."""
    (tmp_path / "my_metrics.py").write_text(MODULE, encoding="utf-8")
    write_jsonl(tmp_path / "data.jsonl", [{"response": r} for r in RESPONSES])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _values(run: Path) -> list[float | None]:
    lines = sorted((e.line for e in read_lines(run / "results.jsonl")), key=lambda line: line.id)
    return [line.cells["longer_than"].value for line in lines]


def test_a_metric_named_by_its_module_runs_with_its_parameters_and_gate(project: Path) -> None:
    done = run_cli_in_child(
        "evaluate", "data.jsonl", "-m", "my_metrics:LongerThan", "-p", "longer_than.words=3",
        "--fail-under", "longer_than=0.9", "-o", "run", "-q",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the gate: the mean is 0.5 (2 of 4 above 3 words)
    assert "longer_than" in done.stderr + done.stdout
    assert _values(project / "run") == [0.0, 1.0, 1.0, 0.0]
    spec = read_manifest(project / "run").metrics[0]
    assert (spec.name, spec.params, spec.registered_name) == (
        "longer_than",
        {"words": 3},
        "my_metrics:LongerThan",
    )


def test_resume_alone_imports_the_metric_again(project: Path) -> None:
    first = run_cli_in_child(
        "evaluate", "data.jsonl", "-m", "my_metrics:LongerThan", "-p", "longer_than.words=1",
        "-o", "run", "-q",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    results = project / "run" / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    results.write_text("".join(lines[:2]), encoding="utf-8")  # as if killed after two rows
    (project / "run" / "summary.json").unlink(missing_ok=True)

    resumed = run_cli_in_child("evaluate", "--resume", "run", "-q")  # a new process
    assert resumed.returncode == 0, resumed.stderr
    assert _values(project / "run") == [1.0, 1.0, 1.0, 0.0]  # words=1, as recorded
    summary = json.loads((project / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["metrics"]["longer_than"]["n_measured"] == 4


def test_resume_from_another_directory_imports_the_metric_from_where_the_run_found_it(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    first = run_cli_in_child("evaluate", "data.jsonl", "-m", "my_metrics:LongerThan", "-o", "run")
    assert first.returncode == 0, first.stderr
    assert read_manifest(project / "run").metrics[0].import_root == str(project.resolve())
    results = project / "run" / "results.jsonl"
    results.write_text(results.read_text(encoding="utf-8").splitlines(keepends=True)[0])
    (project / "run" / "summary.json").unlink()

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    resumed = subprocess.run(
        cli_child_command("evaluate", "--resume", project / "run", "-q"),
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _values(project / "run") == [0.0, 1.0, 1.0, 0.0]


def test_a_module_path_that_is_no_metric_is_a_usage_error(project: Path) -> None:
    missing = run_cli_in_child("evaluate", "data.jsonl", "-m", "no_such_module:X", "-o", "a")
    assert missing.returncode == 2
    assert "cannot import metric 'no_such_module:X'" in missing.stderr
    not_metric = run_cli_in_child("evaluate", "data.jsonl", "-m", "json:dumps", "-o", "b")
    assert not_metric.returncode == 2
    assert "'json:dumps' is not a metric class" in not_metric.stderr
    assert not (project / "a").exists() and not (project / "b").exists()
    # a class whose name is a built-in metric's: a usage error, not a traceback
    (project / "clash.py").write_text(
        MODULE.replace('"longer_than"', '"token_f1"'), encoding="utf-8"
    )
    clash = run_cli_in_child("evaluate", "data.jsonl", "-m", "clash:LongerThan", "-o", "c")
    assert clash.returncode == 2, clash.stderr
    assert "'token_f1' registered twice" in clash.stderr and "Traceback" not in clash.stderr


def test_metric_class_finds_a_class_by_its_import_path() -> None:
    from rageval.metrics.faithfulness import Faithfulness

    assert metric_class("rageval.metrics.faithfulness:Faithfulness") is Faithfulness
    with pytest.raises(KeyError, match="cannot import metric"):
        metric_class("rageval.metrics.faithfulness:NoSuchClass")


def test_the_import_root_of_a_metric_in_a_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from rageval.metrics.base import metric_import_root
    from rageval.metrics.faithfulness import Faithfulness

    package = tmp_path / "root" / "rootpkg_for_test"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text(MODULE.replace('"longer_than"', '"in_init_test"'))
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text(MODULE.replace('"longer_than"', '"in_mod_test"'))
    monkeypatch.syspath_prepend(str(tmp_path / "root"))
    in_init = importlib.import_module("rootpkg_for_test").LongerThan
    in_mod = importlib.import_module("rootpkg_for_test.sub.mod").LongerThan
    root = str((tmp_path / "root").resolve())
    assert metric_import_root(in_init) == metric_import_root(in_mod) == root
    assert metric_import_root(Faithfulness) is None  # rageval's own: found by its name
