"""``calibration.json``: the agreement of a judge's metrics with people (``rageval calibrate``).

One file per calibration run, in the run directory next to the run it scored (manifest,
results log, summary, report), versioned with the other files of the run log (it appears in
format 3, see :mod:`rageval.log._models`); it is read by :func:`rageval.log.read_calibration`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, FiniteFloat

from rageval._client._usage import Usage
from rageval.labels import LabelKind
from rageval.log._models import _LogModel, _Versioned

#: how each statistic reads, for tables and the report
STATISTIC_TITLES: dict[str, str] = {
    "cohen_kappa": "Cohen's κ",
    "weighted_kappa_linear": "weighted κ (linear)",
    "weighted_kappa_quadratic": "weighted κ (quadratic)",
    "balanced_accuracy": "balanced accuracy",
    "accuracy": "accuracy",
    "auroc": "AUROC",
    "spearman": "Spearman ρ",
    "pearson": "Pearson r",
}


class StatisticResult(_LogModel):
    """A statistic's value with its bootstrap interval (None where undefined, see `note`)."""

    value: FiniteFloat | None
    low: FiniteFloat | None
    high: FiniteFloat | None
    n: int
    #: bootstrap resamples on which the statistic was undefined (left out of the interval)
    n_undefined: int = 0
    note: str | None = None


class Confusion(_LogModel):
    """Pairs counted by (human level, judge level): `matrix[i][j]` = rows the people put at
    `levels[i]` and the judge at `levels[j]`."""

    levels: list[float]
    matrix: list[list[int]]
    #: how a judge score became a level
    judge_mapping: str


class LabelAgreement(_LogModel):
    """One label column against one metric."""

    label_column: str
    metric: str
    #: the judge of a panel whose own values these are (None: the metric's cells, a panel's
    #: mean when the run had one); written only then
    judge: str | None = Field(default=None, exclude_if=lambda v: v is None)
    kind: LabelKind
    #: the label scale of a binary or ordinal column
    levels: list[float] | None = None
    #: binary labels: a judge score at or above this counts as 1
    threshold: FiniteFloat | None = None
    #: the statistic the --min-kappa gate reads (None for continuous labels)
    kappa_statistic: str | None = None
    n_rows: int
    n_labelled: int
    #: labelled rows the judge scored: the pairs every statistic is computed on
    n_pairs: int
    #: labelled rows the metric could not score (not measured or skipped): left out
    n_without_judge: int
    human_mean: FiniteFloat | None = None
    judge_mean: FiniteFloat | None = None
    statistics: dict[str, StatisticResult]
    confusion: Confusion | None = None
    #: judge calls of this metric (shared statement extraction is in the run's total)
    usage: Usage = Field(default_factory=Usage)

    @property
    def kappa(self) -> StatisticResult | None:
        if self.kappa_statistic is None:
            return None
        return self.statistics.get(self.kappa_statistic)


class LabelledRunReport(_Versioned):
    """What a run on labelled rows (a calibration, an alignment) records of itself first: the
    rageval that ran it, when, on what data, with which judge and embeddings, and where."""

    rageval_version: str
    created_at: str
    data_source: str | None = None
    n_rows: int
    judge: dict[str, Any] | None = None
    embeddings: str | None = None
    run_dir: str | None = None


def usage_line(run: str, usage: Usage) -> str:
    """The last line of a report's table: the `run`'s requests, tokens, cost and cache hits."""
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return f"{run} run: {usage.requests:,} requests, {usage.total_tokens:,} tokens, cost {cost}" + (
        f" ({usage.cache_hits:,} judge calls answered from the cache)" if usage.cache_hits else ""
    )


class CalibrationReport(LabelledRunReport):
    """Everything `rageval calibrate` measured: one agreement per (label column, metric)."""

    confidence: FiniteFloat
    interval_method: str
    agreements: list[LabelAgreement]
    #: a judge panel's run: each judge's own agreement, beside the panel's in `agreements`
    #: (the --min-kappa gate reads those); written only then
    judge_agreements: list[LabelAgreement] = Field(default_factory=list, exclude_if=lambda v: not v)
    #: the whole calibration run, shared work and embeddings included
    usage: Usage = Field(default_factory=Usage)
    #: the --min-kappa gate, if one was set, and why each failing agreement failed it
    min_kappa: FiniteFloat | None = None
    gate_failures: list[str] = Field(default_factory=list)

    # ------------------------------------------------------------------ reading
    def below_kappa(self, min_kappa: float) -> list[str]:
        """Why each agreement with a κ fails `κ ≥ min_kappa` (empty: all pass)."""
        failed = []
        for a in self.agreements:
            kappa = a.kappa
            if a.kappa_statistic is None or kappa is None:
                continue
            title = STATISTIC_TITLES[a.kappa_statistic]
            if kappa.value is None:
                failed.append(
                    f"{a.metric} vs {a.label_column}: {title} undefined ({kappa.note}) "
                    f"(gate {min_kappa})"
                )
            elif kappa.value < min_kappa:
                failed.append(
                    f"{a.metric} vs {a.label_column}: {title} {kappa.value:.3f} < {min_kappa}"
                )
        return failed

    def table(self) -> str:
        """Plain text: one block per agreement, each statistic with its interval, the
        confusion matrix, and the run's usage."""
        pct = f"{self.confidence:.0%}"
        blocks = []
        panel = " (the panel's mean)" if self.judge_agreements else ""
        for a in [*self.agreements, *self.judge_agreements]:
            who = f"{a.metric} by {a.judge}" if a.judge is not None else a.metric + panel
            head = f"{who} vs {a.label_column} ({a.kind} labels): {a.n_pairs} pairs" + (
                f", {a.n_without_judge} labelled rows not scored" if a.n_without_judge else ""
            )
            rows = [("statistic", "value", f"{pct} CI")]
            for name, s in a.statistics.items():
                ci = "-" if s.low is None or s.high is None else f"[{s.low:.3f}, {s.high:.3f}]"
                value = "-" if s.value is None else f"{s.value:.3f}"
                rows.append((STATISTIC_TITLES.get(name, name), value, ci + _note(s)))
            widths = [max(len(r[i]) for r in rows) for i in range(2)]
            lines = [head]
            lines += [
                f"  {r[0].ljust(widths[0])}  {r[1].rjust(widths[1])}  {r[2]}".rstrip() for r in rows
            ]
            if a.confusion is not None:
                lines.append("  " + _confusion_text(a.confusion).replace("\n", "\n  "))
            blocks.append("\n".join(lines))
        blocks.append(usage_line("calibration", self.usage))
        return "\n\n".join(blocks)


def _note(s: StatisticResult) -> str:
    return f"  ({s.note})" if s.note else ""


def _level(value: float) -> str:
    return f"{value:g}"


def _confusion_text(c: Confusion) -> str:
    labels = [_level(v) for v in c.levels]
    width = max(len(x) for x in [*labels, *(str(n) for row in c.matrix for n in row)])
    head = "human \\ judge".ljust(14) + " ".join(x.rjust(width) for x in labels)
    lines = [f"confusion ({c.judge_mapping}):", head]
    for label, row in zip(labels, c.matrix, strict=True):
        lines.append(label.ljust(14) + " ".join(str(n).rjust(width) for n in row))
    return "\n".join(lines)
