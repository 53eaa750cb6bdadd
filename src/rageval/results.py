"""The outcome of an evaluation: one cell per (sample, metric), aggregates, usage.

Every cell has a status: `ok` (a value), `not_measured` (the metric could not be computed:
the cause says why) or `skipped` (the metric was not run on this sample: the cause says why).
Aggregates are over measured cells only and always report how many were not measured or
skipped; a missing value is never counted as 0 and never silently dropped.

Large runs keep values, statuses, causes and reasons in memory, column by column; the
evidence (statements, verdicts, ratings...) of a run with a run directory stays in its
`results.jsonl` and is read back when asked for (`sample()`, `cells()`).
"""

from __future__ import annotations

import html
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rageval.judge import Usage
from rageval.metrics._statements import SHARED_TAG as SHARED_USAGE
from rageval.samples import SAMPLE_FIELDS, Sample

if TYPE_CHECKING:
    import pandas as pd

    from rageval.stats import JudgeNoise, PairedDifference, PPIDifference, PPIEstimate

__all__ = [
    "EMBEDDINGS_USAGE",
    "SHARED_USAGE",
    "Cell",
    "EvaluationResult",
    "MetricComparison",
    "MetricSummary",
    "PPIComparison",
    "SampleRecord",
    "compare",
    "iter_records",
    "load_run",
    "usage_from_json",
    "usage_to_json",
]

CellStatus = Literal["ok", "not_measured", "skipped"]
#: the usage line of a remote embeddings endpoint
EMBEDDINGS_USAGE = "embeddings"
#: one shared copy of each status text, however many cells are read back from a log
_STATUSES: dict[str, CellStatus] = {
    "ok": "ok",
    "not_measured": "not_measured",
    "skipped": "skipped",
}
MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
_USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "requests",
    "retries",
    "reasks",
    "cache_hits",
)


def usage_to_json(usage: Usage) -> dict[str, Any]:
    # by hand: dataclasses.asdict costs more than the rest of writing a record
    out: dict[str, Any] = {k: getattr(usage, k) for k in _USAGE_FIELDS}
    out["cost_usd"] = usage.cost_usd
    out["total_tokens"] = usage.prompt_tokens + usage.completion_tokens
    return out


def usage_from_json(obj: Mapping[str, Any] | None) -> Usage:
    if not obj:
        return Usage()
    known: dict[str, Any] = {k: int(obj.get(k) or 0) for k in _USAGE_FIELDS}
    cost = obj.get("cost_usd", 0.0)
    return Usage(**known, cost_usd=None if cost is None else float(cost))


#: columns of the summary table, in the terminal and in notebooks
SUMMARY_COLUMNS = (
    "metric",
    "mean",
    "95% CI",
    "n",
    "not measured",
    "skipped",
    "requests",
    "tokens",
    "cost",
)


@dataclass(frozen=True)
class Cell:
    """One metric on one sample."""

    status: CellStatus
    value: float | None = None
    cause: str | None = None
    reason: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "value": self.value,
            "cause": self.cause,
            "reason": self.reason,
            "evidence": dict(self.evidence),
            "usage": usage_to_json(self.usage),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Cell:
        value = obj.get("value")
        return cls(
            status=_STATUSES[obj["status"]],
            value=None if value is None else float(value),
            cause=obj.get("cause"),
            reason=obj.get("reason"),
            evidence=obj.get("evidence") or {},
            usage=usage_from_json(obj.get("usage")),
        )


