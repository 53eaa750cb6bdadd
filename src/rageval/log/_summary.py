"""Aggregating cells into a run's summary: the one implementation the runner's summary.json,
``EvaluationResult.summary()`` and the report of a run without a summary all use.

Sums of usage are exact (``math.fsum`` of the costs), so they do not depend on the order of
the cells: a summary built from a result's columns and one built while streaming the log give
the same totals to the last bit. A cost that is unknown anywhere makes the sum unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rageval._client._usage import Usage, sum_usage
from rageval.errors import CauseKind
from rageval.log._models import (
    UNKNOWN_KIND,
    CauseExample,
    Cell,
    FailureGroup,
    FlipSummary,
    JudgeNoiseSummary,
    MetricSummary,
    PanelSummary,
    PanelVote,
    PPISummary,
    SampleLine,
    Summary,
)
from rageval.metrics._statements import SHARED_TAG

#: the summary's label for statement extraction, done once per sample for several metrics
SHARED_USAGE = SHARED_TAG
#: the summary's label for the usage of remote embeddings (not split by metric)
EMBEDDINGS_USAGE = "embeddings"
#: the summary's label for what rows a stopped run had not finished used: paid for, in no line
UNFINISHED_USAGE = "unfinished rows"
#: example causes kept per group of failures, and sample ids kept per example
MAX_EXAMPLES = 3
MAX_EXAMPLE_IDS = 3


class FailureTally:
    """Cells of one metric without a value, by (status, kind, cause), with their first ids."""

    __slots__ = ("_causes",)

    def __init__(self) -> None:
        # (status, kind, cause) -> [count, first sample ids]
        self._causes: dict[tuple[str, str, str], list[Any]] = {}

    def add(self, status: str, kind: str | None, cause: str | None, sample_id: str) -> None:
        key = (status, kind or UNKNOWN_KIND, cause or "no cause given")
        entry = self._causes.get(key)
        if entry is None:
            self._causes[key] = [1, [sample_id]]
            return
        entry[0] += 1
        if len(entry[1]) < MAX_EXAMPLE_IDS:
            entry[1].append(sample_id)

    def groups(self) -> list[FailureGroup]:
        """One group per (status, kind), largest first, each with its most frequent causes."""
        by_group: dict[tuple[str, str], list[tuple[str, int, list[str]]]] = {}
        for (status, kind, cause), (count, ids) in self._causes.items():
            by_group.setdefault((status, kind), []).append((cause, count, ids))
        groups = []
        for (status, kind), causes in by_group.items():
            causes.sort(key=lambda c: -c[1])  # stable: equal counts keep their first-seen order
            groups.append(
                FailureGroup(
                    status=status,  # type: ignore[arg-type]  # only ever a cell status
                    kind=kind,  # type: ignore[arg-type]  # a CauseKind, or "unknown"
                    count=sum(c[1] for c in causes),
                    examples=[
                        CauseExample(cause=cause, count=count, sample_ids=ids)
                        for cause, count, ids in causes[:MAX_EXAMPLES]
                    ],
                )
            )
        groups.sort(key=lambda g: -g.count)
        return groups


class MetricTally:
    """One metric's cells, added one at a time: counts, usage, failures and the plain mean."""

    __slots__ = ("_usages", "_values", "failures", "n_measured", "n_not_measured", "n_skipped")

    def __init__(self) -> None:
        self.n_measured = self.n_not_measured = self.n_skipped = 0
        self._values: list[float] = []
        self._usages: list[Usage] = []
        self.failures = FailureTally()

    def add(
        self,
        status: str,
        value: float | None,
        cause: str | None,
        kind: CauseKind | None,
        usage: Usage | None,
        sample_id: str,
    ) -> None:
        if status == "ok":
            self.n_measured += 1
            assert value is not None
            self._values.append(value)
        else:
            if status == "not_measured":
                self.n_not_measured += 1
            else:
                self.n_skipped += 1
            self.failures.add(status, kind, cause, sample_id)
        if usage is not None:
            self._usages.append(usage)

    def add_cell(self, cell: Cell, sample_id: str) -> None:
        self.add(cell.status, cell.value, cell.cause, cell.cause_kind, cell.usage, sample_id)

    def summary(
        self,
        *,
        mean: float | None = None,
        ci: tuple[float | None, float | None, str] | None = None,
        ppi: Mapping[str, PPISummary] | None = None,
        judge_noise: JudgeNoiseSummary | None = None,
        ci_undefined: str | None = None,
        panel: PanelSummary | None = None,
        flips: FlipSummary | None = None,
    ) -> MetricSummary:
        """The summary; without `ci` the mean is the plain mean of the values and there is
        no interval (a report of a run whose summary was never written). The PPI++ means of
        human labels and the judge noise, like the interval, need every value at once: the
        caller computes them."""
        if ci is None:
            mean = math.fsum(self._values) / len(self._values) if self._values else None
        low, high, method = ci if ci is not None else (None, None, None)
        return MetricSummary(
            mean=mean,
            ci_low=low,
            ci_high=high,
            ci_method=method,
            ci_undefined=ci_undefined,
            n_measured=self.n_measured,
            n_not_measured=self.n_not_measured,
            n_skipped=self.n_skipped,
            usage=sum_usage(self._usages),
            failures=self.failures.groups(),
            ppi=dict(ppi or {}),
            judge_noise=judge_noise,
            panel=panel,
            flips=flips,
        )


