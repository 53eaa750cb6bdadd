"""A label column against a metric's values: which statistics apply, and their numbers.

* binary labels: the judge's score is compared as it is (AUROC, Spearman) and, turned into a
  verdict at `threshold` (score ≥ threshold → 1), as a rater (Cohen's κ, balanced accuracy,
  accuracy, confusion matrix);
* ordinal labels: the score, clipped to [0, 1], goes to the nearest level of the label scale
  laid evenly over [0, 1] (ties to the lower level); weighted and unweighted κ, balanced
  accuracy, accuracy, confusion matrix, and Spearman on the raw score;
* continuous labels: Spearman and Pearson on the raw score.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from fractions import Fraction

from rageval.labels import LabelColumn
from rageval.log import Confusion, LabelAgreement, StatisticResult, Usage
from rageval.stats import KappaWeights, agreement, confusion_matrix

__all__ = ["judge_levels", "measure_agreement"]


def judge_levels(scores: Sequence[float], levels: Sequence[float]) -> list[float]:
    """Each score (clipped to [0, 1]) as the nearest level of `levels` spread evenly over
    [0, 1] by value; a score half-way between two levels goes to the lower one.

    The boundaries between levels are computed exactly (fractions) and rounded once to the
    nearest float: a score up to that float goes to the lower level. So a midpoint that is no
    float (1/6, 5/6 on a 1-4 scale) counts as a tie when the score is the float nearest to it,
    as 5 / 6 computed in floating point is, and the ordering of floats decides the rest."""
    ordered = sorted(levels)
    low, span = Fraction(ordered[0]), Fraction(ordered[-1]) - Fraction(ordered[0])
    positions = [(Fraction(v) - low) / span if span else Fraction(0) for v in ordered]
    # boundaries[i]: the highest score that still goes to level i
    boundaries = [float((a + b) / 2) for a, b in itertools.pairwise(positions)]
    return [ordered[bisect.bisect_left(boundaries, min(1.0, max(0.0, s)))] for s in scores]


def measure_agreement(
    labels: LabelColumn,
    metric: str,
    judge: Sequence[float | None],
    *,
    levels: Sequence[float] | None = None,
    threshold: float = 0.5,
    kappa_weights: KappaWeights = "quadratic",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    usage: Usage | None = None,
) -> LabelAgreement:
    """The agreement of `judge` (the metric's value per row, None where it has none) with
    `labels` (same rows); see the module docstring. `levels` is the label scale of a binary or
    ordinal column (default: the levels the labels use)."""
    if len(judge) != len(labels.values):
        raise ValueError(
            f"labels and judge values must be row-matched, got {len(labels.values)} and "
            f"{len(judge)}"
        )
    pairs = [
        (h, j) for h, j in zip(labels.values, judge, strict=True) if h is not None and j is not None
    ]
    human = [h for h, _ in pairs]
    scores = [j for _, j in pairs]
    kind = labels.kind
    scale = sorted(set(levels)) if levels is not None else labels.levels
    if kind == "binary":
        scale = [0.0, 1.0]
    elif kind == "ordinal":
        outside = sorted(set(human) - set(scale))
        if outside:
            raise ValueError(f"labels {outside} of {labels.name!r} are not on the scale {scale}")

    def stat(name: str, a: Sequence[float], b: Sequence[float]) -> StatisticResult:
        est = agreement(
            name,
            a,
            b,
            levels=scale if kind != "continuous" else None,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
        # the estimate's fields the log keeps, under the same names
        return StatisticResult.model_validate(est, from_attributes=True)

    statistics: dict[str, StatisticResult] = {}
    confusion: Confusion | None = None
    kappa_statistic: str | None = None
    if kind == "binary":
        verdicts = [1.0 if s >= threshold else 0.0 for s in scores]
        kappa_statistic = "cohen_kappa"
        for name in ("cohen_kappa", "balanced_accuracy", "accuracy"):
            statistics[name] = stat(name, human, verdicts)
        statistics["auroc"] = stat("auroc", human, scores)
        statistics["spearman"] = stat("spearman", human, scores)
        confusion = Confusion(
            levels=scale,
            matrix=confusion_matrix(human, verdicts, scale),
            judge_mapping=f"judge score ≥ {threshold:g} → 1, else 0",
        )
    elif kind == "ordinal":
        graded = judge_levels(scores, scale) if pairs else []
        kappa_statistic = f"weighted_kappa_{kappa_weights}"
        for name in (kappa_statistic, "cohen_kappa", "balanced_accuracy", "accuracy"):
            statistics[name] = stat(name, human, graded)
        statistics["spearman"] = stat("spearman", human, scores)
        confusion = Confusion(
            levels=scale,
            matrix=confusion_matrix(human, graded, scale),
            judge_mapping="judge score (clipped to 0..1) → nearest level of the scale "
            "spread evenly over 0..1",
        )
    else:
        statistics["spearman"] = stat("spearman", human, scores)
        statistics["pearson"] = stat("pearson", human, scores)
    return LabelAgreement(
        label_column=labels.name,
        metric=metric,
        kind=kind,
        levels=scale if kind != "continuous" else None,
        threshold=threshold if kind == "binary" else None,
        kappa_statistic=kappa_statistic,
        n_rows=len(labels.values),
        n_labelled=labels.n_labelled,
        n_pairs=len(pairs),
        n_without_judge=sum(
            h is not None and j is None for h, j in zip(labels.values, judge, strict=True)
        ),
        human_mean=sum(human) / len(human) if human else None,
        judge_mean=sum(scores) / len(scores) if scores else None,
        statistics=statistics,
        confusion=confusion,
        usage=usage or Usage(),
    )
