"""rageval in pytest: gate a RAG pipeline on metric thresholds, like any other assertion.

Registered through the ``pytest11`` entry point, so installing rageval is enough::

    def test_answers_are_grounded(assert_scores):
        rows = [{"user_input": q, "response": rag(q), "retrieved_contexts": ctx(q)} ...]
        assert_scores(rows, {"faithfulness": 0.8, "answer_relevancy": 0.7})

``assert_scores(rows, thresholds)`` scores the rows with the metrics the thresholds name and
fails the test when a metric's mean is below its threshold, or when a cell has no value (not
measured or skipped; ``allow_missing=True`` lets those pass), printing the worst samples and
their causes. It returns the :class:`~rageval.EvaluationResult`. It works in plain and in
async (pytest-asyncio) tests, and under pytest-xdist.

The judge is configured as for the command line: the environment (``RAGEVAL_LLM``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``...), then the config file (``rageval.toml`` or
``[tool.rageval]`` in ``pyproject.toml``, from the rootdir up), whose metric parameters and
embeddings apply too; it is built, and its endpoint probed, once per session (per xdist
worker), on first use (the later calls drive a llama.cpp server by the slots that probe found). Each call writes a run directory under the session's directory
(``--rageval-dir``, default ``rageval-runs/pytest-<timestamp>``) with its report, and one line
per call to ``calls.jsonl`` there.

This module is imported by every pytest session in an environment with rageval installed:
it imports nothing heavy until a test asks for one of its fixtures.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rageval._config import Settings
    from rageval.judge import Judge
    from rageval.metrics.base import Metric
    from rageval.results import EvaluationResult
    from rageval.samples import Sample

__all__ = ["RagevalSession", "ScoreGate", "assert_scores", "rageval_judge", "rageval_session"]

#: samples shown per failed metric
WORST_SHOWN = 3
_CALLS_FILE = "calls.jsonl"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rageval", "rageval metric gates")
    group.addoption(
        "--rageval-dir",
        metavar="DIR",
        default=None,
        help="where assert_scores writes this session's run directories "
        "(default: rageval-runs/pytest-<timestamp> under the rootdir)",
    )


class RagevalSession:
    """The session's settings and judge (read and built on first use) and the directory its
    runs are written to."""

    def __init__(self, directory: Path, rootdir: Path | None = None) -> None:
        self.directory = directory
        self.rootdir = rootdir
        self._lock = threading.Lock()
        self._settings: Settings | None = None
        self._judge: Judge | None = None
        self._configured = False
        self._probed = False
        self._names: dict[str, int] = {}

    def settings(self) -> Settings:
        """The config file's settings (rageval.toml or [tool.rageval] from the rootdir up)."""
        with self._lock:
            if self._settings is None:
                from rageval._config import load_settings

                self._settings = load_settings(start=self.rootdir)
            return self._settings

    def judge(self) -> Judge | None:
        """The judge configured as for `rageval evaluate`: the environment, then the config
        file (None: none)."""
        settings = self.settings()
        with self._lock:
            if not self._configured:
                from rageval._config import configured_judge

                self._judge = configured_judge(settings)
                self._configured = True
            return self._judge

    def probe_wanted(self) -> bool:
        """Whether a run should probe the endpoints first: until one run got through."""
        return not self._probed

    def got_through(self) -> None:
        self._probed = True

    def run_dir(self, nodeid: str) -> Path:
        """A fresh run directory for one call made by the test `nodeid`."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:120] or "test"
        with self._lock:
            n = self._names[name] = self._names.get(name, 0) + 1
        return self.directory / (name if n == 1 else f"{name}-{n}")

    def record(self, entry: Mapping[str, Any]) -> None:
        """One line per call in calls.jsonl (appended whole: xdist workers share the file)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        fd = os.open(self.directory / _CALLS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _session_directory(config: pytest.Config) -> Path:
    given = config.getoption("rageval_dir")
    if given:
        return Path(given)
    # xdist workers share the controller's test run id, so they share one directory
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    stamp = run_id[:12] if run_id else datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return config.rootpath / "rageval-runs" / f"pytest-{stamp}"


@pytest.fixture(scope="session")
def rageval_session(pytestconfig: pytest.Config) -> RagevalSession:
    """The session's judge and run directory (see the module docstring)."""
    return RagevalSession(_session_directory(pytestconfig), pytestconfig.rootpath)


@pytest.fixture(scope="session")
def rageval_judge(rageval_session: RagevalSession) -> Judge | None:
    """The configured judge (None when none is configured), for scoring metrics directly."""
    return rageval_session.judge()


class ScoreGate:
    """`assert_scores(rows, thresholds)`: see the module docstring."""

    def __init__(self, session: RagevalSession, nodeid: str) -> None:
        self.session = session
        self.nodeid = nodeid

    def __call__(
        self,
        rows: Any,
        thresholds: Mapping[str, float],
        *,
        metrics: Sequence[Metric | str] | None = None,
        allow_missing: bool = False,
        **evaluate_kwargs: Any,
    ) -> EvaluationResult:
        """Score `rows` (anything `evaluate` reads) and assert every threshold.

        `metrics` defaults to the names in `thresholds`; give Metric instances to set their
        parameters. Further keyword arguments go to :func:`rageval.evaluate`."""
        from rageval.judge import FatalJudgeError
        from rageval.runner import RunConfigError, RunDirError, evaluate
        from rageval.samples import InvalidDataError

        if not thresholds:
            raise ValueError("assert_scores needs at least one {metric: threshold}")
        chosen = list(metrics) if metrics is not None else list(thresholds)
        named = {m if isinstance(m, str) else m.name for m in chosen}
        unknown = sorted(set(thresholds) - named)
        if unknown:
            raise ValueError(f"thresholds for metrics that are not run: {', '.join(unknown)}")
        try:
            settings = self.session.settings()
            judge = evaluate_kwargs.pop("llm", None) or self.session.judge()
        except ValueError as e:  # the config file, or a judge setting in it
            raise pytest.fail.Exception(f"rageval: {e}", pytrace=False) from None
        if judge is None:
            _require_a_judge(chosen)
        evaluate_kwargs.setdefault("metric_params", settings.params or None)
        evaluate_kwargs.setdefault("embeddings", settings.embeddings)
        run_dir = self.session.run_dir(self.nodeid)
        try:
            result = evaluate(
                rows,
                chosen,
                llm=judge,
                run_dir=run_dir,
                progress=False,
                probe=self.session.probe_wanted(),
                **evaluate_kwargs,
            )
        except (InvalidDataError, RunConfigError, RunDirError, FatalJudgeError) as e:
            # from None: the failure says it once, without "During handling of the above..."
            raise pytest.fail.Exception(f"rageval: {e}", pytrace=False) from None
        self.session.got_through()
        failures = _failures(result, thresholds, allow_missing)
        self.session.record(
            {
                "test": self.nodeid,
                "run_dir": str(run_dir),
                "thresholds": dict(thresholds),
                "means": {m: s.mean for m, s in result.summary().items()},
                "passed": not failures,
            }
        )
        if failures:
            report = run_dir / "report.html"
            where = f"\nrun directory: {run_dir}" + (
                f" (report: {report})" if report.exists() else ""
            )
            pytest.fail("\n".join(failures) + where, pytrace=False)
        return result


@pytest.fixture
def assert_scores(rageval_session: RagevalSession, request: pytest.FixtureRequest) -> ScoreGate:
    """`assert_scores(rows, {"faithfulness": 0.8, ...})`: score and gate (see the module
    docstring); returns the EvaluationResult."""
    return ScoreGate(rageval_session, request.node.nodeid)


def _require_a_judge(metrics: Sequence[Metric | str]) -> None:
    from rageval.metrics.base import metric_class
    from rageval.runner import NO_JUDGE_CAUSE

    judged = [
        m if isinstance(m, str) else m.name
        for m in metrics
        if (metric_class(m).needs_llm if isinstance(m, str) else m.needs_llm and m.llm is None)
    ]
    if judged:
        pytest.fail(
            f"{', '.join(judged)}: {NO_JUDGE_CAUSE} (the same settings as `rageval evaluate`)",
            pytrace=False,
        )


def _failures(
    result: EvaluationResult, thresholds: Mapping[str, float], allow_missing: bool
) -> list[str]:
    """What fails, each metric with its worst samples and the causes of cells without value."""
    summary = result.summary()
    out: list[str] = []
    for metric, threshold in thresholds.items():
        s = summary[metric]
        problems = []
        if s.mean is None:
            problems.append(f"no measured value (threshold {threshold})")
        elif s.mean < threshold:
            problems.append(f"mean {s.mean:.4f} < {threshold} over {s.n_measured} measured")
        missing = s.n_not_measured + s.n_skipped
        if missing and not allow_missing:
            problems.append(
                f"{missing} of {s.n_cells} cells without a value "
                f"({s.n_not_measured} not measured, {s.n_skipped} skipped)"
            )
        if problems:
            out.append(f"{metric}: " + "; ".join(problems))
            out.extend(_worst(result, metric))
    return out


def _worst(result: EvaluationResult, metric: str) -> list[str]:
    lines = []
    cells = result.cells(metric)
    missing = [(i, c) for i, c in enumerate(cells) if c is not None and c.status != "ok"]
    measured = sorted(
        ((i, c) for i, c in enumerate(cells) if c is not None and c.value is not None),
        key=lambda item: item[1].value if item[1].value is not None else 0.0,
    )
    for i, cell in missing[:WORST_SHOWN]:
        lines.append(f"  {result.ids[i]}: {cell.status.replace('_', ' ')}: {cell.cause}")
    for i, cell in measured[: max(0, WORST_SHOWN - len(missing))]:
        question = _clip(_asked(result.samples[i]))
        why = f" ({_clip(cell.reason, 160)})" if cell.reason else ""
        lines.append(
            f"  {result.ids[i]}: {cell.value:.4f}{why}" + (f" <- {question!r}" if question else "")
        )
    if len(missing) > WORST_SHOWN:
        lines.append(f"  ... and {len(missing) - WORST_SHOWN} more cells without a value")
    return lines


def _asked(sample: Sample | None) -> str:
    """What a row was asked: a sample's question, a conversation's opening message."""
    from rageval.samples import Conversation

    if isinstance(sample, Conversation):
        return sample.opening
    return sample.text("user_input") if sample is not None else ""


def _clip(text: str | None, width: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."
