"""calibrate() / acalibrate(): score rows that carry human labels, and measure the agreement.

The rows go through the normal evaluation (validation before spend, the request cache, usage
and cost, a run directory with its report), then each (label column, metric) pair is compared
by :mod:`rageval.calibration`. Every label is read and checked before the first judge request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval._rundir_lock import one_writer
from rageval._sync import synchronous
from rageval._version import __version__
from rageval.calibration._agreement import measure_agreement
from rageval.errors import RunConfigError
from rageval.labels import LabelColumn, LabelKind, read_label_column
from rageval.log import CALIBRATION_FILE, CalibrationReport, LabelAgreement, Usage, write_atomic
from rageval.metrics.base import Metric
from rageval.runner._evaluate import aevaluate
from rageval.runner._prepare import LabelsArg, OnInvalid, RunSpec, label_pairs, load_data
from rageval.runner._runconfig import (
    RunConfig,
    RunKeywords,
    refuse_unknown_keywords,
    run_config,
)
from rageval.runner._rundir import RunDir
from rageval.runner._session import _write_report
from rageval.samples import InvalidDataError, LoadedData, RowProblem, sample_ids
from rageval.stats import KappaWeights

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.results import EvaluationResult
    from rageval.runner._panel import Panel


def _metrics_of(pairs: Sequence[tuple[str, str | Metric]]) -> list[str | Metric]:
    """Each metric once (by name), in order; two different objects with one name are refused."""
    chosen: dict[str, str | Metric] = {}
    for _, metric in pairs:
        name = metric if isinstance(metric, str) else metric.name
        known = chosen.get(name)
        if isinstance(known, Metric) and isinstance(metric, Metric) and metric is not known:
            raise RunConfigError(f"two different {name!r} metric objects in labels=")
        if known is None or isinstance(metric, Metric):  # an object wins over its name
            chosen[name] = metric
    return list(chosen.values())


@dataclass(frozen=True)
class LabelledData:
    """Rows read with their label columns, each label checked (:func:`read_labels`)."""

    loaded: LoadedData
    ids: list[str]
    columns: dict[str, LabelColumn]


@dataclass(frozen=True)
class AgreementOptions:
    """How calibrate and align measure every agreement: the weights of the weighted κ and the
    percentile bootstrap's level, resamples and seed (checked when made)."""

    kappa_weights: KappaWeights
    confidence: float
    n_resamples: int
    seed: int

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise RunConfigError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.kappa_weights not in ("linear", "quadratic"):
            raise RunConfigError(
                f"kappa_weights is 'linear' or 'quadratic', got {self.kappa_weights!r}"
            )

    def measure(
        self,
        labels: LabelColumn,
        metric: str,
        values: Sequence[float | None],
        *,
        levels: Sequence[float] | None,
        threshold: float,
        usage: Usage | None = None,
    ) -> LabelAgreement:
        """The agreement of the metric's `values` with `labels`
        (:func:`~rageval.calibration.measure_agreement`, whose keywords of the same names these
        options are)."""
        return measure_agreement(
            labels,
            metric,
            values,
            levels=levels,
            threshold=threshold,
            usage=usage,
            **dataclasses.asdict(self),
        )


def labelled_spec(spec: RunSpec) -> RunSpec:
    """`spec` with data that can be read twice (the labels first, then the evaluation)."""
    data = spec.data
    return dataclasses.replace(spec, data=list(data) if isinstance(data, Iterator) else data)


def read_labels(
    spec: RunSpec,
    pairs: Sequence[tuple[str, str | Metric]],
    label_kinds: Mapping[str, LabelKind] | None,
    label_levels: Mapping[str, Sequence[float]] | None,
) -> LabelledData:
    """The rows of the run `spec` describes and the label columns `pairs` name, every label
    read and checked before any request: InvalidDataError names each bad row and column,
    RunConfigError a `label_kinds` / `label_levels` entry for a column the pairs do not
    name."""
    unknown = set(label_kinds or {}) | set(label_levels or {})
    unknown -= {column for column, _ in pairs}
    if unknown:
        raise RunConfigError(f"label_kinds/label_levels name columns not in labels=: {unknown}")
    loaded = load_data(spec)
    ids = sample_ids(loaded.samples)
    columns: dict[str, LabelColumn] = {}
    problems: list[RowProblem] = []
    for column in dict.fromkeys(c for c, _ in pairs):
        try:
            columns[column] = read_label_column(
                loaded.samples,
                ids,
                column,
                kind=(label_kinds or {}).get(column),
                source=loaded.source,
                line=loaded.line,
            )
        except InvalidDataError as e:
            problems.extend(e.problems)
    for column, scale in (label_levels or {}).items():
        found = columns.get(column)
        if found is not None and found.kind == "continuous":
            problems.append(RowProblem(None, column, "continuous labels have no levels"))
        elif found is not None and set(found.levels) - set(scale):
            outside = sorted(set(found.levels) - set(scale))
            problems.append(
                RowProblem(None, column, f"labels {outside} are not among the levels {scale}")
            )
    if problems:
        raise InvalidDataError(problems, source=loaded.source)
    return LabelledData(loaded, ids, columns)


