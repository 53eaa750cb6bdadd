"""The rows a person labels, read from a data file or from a run directory (then with each
metric's value and evidence), as the labelling page shows them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.log import MANIFEST_FILE, RESULTS_FILE, read_lines, read_manifest
from rageval.samples import Conversation, InvalidDataError, Sample, load_samples, sample_ids


@dataclass(frozen=True)
class MetricView:
    """One metric's cell on a row: its value (None: not measured) and its evidence."""

    value: float | None
    status: str
    evidence: Any = None
    cause: str | None = None


@dataclass(frozen=True)
class RowView:
    """One row as the page shows it."""

    id: str
    row: int
    question: str | None
    contexts: list[str]
    answer: str | None
    reference: str | None
    metrics: dict[str, MetricView] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The row as JSON for the page."""
        return {
            "id": self.id,
            "row": self.row,
            "question": self.question,
            "contexts": self.contexts,
            "answer": self.answer,
            "reference": self.reference,
            "metrics": {
                name: {
                    "value": m.value,
                    "status": m.status,
                    "evidence": m.evidence,
                    "cause": m.cause,
                }
                for name, m in self.metrics.items()
            },
        }


@dataclass(frozen=True)
class LabellingRows:
    """The rows of a data file or run directory, in file order, and the metrics it has."""

    source: str
    rows: list[RowView]
    metrics: list[str]

    def judge_values(self, metric: str) -> list[float | None]:
        """`metric`'s value on each row (None where not measured or absent).

        Args:
            metric: a metric of the run.
        """
        return [r.metrics[metric].value if metric in r.metrics else None for r in self.rows]


def read_rows(path: str | Path) -> LabellingRows:
    """The rows at `path`: a run directory (with its metrics' cells) or a data file.

    Args:
        path: a run directory (it has a manifest) or a data file rageval reads.

    Raises:
        InvalidDataError: a data file with a row that cannot be read (it would be left out
            of the labelling unseen) or a field that cannot (the page would show the row
            without it), named by line and field as ``rageval evaluate`` names them.
    """
    path = Path(path)
    if path.is_dir() and (path / MANIFEST_FILE).exists():
        return _run_rows(path)
    loaded = load_samples(path)
    if loaded.problems:
        raise InvalidDataError(loaded.problems, source=loaded.source)
    ids = sample_ids(loaded.samples)
    views = [
        _view(sample, ids[i], i, {})
        for i, sample in enumerate(loaded.samples)
        if sample is not None
    ]
    return LabellingRows(str(path), views, [])


def _run_rows(run_dir: Path) -> LabellingRows:
    manifest = read_manifest(run_dir)
    last: dict[int, RowView] = {}
    log = run_dir / RESULTS_FILE
    for entry in read_lines(log) if log.exists() else ():
        line = entry.line
        cells = {
            name: MetricView(
                cell.value,
                cell.status,
                json.loads(cell.evidence.model_dump_json(exclude_none=True)),
                cell.cause,
            )
            for name, cell in line.cells.items()
        }
        last[line.row] = _view(line.sample(), line.id, line.row, cells)  # a resumed row: last
    metrics = [m.name for m in manifest.metrics]
    return LabellingRows(str(run_dir), [last[row] for row in sorted(last)], metrics)


def _view(sample: Sample, row_id: str, row: int, cells: dict[str, MetricView]) -> RowView:
    question, answer = sample.user_input, sample.response
    if isinstance(sample, Conversation):  # a conversation: its first question, last answer
        said = [(t.role, t.content) for t in sample.turns if t.content]
        question = question or next((c for r, c in said if r == "user"), None)
        answer = answer or next((c for r, c in reversed(said) if r == "assistant"), None)
    reference = sample.reference
    if isinstance(reference, list):
        reference = "\n".join(reference)
    return RowView(
        row_id, row, question, list(sample.retrieved_contexts or []), answer, reference, cells
    )


__all__ = ["LabellingRows", "MetricView", "RowView", "read_rows"]