@dataclass(frozen=True)
class SampleRecord:
    """A finished sample: its inputs and a cell per metric (one line of `results.jsonl`)."""

    row: int
    id: str
    sample: Sample | None
    cells: dict[str, Cell]
    #: this sample's share of work done once for several metrics (statement extraction)
    shared_usage: Usage = field(default_factory=Usage)

    def to_json(self) -> dict[str, Any]:
        inputs = {} if self.sample is None else _inputs_json(self.sample)
        return {
            "row": self.row,
            "id": self.id,
            "inputs": inputs,
            "metrics": {name: cell.to_json() for name, cell in self.cells.items()},
            "shared_usage": usage_to_json(self.shared_usage),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, parse_inputs: bool = True) -> SampleRecord:
        """A record read back; without `parse_inputs` its `sample` is None (the caller has
        the data already)."""
        inputs = obj.get("inputs") or {}
        sample = (
            Sample.model_validate({**inputs, "id": obj["id"]}) if inputs and parse_inputs else None
        )
        return cls(
            row=int(obj["row"]),
            id=str(obj["id"]),
            sample=sample,
            cells={name: Cell.from_json(c) for name, c in (obj.get("metrics") or {}).items()},
            shared_usage=usage_from_json(obj.get("shared_usage")),
        )


def _inputs_json(sample: Sample) -> dict[str, Any]:
    out: dict[str, Any] = {
        f: getattr(sample, f) for f in SAMPLE_FIELDS if getattr(sample, f) is not None
    }
    if sample.metadata:
        out["metadata"] = sample.metadata
    return out


def iter_records(path: Path) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(byte offset, byte end, record) for each complete line of a results log.

    A last line without its newline, or one that is not valid JSON, is a write the process did
    not finish (it was killed) and is left out; a broken line anywhere else is an error.
    """
    with path.open("rb") as fh:
        offset = 0
        pending: tuple[int, bytes] | None = None
        for line in fh:
            if pending is not None:
                raise ValueError(f"{path}: damaged line at byte {pending[0]}: not valid JSON")
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            if not line.endswith(b"\n"):
                return  # torn final write
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                pending = (start, line)
                continue
            yield start, offset, obj


@dataclass(frozen=True)
class MetricSummary:
    """Aggregate of one metric: mean and CI over measured cells, and every count."""

    name: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    n_measured: int
    n_not_measured: int
    n_skipped: int
    usage: Usage
    #: cause -> number of cells, for cells not measured / skipped
    causes: dict[str, int] = field(default_factory=dict)
    #: label column -> PPI++ mean of the human label, the judge rectified (human_labels=)
    ppi: dict[str, PPIEstimate] = field(default_factory=dict)
    #: how much of the interval is the judge's own randomness (repeats > 1)
    judge_noise: JudgeNoise | None = None

    @property
    def n_cells(self) -> int:
        return self.n_measured + self.n_not_measured + self.n_skipped

    def to_json(self) -> dict[str, Any]:
        from rageval.calibration._evaluation import noise_to_json, ppi_to_json

        extra: dict[str, Any] = {}
        if self.ppi:
            extra["ppi"] = {column: ppi_to_json(e) for column, e in self.ppi.items()}
        if self.judge_noise is not None:
            extra["judge_noise"] = noise_to_json(self.judge_noise)
        return {
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "ci_method": self.ci_method,
            "n_measured": self.n_measured,
            "n_not_measured": self.n_not_measured,
            "n_skipped": self.n_skipped,
            "n_cells": self.n_cells,
            "usage": usage_to_json(self.usage),
            "causes": self.causes,
            **extra,
        }


class _Column:
    """One metric's cells, by row, without their evidence."""

    __slots__ = ("causes", "reasons", "statuses", "usage", "values")

    def __init__(self, n: int) -> None:
        self.values: list[float | None] = [None] * n
        self.statuses: list[CellStatus | None] = [None] * n  # None: row not finished
        self.causes: list[str | None] = [None] * n
        self.reasons: list[str | None] = [None] * n
        self.usage: list[Usage | None] = [None] * n


_EMPTY_USAGE = Usage()