@one_writer  # held from the evaluation it runs to calibration.json and the report
async def acalibrate(
    data: Any,
    labels: LabelsArg,
    llm: Judge | str | Sequence[Judge] | Panel | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    label_kinds: Mapping[str, LabelKind] | None = None,
    label_levels: Mapping[str, Sequence[float]] | None = None,
    threshold: float = 0.5,
    kappa_weights: KappaWeights = "quadratic",
    min_kappa: float | None = None,
    column_map: Mapping[str, str] | None = None,
    metric_params: Mapping[str, Mapping[str, Any]] | None = None,
    on_invalid: OnInvalid | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    config: RunConfig | None = None,
    **run: Unpack[RunKeywords],
) -> CalibrationReport:
    """How well each metric agrees with the human labels in `data`; see docs/calibration.md.

    Args:
        data: the rows, as :func:`rageval.evaluate` takes them, with the label columns.
        labels: label columns (extra columns of the data, e.g. ``human_correct``) paired with
            the metric each one validates: ``{"human_correct": "answer_accuracy"}``.
        llm: the judge, as :func:`rageval.evaluate` takes it.
        embeddings: the embeddings, as :func:`rageval.evaluate` takes them.
        label_kinds: a label's kind (binary, ordinal, continuous), else inferred from its
            values.
        label_levels: an ordinal column's whole scale, when some level was never used.
        threshold: binary labels compare the judge's verdict ``score >= threshold``.
        kappa_weights: the weighting of ordinal labels' κ.
        min_kappa: a gate: every agreement that has a κ (binary and ordinal labels) must reach
            it; failures are listed in ``gate_failures``.
        column_map: as :func:`rageval.evaluate`'s.
        metric_params: configures the metrics named in `labels` (by name, as
            :func:`rageval.evaluate`'s: e.g. the configuration ``rageval align`` chose), so the
            agreement measured is that of the configuration that will score.
        on_invalid: as :func:`rageval.evaluate`'s.
        confidence: the level of the intervals, percentile bootstraps over the labelled rows.
        n_resamples: the bootstrap's resamples.
        seed: the bootstrap's seed.
        config: how the run executes (`run_dir`, `resume`, `max_cost`, `batch`, `engine`,
            `observers`...), a :class:`~rageval.runner.RunConfig`, as :func:`rageval.evaluate`
            takes it; with `run_dir` the run directory also gets ``calibration.json`` and a
            calibration section in its report.
        **run: the RunConfig's fields as keywords, instead of `config`.
    """
    refuse_unknown_keywords(acalibrate, run)
    config = run_config(config, run)
    run_dir = config.run_dir
    options = AgreementOptions(kappa_weights, confidence, n_resamples, seed)
    pairs = label_pairs(labels)
    spec = labelled_spec(
        RunSpec(data, _metrics_of(pairs), llm, embeddings, column_map, metric_params, on_invalid)
    )
    labelled = read_labels(spec, pairs, label_kinds, label_levels)
    loaded, columns = labelled.loaded, labelled.columns
    if min_kappa is not None and all(columns[c].kind == "continuous" for c, _ in pairs):
        raise RunConfigError(
            "min_kappa gates Cohen's κ, which binary or ordinal labels have; these labels are "
            "continuous (their agreement is a correlation)"
        )

    result = await aevaluate(spec, config=config)
    summary = result.summary()
    named = [(c, m if isinstance(m, str) else m.name) for c, m in pairs]

    def agreement(
        column: str, name: str, values: Sequence[float | None], usage: Usage | None = None
    ) -> LabelAgreement:
        """`values` against the labels of `column`, measured as every agreement here is."""
        levels = (label_levels or {}).get(column)
        return options.measure(
            columns[column], name, values, levels=levels, threshold=threshold, usage=usage
        )

    agreements = [
        agreement(column, name, result[name], summary[name].usage) for column, name in named
    ]
    # a panel's run: each judge's own values against the labels too
    judge_agreements = [
        agreement(column, name, values).model_copy(update={"judge": judge})
        for column, name in named
        for judge, values in _judge_values(result, name).items()
    ]
    report = CalibrationReport(
        rageval_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        data_source=loaded.source,
        n_rows=len(loaded.samples),
        judge=result.judge,
        embeddings=result.embeddings,
        run_dir=str(run_dir) if run_dir is not None else None,
        confidence=confidence,
        interval_method=(
            f"percentile bootstrap over the labelled rows, {n_resamples} resamples, seed {seed}"
        ),
        agreements=agreements,
        judge_agreements=judge_agreements,
        usage=result.usage,
    )
    if min_kappa is not None:
        report = report.model_copy(
            update={"min_kappa": min_kappa, "gate_failures": report.below_kappa(min_kappa)}
        )
    if run_dir is not None:
        write_atomic(Path(run_dir) / CALIBRATION_FILE, report)
        _write_report(RunDir(run_dir))
    return report


def _judge_values(result: EvaluationResult, metric: str) -> dict[str, list[float | None]]:
    """Each panel judge's own values of `metric` by row (empty without a panel)."""
    cells = result.cells(metric)
    judges = dict.fromkeys(j for c in cells if c is not None and c.panel for j in c.panel)
    return {
        judge: [
            v.value if c is not None and c.panel and (v := c.panel.get(judge)) else None
            for c in cells
        ]
        for judge in judges
    }


calibrate = synchronous(
    acalibrate,
    "calibrate",
    """Synchronous :func:`acalibrate`. Inside a running event loop (Jupyter) it runs on a
    private loop in a worker thread.""",
)


__all__ = ["acalibrate", "calibrate"]
