"""The files of a run directory as the report reads them.

The runner writes `manifest.json`, `results.jsonl` (one object per finished sample, appended as
samples finish) and `summary.json`. These models are the contract: extra keys are kept (and
shown in the report's configuration panel), missing optional keys take their defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, model_validator

from rageval.calibration._model import CALIBRATION_FILE, CalibrationReport

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"


class _Record(BaseModel):
    # the page shows NaN/Infinity in free-form evidence as the words they are (JSON.parse
    # rejects the bare tokens), see report._json_safe
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="strings")


class Usage(_Record):
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cost_usd: FiniteFloat | None = None
    retries: int = 0

    def __add__(self, other: Usage) -> Usage:
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            requests=self.requests + other.requests,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_hits=self.cache_hits + other.cache_hits,
            cost_usd=sum(costs) if costs else None,
            retries=self.retries + other.retries,
        )


class MetricSpec(_Record):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class JudgeInfo(_Record):
    model: str
    base_url: str | None = None
    temperature: float | None = None


class EmbeddingsInfo(_Record):
    name: str


class DataInfo(_Record):
    source: str | None = None
    fingerprint: str | None = None
    n_rows: int | None = None


class Manifest(_Record):
    rageval_version: str
    created_at: str
    metrics: list[MetricSpec] = Field(default_factory=list)
    judge: JudgeInfo | None = None
    embeddings: EmbeddingsInfo | None = None
    data: DataInfo = Field(default_factory=DataInfo)


class Inputs(_Record):
    user_input: str | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    reference: str | None = None
    reference_contexts: list[str] | None = None


class Cell(_Record):
    status: Literal["ok", "not_measured", "skipped"]
    value: FiniteFloat | None = None
    cause: str | None = None
    reason: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="after")
    def _value_matches_status(self) -> Cell:
        if (self.status == "ok") != (self.value is not None):
            raise ValueError(
                f"a {self.status!r} cell must {'' if self.status == 'ok' else 'not '}"
                f"have a value, got {self.value!r}"
            )
        return self


class SampleResult(_Record):
    row: int
    id: str
    inputs: Inputs = Field(default_factory=Inputs)
    metrics: dict[str, Cell] = Field(default_factory=dict)
    #: work done once for several metrics (statement extraction), not charged to any one
    shared_usage: Usage = Field(default_factory=Usage)


class PPISummary(_Record):
    """The PPI++ mean of a human label column (summary.json, evaluate(human_labels=...))."""

    mean: FiniteFloat | None = None
    ci_low: FiniteFloat | None = None
    ci_high: FiniteFloat | None = None
    labelled_mean: FiniteFloat | None = None
    labelled_ci_low: FiniteFloat | None = None
    labelled_ci_high: FiniteFloat | None = None
    n_labelled: int = 0
    n_unlabelled: int = 0
    n_labelled_without_judge: int = 0


class NoiseSummary(_Record):
    """The judge-noise decomposition of a metric scored several times per cell."""

    repeats: int
    n_cells: int
    mean_cell_sd: FiniteFloat
    noise_variance_share: FiniteFloat
    ci_width_share: FiniteFloat


class MetricSummary(_Record):
    mean: FiniteFloat | None = None
    ci_low: FiniteFloat | None = None
    ci_high: FiniteFloat | None = None
    ci_method: str | None = None
    n_measured: int = 0
    n_not_measured: int = 0
    n_skipped: int = 0
    n_cells: int = 0
    usage: Usage = Field(default_factory=Usage)
    #: "not measured: <cause>" / "skipped: <cause>" -> number of cells
    causes: dict[str, int] = Field(default_factory=dict)
    #: label column -> its PPI++ mean (only with human labels)
    ppi: dict[str, PPISummary] = Field(default_factory=dict)
    judge_noise: NoiseSummary | None = None


class Summary(_Record):
    metrics: dict[str, MetricSummary] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    #: label (e.g. "shared:statements") -> usage of work shared between metrics
    shared_usage: dict[str, Usage] = Field(default_factory=dict)
    duration_s: FiniteFloat | None = None


class RunData(BaseModel):
    """A run directory loaded: its manifest, finished samples (by row) and summary, if written."""

    manifest: Manifest
    results: list[SampleResult]
    summary: Summary | None = None
    #: finished samples past `max_samples` that were read but not kept
    samples_left_out: int = 0
    #: agreement with human labels, when the run was a calibration (calibration.json)
    calibration: CalibrationReport | None = None

    @classmethod
    def load(cls, run_dir: str | Path, *, max_samples: int | None = None) -> RunData:
        """Load a run directory; with `max_samples`, keep only the samples of the first rows
        (the others are counted) so that a huge run's report stays within memory."""
        run_dir = Path(run_dir)
        manifest = Manifest.model_validate_json((run_dir / MANIFEST).read_bytes())
        results_path = run_dir / RESULTS
        results, left_out = (
            _read_results(results_path, max_samples) if results_path.exists() else ([], 0)
        )
        summary_path = run_dir / SUMMARY
        summary = (
            Summary.model_validate_json(summary_path.read_bytes())
            if summary_path.exists()
            else None
        )
        calibration_path = run_dir / CALIBRATION_FILE
        calibration = (
            CalibrationReport.load(calibration_path) if calibration_path.exists() else None
        )
        return cls(
            manifest=manifest,
            results=results,
            summary=summary,
            samples_left_out=left_out,
            calibration=calibration,
        )

    def metric_names(self) -> list[str]:
        """Metrics in manifest order, then any that only the results or summary mention."""
        names = [m.name for m in self.manifest.metrics]
        extra = [n for r in self.results for n in r.metrics]
        if self.summary is not None:
            extra += list(self.summary.metrics)
        return list(dict.fromkeys(names + extra))


def _read_results(path: Path, max_rows: int | None = None) -> tuple[list[SampleResult], int]:
    """Finished samples sorted by row (a row written twice, by a resumed run, keeps its last
    record), and how many finished rows at or past `max_rows` were left out.

    Only the final line may be cut short (the process died while appending); a broken line
    anywhere else means the log is damaged, and that is an error.
    """
    by_row: dict[int, SampleResult] = {}
    left_out: set[int] = set()
    with path.open(encoding="utf-8") as fh:
        lines = iter(fh)
        line = next(lines, None)
        number = 0
        while line is not None:
            number += 1
            following = next(lines, None)
            if line.strip():
                try:
                    record = SampleResult.model_validate_json(line)
                except ValidationError as e:
                    if following is None and _is_cut_short(e):
                        break
                    raise ValueError(f"{path}:{number}: {e}") from e
                if max_rows is not None and record.row >= max_rows:
                    left_out.add(record.row)
                else:
                    by_row[record.row] = record
            line = following
    return [by_row[row] for row in sorted(by_row)], len(left_out)


def _is_cut_short(error: ValidationError) -> bool:
    return any(e["type"] == "json_invalid" for e in error.errors())