class EvaluationResult:
    """Per-sample cells of every metric, their aggregates and the run's usage.

    `result["faithfulness"]` is the list of values by row (None where not measured or
    skipped); `summary()` gives mean, 95% CI and counts per metric; `to_pandas()` one row per
    sample. Rows that a run did not finish (it was stopped) have no cells and are not counted.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        ids: Sequence[str],
        samples: Sequence[Sample | None],
        *,
        run_dir: Path | None = None,
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        judge: Mapping[str, Any] | None = None,
        embeddings: str | None = None,
        human_labels: Sequence[tuple[str, str]] = (),
        repeats: int = 1,
    ) -> None:
        if len(ids) != len(samples):
            raise ValueError("ids and samples must have the same length")
        self.metrics = list(metrics)
        self.ids = list(ids)
        self.samples = list(samples)
        self.run_dir = run_dir
        self.metric_params = {k: dict(v) for k, v in (metric_params or {}).items()}
        self.judge = dict(judge) if judge is not None else None
        self.embeddings = embeddings
        #: (label column, metric) pairs whose labels rectify the judge (PPI++ in the summary)
        self.human_labels = [(column, metric) for column, metric in human_labels]
        #: scorings per judge cell (evaluate(repeats=K))
        self.repeats = repeats
        self.duration_s: float | None = None
        #: calls to a remote embeddings endpoint in this session (not split by metric)
        self.embeddings_usage: Usage | None = None
        n = len(self.ids)
        self._columns = {m: _Column(n) for m in self.metrics}
        self._shared: list[Usage | None] = [None] * n
        self._done = [False] * n
        # evidence by row: in memory, or the byte offset of the row's line in results.jsonl
        self._evidence: dict[int, dict[str, Mapping[str, Any]]] = {}
        self._offsets: dict[int, int] = {}
        self._summary: dict[str, MetricSummary] | None = None
        self._row_of = {sid: i for i, sid in enumerate(self.ids)}
        # metric -> row -> the repeated scores of the cell (repeats > 1)
        self._repeats: dict[str, dict[int, list[float]]] = {}
        # causes repeat across thousands of cells: keep one copy of each text
        self._strings: dict[str, str] = {}

    def _shared_str(self, text: str) -> str:
        return self._strings.setdefault(text, text)

    # ------------------------------------------------------------------ filling
    def add(self, record: SampleRecord, *, offset: int | None = None) -> None:
        """Store a finished sample; with `offset` its evidence stays in the run's results log."""
        row = record.row
        if not 0 <= row < len(self.ids):
            raise ValueError(f"record for row {row} outside 0..{len(self.ids) - 1}")
        for name, cell in record.cells.items():
            col = self._columns.get(name)
            if col is None:
                continue
            col.values[row] = cell.value
            col.statuses[row] = cell.status
            col.causes[row] = None if cell.cause is None else self._shared_str(cell.cause)
            col.reasons[row] = cell.reason
            col.usage[row] = None if cell.usage == _EMPTY_USAGE else cell.usage
            if self.repeats > 1:
                self._keep_repeats(name, row, cell.evidence)
        self._shared[row] = None if record.shared_usage == _EMPTY_USAGE else record.shared_usage
        self._done[row] = True
        if offset is None:
            self._evidence[row] = {n: c.evidence for n, c in record.cells.items() if c.evidence}
            self._offsets.pop(row, None)
        else:
            self._offsets[row] = offset
            self._evidence.pop(row, None)
        self._summary = None

    def _keep_repeats(self, metric: str, row: int, evidence: Mapping[str, Any]) -> None:
        from rageval.calibration._evaluation import repeat_values

        scores = repeat_values(evidence)
        by_row = self._repeats.setdefault(metric, {})
        if scores is None:
            by_row.pop(row, None)
        else:
            by_row[row] = scores

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_finished(self) -> int:
        return sum(self._done)

    @property
    def complete(self) -> bool:
        return all(self._done)

    def is_finished(self, row: int) -> bool:
        return self._done[row]

    def __getitem__(self, metric: str) -> list[float | None]:
        """The metric's values by row (None where not measured, skipped or not finished)."""
        return list(self._column(metric).values)

    def _column(self, metric: str) -> _Column:
        try:
            return self._columns[metric]
        except KeyError:
            raise KeyError(
                f"no metric {metric!r} in this result; it has {', '.join(self.metrics)}"
            ) from None

    def _row(self, key: int | str) -> int:
        if isinstance(key, str):
            if key not in self._row_of:
                raise KeyError(f"no sample with id {key!r}")
            return self._row_of[key]
        if not -len(self.ids) <= key < len(self.ids):
            raise IndexError(f"row {key} out of range")
        return key % len(self.ids)

    def statuses(self, metric: str) -> list[CellStatus | None]:
        return list(self._column(metric).statuses)

    def sample(self, key: int | str) -> SampleRecord:
        """Everything about one sample (by row number or id), evidence included."""
        row = self._row(key)
        if not self._done[row]:
            raise KeyError(f"row {row} was not evaluated (the run did not finish it)")
        evidence = self._evidence_of(row)
        cells = {
            name: self._cell(col, row, evidence.get(name, {}))
            for name, col in self._columns.items()
            if col.statuses[row] is not None
        }
        return SampleRecord(
            row, self.ids[row], self.samples[row], cells, self._shared[row] or Usage()
        )

    @staticmethod
    def _cell(col: _Column, row: int, evidence: Mapping[str, Any]) -> Cell:
        status = col.statuses[row]
        assert status is not None
        return Cell(
            status=status,
            value=col.values[row],
            cause=col.causes[row],
            reason=col.reasons[row],
            evidence=evidence,
            usage=col.usage[row] or Usage(),
        )

    def cells(self, metric: str) -> list[Cell | None]:
        """The metric's cells by row, evidence included (None for rows not finished)."""
        col = self._column(metric)
        on_disk = self._evidence_on_disk(metric)
        out: list[Cell | None] = []
        for row, status in enumerate(col.statuses):
            if status is None:
                out.append(None)
                continue
            in_memory = self._evidence.get(row, {}).get(metric)
            out.append(
                self._cell(col, row, in_memory if in_memory is not None else on_disk.get(row, {}))
            )
        return out

    def _evidence_on_disk(self, metric: str) -> dict[int, Mapping[str, Any]]:
        """Evidence of `metric` for every row kept in the results log, in one pass over it."""
        if not self._offsets or self.run_dir is None:
            return {}
        row_at = {offset: row for row, offset in self._offsets.items()}
        found: dict[int, Mapping[str, Any]] = {}
        for start, _, obj in iter_records(self.run_dir / RESULTS_FILE):
            row = row_at.get(start)
            if row is not None:
                found[row] = ((obj.get("metrics") or {}).get(metric) or {}).get("evidence") or {}
        return found

    def _evidence_of(self, row: int) -> Mapping[str, Mapping[str, Any]]:
        if row in self._evidence:
            return self._evidence[row]
        offset = self._offsets.get(row)
        if offset is None or self.run_dir is None:
            return {}
        with (self.run_dir / RESULTS_FILE).open("rb") as fh:
            fh.seek(offset)
            obj = json.loads(fh.readline())
        return {n: c.get("evidence") or {} for n, c in obj.get("metrics", {}).items()}

    # ------------------------------------------------------------------ aggregates
    def summary(self) -> dict[str, MetricSummary]:
        """Per metric: mean and 95% bootstrap CI of the measured values, and all counts."""
        if self._summary is None:
            self._summary = {m: self._summarise(m) for m in self.metrics}
        return dict(self._summary)

    def _summarise(self, metric: str) -> MetricSummary:
        from rageval.stats import bootstrap_ci

        col = self._columns[metric]
        counts = Counter(s for s in col.statuses if s is not None)
        causes = Counter(
            f"{s.replace('_', ' ')}: {c}"
            for s, c in zip(col.statuses, col.causes, strict=True)
            if s in ("not_measured", "skipped") and c
        )
        ci = bootstrap_ci([v for v, s in zip(col.values, col.statuses, strict=True) if s == "ok"])
        ppi, noise = self._human_and_noise(metric, col)
        return MetricSummary(
            name=metric,
            mean=ci.mean,
            ci_low=ci.low,
            ci_high=ci.high,
            ci_method=ci.method,
            n_measured=counts["ok"],
            n_not_measured=counts["not_measured"],
            n_skipped=counts["skipped"],
            usage=sum((u for u in col.usage if u is not None), Usage()),
            causes=dict(causes.most_common()),
            ppi=ppi,
            judge_noise=noise,
        )

    def _human_and_noise(
        self, metric: str, col: _Column
    ) -> tuple[dict[str, PPIEstimate], JudgeNoise | None]:
        """The PPI++ mean of each label column paired with `metric`, and the judge-noise
        decomposition of its repeated cells."""
        if not self.human_labels and self.repeats == 1:
            return {}, None
        from rageval.calibration._evaluation import ppi_of
        from rageval.stats import judge_noise

        values = [v if s == "ok" else None for v, s in zip(col.values, col.statuses, strict=True)]
        finished = [s if done else None for s, done in zip(self.samples, self._done, strict=True)]
        ppi = {
            column: ppi_of(finished, values, column)
            for column, m in self.human_labels
            if m == metric
        }
        repeated = self._repeats.get(metric)
        noise = judge_noise(list(repeated.values())) if repeated else None
        return ppi, noise

    @property
    def usage_by_metric(self) -> dict[str, Usage]:
        """Usage per metric, plus the shared statement extraction as its own entry."""
        out = {name: s.usage for name, s in self.summary().items()}
        shared = sum((u for u in self._shared if u is not None), Usage())
        if shared != _EMPTY_USAGE:
            out[SHARED_USAGE] = shared
        if self.embeddings_usage is not None and self.embeddings_usage != _EMPTY_USAGE:
            out[EMBEDDINGS_USAGE] = self.embeddings_usage
        return out

    @property
    def usage(self) -> Usage:
        return sum(self.usage_by_metric.values(), Usage())

    def summary_json(self) -> dict[str, Any]:
        """The content of `summary.json`."""
        by_metric = self.usage_by_metric
        extra = {
            k: usage_to_json(by_metric[k])
            for k in (SHARED_USAGE, EMBEDDINGS_USAGE)
            if k in by_metric
        }
        return {
            "metrics": {name: s.to_json() for name, s in self.summary().items()},
            "usage": usage_to_json(self.usage),
            "shared_usage": extra,
            "duration_s": self.duration_s,
            "n_rows": len(self.ids),
            "n_finished": self.n_finished,
        }

    # ------------------------------------------------------------------ views
    def to_pandas(self) -> pd.DataFrame:
        """One row per sample: id, inputs, and per metric `<metric>` (NaN where not measured),
        `<metric>_status` and `<metric>_reason` (the cause when not measured or skipped); with
        repeats, `<metric>_sd`: the spread of the cell's repeated scores."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError(
                "to_pandas() needs pandas: pip install 'rageval[pandas]' (or pip install pandas)"
            ) from e
        data: dict[str, list[Any]] = {"id": list(self.ids)}
        for f in SAMPLE_FIELDS:
            values = [getattr(s, f) if s is not None else None for s in self.samples]
            if any(v is not None for v in values):
                data[f] = values
        for name, col in self._columns.items():
            data[name] = [math.nan if v is None else v for v in col.values]
            data[f"{name}_status"] = list(col.statuses)
            data[f"{name}_reason"] = [
                r if s == "ok" else c
                for s, r, c in zip(col.statuses, col.reasons, col.causes, strict=True)
            ]
            repeated = self._repeats.get(name)
            if repeated:
                data[f"{name}_sd"] = [_sd(repeated.get(row)) for row in range(len(self.ids))]
        return pd.DataFrame(data)

    def summary_table(self) -> str:
        """Plain-text table: metric, mean, 95% CI, counts, requests, tokens, cost."""
        header = SUMMARY_COLUMNS
        rows: list[tuple[str, ...]] = []
        for name, s in self.summary().items():
            rows.append(
                (
                    name,
                    _num(s.mean),
                    "-"
                    if s.ci_low is None or s.ci_high is None
                    else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]",
                    str(s.n_measured),
                    str(s.n_not_measured),
                    str(s.n_skipped),
                    *_usage_cells(s.usage),
                )
            )
        by_metric = self.usage_by_metric
        for line in (SHARED_USAGE, EMBEDDINGS_USAGE):
            if line in by_metric:
                rows.append((line, "", "", "", "", "", *_usage_cells(by_metric[line])))
        rows.append(("total", "", "", "", "", "", *_usage_cells(self.usage)))
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = []
        for r in [header, *rows]:
            cells = [r[0].ljust(widths[0])] + [
                c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
            ]
            lines.append("  ".join(cells).rstrip())
        lines.insert(1, "-" * len(lines[0]))
        cache_hits = self.usage.cache_hits
        if cache_hits:
            lines.append(f"({cache_hits} requests answered from the cache)")
        lines += self._human_and_noise_lines()
        return "\n".join(lines)

    def _human_and_noise_lines(self) -> list[str]:
        from rageval.calibration._evaluation import describe_noise, describe_ppi

        summary = self.summary()
        ppi = [describe_ppi(m, c, e) for m, s in summary.items() for c, e in s.ppi.items()]
        noise = [describe_noise(m, s.judge_noise) for m, s in summary.items() if s.judge_noise]
        lines = []
        if ppi:
            lines += ["", "human labels: the mean label, PPI++ (judge rectified by the labels):"]
            lines += [f"  {line}" for line in ppi]
        if noise:
            lines += ["", "judge noise (each cell scored several times, its value their mean):"]
            lines += [f"  {line}" for line in noise]
        return lines

    def __repr__(self) -> str:
        done = self.n_finished
        head = f"EvaluationResult({len(self.ids)} samples"
        head += ")" if done == len(self.ids) else f", {done} finished)"
        return f"{head}\n{self.summary_table()}"

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in SUMMARY_COLUMNS)
        body = []
        for name, s in self.summary().items():
            ci = (
                "–"
                if s.ci_low is None or s.ci_high is None
                else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            )
            cells = [
                name,
                _num(s.mean),
                ci,
                str(s.n_measured),
                str(s.n_not_measured),
                str(s.n_skipped),
            ]
            cells += list(_usage_cells(s.usage))
            title = "; ".join(f"{c} ({k} rows)" for c, k in s.causes.items())
            body.append(
                f'<tr title="{esc(title)}">'
                + "".join(f"<td>{esc(c)}</td>" for c in cells)
                + "</tr>"
            )
        return (
            f"<div><p>rageval: {len(self.ids)} samples, {self.n_finished} finished</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )


def _sd(values: Sequence[float] | None) -> float:
    """Sample standard deviation; NaN (pandas' empty) for fewer than two values."""
    return statistics.stdev(values) if values and len(values) >= 2 else math.nan


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _usage_cells(usage: Usage) -> tuple[str, str, str]:
    if usage.cost_usd is None:
        cost = "unknown"
    elif usage.requests == 0 and usage.cost_usd == 0:
        cost = "-"
    else:
        cost = f"${usage.cost_usd:.4f}"
    return f"{usage.requests:,}", f"{usage.total_tokens:,}", cost


# ---------------------------------------------------------------------- run directories


def load_run(run_dir: str | Path) -> EvaluationResult:
    """A run directory read back (finished rows only; evidence stays on disk)."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / MANIFEST_FILE
    if not manifest_path.exists():
        raise FileNotFoundError(f"{run_dir} is not a rageval run directory (no {MANIFEST_FILE})")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    records: dict[int, tuple[int, SampleRecord]] = {}
    results_path = run_dir / RESULTS_FILE
    if results_path.exists():
        for offset, _, obj in iter_records(results_path):
            rec = SampleRecord.from_json(obj)
            records[rec.row] = (offset, rec)
    n_rows = int((manifest.get("data") or {}).get("n_rows") or (max(records, default=-1) + 1))
    ids = [f"row-{i}" for i in range(n_rows)]
    samples: list[Sample | None] = [None] * n_rows
    for row, (_, rec) in records.items():
        ids[row] = rec.id
        samples[row] = rec.sample
    specs = manifest.get("metrics") or []
    result = EvaluationResult(
        [m["name"] for m in specs],
        ids,
        samples,
        run_dir=run_dir,
        metric_params={m["name"]: m.get("params") or {} for m in specs},
        judge=manifest.get("judge"),
        embeddings=(manifest.get("embeddings") or {}).get("name"),
        human_labels=[(str(c), str(m)) for c, m in manifest.get("human_labels") or []],
        repeats=int(manifest.get("repeats") or 1),
    )
    for offset, rec in records.values():
        result.add(rec, offset=offset)
    summary_path = run_dir / SUMMARY_FILE
    if summary_path.exists():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        result.duration_s = summary.get("duration_s")
        embeddings_usage = (summary.get("shared_usage") or {}).get(EMBEDDINGS_USAGE)
        if embeddings_usage:
            result.embeddings_usage = usage_from_json(embeddings_usage)
    return result


# ---------------------------------------------------------------------- comparing runs


@dataclass(frozen=True)
class PPIComparison:
    """The PPI++ means of one label column in both runs and their paired difference."""

    column: str
    a: PPIEstimate
    b: PPIEstimate
    diff: PPIDifference


@dataclass(frozen=True)
class MetricComparison:
    """Run B minus run A on one metric, over the samples (matched by id) measured in both."""

    metric: str
    diff: PairedDifference
    mean_a: float | None
    mean_b: float | None
    #: (id, value in A, value in B) of the samples that moved most, largest change first
    movers: list[tuple[str, float, float]]
    #: the human-label means both runs report for this metric (human_labels=)
    ppi: list[PPIComparison] = field(default_factory=list)


def compare(a: EvaluationResult, b: EvaluationResult, *, top: int = 5) -> list[MetricComparison]:
    """Paired, item-matched comparison of every metric the two results share."""
    from rageval.stats import paired_difference

    pos_b = {sid: i for i, sid in enumerate(b.ids)}
    matched = [(i, pos_b[sid]) for i, sid in enumerate(a.ids) if sid in pos_b]
    out = []
    for metric in (m for m in a.metrics if m in b.metrics):
        va, vb = a[metric], b[metric]
        xs = [va[i] for i, _ in matched]
        ys = [vb[j] for _, j in matched]
        diff = paired_difference(xs, ys)
        pairs = [
            (sid, x, y)
            for sid, x, y in zip((a.ids[i] for i, _ in matched), xs, ys, strict=True)
            if x is not None and y is not None
        ]
        movers = sorted(pairs, key=lambda p: abs(p[2] - p[1]), reverse=True)
        out.append(
            MetricComparison(
                metric=metric,
                diff=diff,
                mean_a=_mean([x for _, x, _ in pairs]),
                mean_b=_mean([y for _, _, y in pairs]),
                movers=[m for m in movers[:top] if m[2] != m[1]],
                ppi=_compare_ppi(a, b, metric, matched, xs, ys),
            )
        )
    return out


def _compare_ppi(
    a: EvaluationResult,
    b: EvaluationResult,
    metric: str,
    matched: Sequence[tuple[int, int]],
    xs: Sequence[float | None],
    ys: Sequence[float | None],
) -> list[PPIComparison]:
    """Each label column both runs pair with `metric`: both PPI++ means, and their difference
    over the matched samples (each run's own λ)."""
    from rageval.labels import parse_label
    from rageval.stats import ppi_difference

    columns = [c for c, m in a.human_labels if m == metric and (c, m) in b.human_labels]
    if not columns:
        return []

    def labels(run: EvaluationResult, rows: Sequence[int], column: str) -> list[float | None]:
        samples = [run.samples[r] for r in rows]
        return [None if s is None else parse_label(s.metadata.get(column)) for s in samples]

    out = []
    for column in columns:
        pa, pb = a.summary()[metric].ppi[column], b.summary()[metric].ppi[column]
        diff = ppi_difference(
            labels(a, [i for i, _ in matched], column),
            xs,
            labels(b, [j for _, j in matched], column),
            ys,
            lam_a=pa.lam or 0.0,
            lam_b=pb.lam or 0.0,
        )
        out.append(PPIComparison(column, pa, pb, diff))
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