def panel_summary(votes: Iterable[Mapping[str, PanelVote]]) -> PanelSummary | None:
    """How far a panel's judges agree on one metric, from each row's votes (None without a
    panel): Krippendorff's α at the interval level, the judges as coders, a judge that did not
    measure a row a gap; and each judge's mean."""
    from rageval.stats import krippendorff_alpha

    rows = list(votes)
    if not rows:
        return None
    judges = list(dict.fromkeys(name for row in rows for name in row))
    table = [[_vote_value(row.get(j)) for j in judges] for row in rows]
    alpha = krippendorff_alpha(table, level="interval")
    means: dict[str, float | None] = {}
    for i, judge in enumerate(judges):
        values = [v for row in table if (v := row[i]) is not None]
        means[judge] = math.fsum(values) / len(values) if values else None
    return PanelSummary(
        judges=judges,
        level="interval",
        alpha=alpha.value,
        alpha_ci_low=alpha.low,
        alpha_ci_high=alpha.high,
        n_units=alpha.n,
        confidence=alpha.confidence,
        method=alpha.method,
        note=alpha.note,
        judge_means=means,
    )


def _vote_value(vote: PanelVote | None) -> float | None:
    return vote.value if vote is not None and vote.status == "ok" else None


def flip_summary(scorings: Iterable[Sequence[float]], threshold: float) -> FlipSummary | None:
    """How often a cell's pass/fail flips across its scorings (each cell's, or in a panel
    each judge's, measured scores); None when no cell was scored twice."""
    from rageval.stats import flip_rate

    flips = flip_rate(list(scorings), threshold)
    if not flips.n_cells:
        return None
    return FlipSummary(
        rate=flips.rate, n_cells=flips.n_cells, n_flipped=flips.n_flipped, threshold=threshold
    )


def pass_threshold(params: Mapping[str, Any] | None) -> float:
    """The value at or above which a metric's cell passes, for its flip rate: its own
    ``threshold`` parameter when it has one, else 0.5 (the middle of a [0, 1] score)."""
    given = (params or {}).get("threshold")
    if isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given):
        return float(given)
    return 0.5


def build_summary(
    metrics: Mapping[str, MetricSummary],
    *,
    shared: Mapping[str, Usage],
    duration_s: float | None,
    n_rows: int | None,
    n_finished: int,
) -> Summary:
    """The summary of a run: its metrics, the usage of work no metric owns (shared work,
    remote embeddings; zero entries left out) and the total of both."""
    shared = {label: u for label, u in shared.items() if u != _ZERO}
    total = sum_usage([*(s.usage for s in metrics.values()), *shared.values()])
    return Summary(
        metrics=dict(metrics),
        usage=total,
        shared_usage=shared,
        duration_s=duration_s,
        n_rows=n_rows,
        n_finished=n_finished,
    )


_ZERO = Usage()


class RunTally:
    """A run summed up line by line while its log is read, for a run whose summary.json was
    never written (it was killed): the same numbers ``load_run(...).summary()`` gives, except
    the confidence intervals, which need every value at once."""

    def __init__(self, metric_names: Iterable[str]) -> None:
        self.metrics = {name: MetricTally() for name in metric_names}
        self._shared: list[Usage] = []
        self._embeddings: list[Usage] = []
        self.n_finished = 0

    def add(self, line: SampleLine) -> None:
        self.n_finished += 1
        for name, cell in line.cells.items():
            tally = self.metrics.get(name)
            if tally is None:
                tally = self.metrics[name] = MetricTally()
            tally.add_cell(cell, line.id)
        self._shared.append(line.shared_usage)
        if line.embeddings_usage is not None:
            self._embeddings.append(line.embeddings_usage)

    def summary(self, *, n_rows: int | None) -> Summary:
        return build_summary(
            {name: t.summary() for name, t in self.metrics.items()},
            shared={
                SHARED_USAGE: sum_usage(self._shared),
                EMBEDDINGS_USAGE: sum_usage(self._embeddings),
            },
            duration_s=None,
            n_rows=n_rows,
            n_finished=self.n_finished,
        )
