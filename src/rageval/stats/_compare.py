"""Comparing two runs (:func:`compare`): every metric they share, over the samples matched by id,
with :func:`paired_difference`, and the samples that moved most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rageval.stats._bootstrap import TIE_BELOW, PairedDifference, paired_difference
from rageval.stats._ppi import PPIDifference, ppi_difference


class PPIMean(Protocol):
    """A run's PPI++ mean of one label column as its summary holds it
    (:class:`rageval.log.PPISummary`): the estimate, its interval and the judge's weight λ."""

    @property
    def mean(self) -> float | None: ...

    @property
    def ci_low(self) -> float | None: ...

    @property
    def ci_high(self) -> float | None: ...

    @property
    def lam(self) -> float | None: ...


class MetricPPI(Protocol):
    """What :func:`compare` reads of a metric's summary (:class:`rageval.log.MetricSummary`):
    the PPI++ mean of each label column paired with the metric."""

    @property
    def ppi(self) -> Mapping[str, PPIMean]: ...


class Run(Protocol):
    """What :func:`compare` reads of a run (an ``EvaluationResult``, e.g. from ``load_run``):
    the sample ids by row, the metric names, a metric's values by row (None: no value), the
    summary of each metric, and a human label column's values by row (None: not labelled)."""

    @property
    def ids(self) -> Sequence[str]: ...

    @property
    def metrics(self) -> Sequence[str]: ...

    def __getitem__(self, metric: str) -> Sequence[float | None]: ...

    def summary(self) -> Mapping[str, MetricPPI]: ...

    def label_values(self, column: str) -> Sequence[float | None]: ...


@dataclass(frozen=True)
class PPIComparison:
    """The PPI++ means of one label column in both runs and their paired difference."""

    column: str
    a: PPIMean
    b: PPIMean
    diff: PPIDifference


@dataclass(frozen=True)
class MetricComparison:
    """Run B minus run A on one metric, over the samples (matched by id) measured in both."""

    metric: str
    diff: PairedDifference
    mean_a: float | None
    mean_b: float | None
    #: (id, value in A, value in B) of the samples that moved most, largest change first (a
    #: change below `TIE_BELOW` is none)
    movers: list[tuple[str, float, float]]
    #: the human-label (PPI++) means both runs report for this metric, and their difference
    ppi: list[PPIComparison] = field(default_factory=list)


def compare(a: Run, b: Run, *, top: int = 5) -> list[MetricComparison]:
    """Paired, item-matched comparison of every metric the two runs share, and of every
    human label column both runs pair with it (PPI++, :func:`ppi_difference`)."""
    pos_b = {sid: i for i, sid in enumerate(b.ids)}
    matched = [(i, pos_b[sid]) for i, sid in enumerate(a.ids) if sid in pos_b]
    summary_a, summary_b = a.summary(), b.summary()
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
        ppi_a, ppi_b = summary_a[metric].ppi, summary_b[metric].ppi
        out.append(
            MetricComparison(
                metric=metric,
                diff=diff,
                mean_a=_mean([x for _, x, _ in pairs]),
                mean_b=_mean([y for _, _, y in pairs]),
                movers=[m for m in movers[:top] if abs(m[2] - m[1]) >= TIE_BELOW],
                ppi=[
                    _compare_ppi(column, ppi_a[column], ppi_b[column], a, b, matched, xs, ys)
                    for column in ppi_a
                    if column in ppi_b
                ],
            )
        )
    return out


def _compare_ppi(
    column: str,
    pa: PPIMean,
    pb: PPIMean,
    a: Run,
    b: Run,
    matched: Sequence[tuple[int, int]],
    xs: Sequence[float | None],
    ys: Sequence[float | None],
) -> PPIComparison:
    """Both runs' PPI++ means of `column` and their difference over the matched samples,
    each run with its own λ."""
    labels_a, labels_b = a.label_values(column), b.label_values(column)
    diff = ppi_difference(
        [labels_a[i] for i, _ in matched],
        xs,
        [labels_b[j] for _, j in matched],
        ys,
        lam_a=pa.lam or 0.0,
        lam_b=pb.lam or 0.0,
    )
    return PPIComparison(column, pa, pb, diff)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
