"""Agreement between people and a judge (used by :mod:`rageval.calibration`): Cohen's κ
(unweighted, or linearly / quadratically weighted for ordinal scales), balanced accuracy,
accuracy, AUROC, Spearman's and Pearson's correlation, and the confusion matrix. Each statistic
is computed from how many times each distinct (human, judge) pair occurs, so one vectorised
code path gives the value (the observed counts) and every bootstrap resample (counts of a
resample of the rows, drawn with replacement); :func:`agreement` returns the value with its
percentile-bootstrap interval, and :func:`agreement_difference` how much a statistic changes
from one judge to another on the same rows, with a paired interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

from rageval.stats._resampling import (
    TIE_TOLERANCE,
    check_resampling,
    chunk_sizes,
    finite_array,
    percentile_interval,
)

KappaWeights = Literal["linear", "quadratic"]
#: the statistics :func:`agreement` computes, by name
AGREEMENT_STATISTICS = (
    "cohen_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "balanced_accuracy",
    "accuracy",
    "auroc",
    "spearman",
    "pearson",
)
# A bootstrap interval is only given when the statistic is defined on at least this share of
# the resamples (e.g. AUROC needs both classes in a resample): otherwise it would describe
# the lucky resamples only.
_MIN_DEFINED_SHARE = 0.9


@dataclass(frozen=True)
class Estimate:
    """One statistic of n (human, judge) pairs with its percentile-bootstrap interval.

    `value` is None when the statistic is undefined on these pairs (`note` says why); `low` and
    `high` are None when it is undefined on more than 10% of the resamples; `n_undefined`
    resamples were left out of the interval."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float
    method: str
    n_undefined: int = 0
    note: str | None = None


@dataclass(frozen=True)
class _Counted:
    """n paired rows reduced to m distinct units (pairs, or score levels x class) and a
    vectorised statistic of how many times each unit is counted: `compute(W)` maps a
    (resamples, m) array of counts to one value per resample (NaN where undefined)."""

    unit_of_row: npt.NDArray[np.intp]
    m: int
    compute: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
    #: why the statistic is undefined when the observed counts give NaN
    undefined_because: str
    #: each row's weight (an inverse selection probability): a row counts that many times
    row_weight: npt.NDArray[np.float64] | None = None

    def observed(self) -> float | None:
        import numpy as np

        counts = np.bincount(self.unit_of_row, self.row_weight, minlength=self.m)
        value = float(self.compute(counts.astype(np.float64)[None, :])[0])
        return value if math.isfinite(value) else None

    def resampled(self, n_resamples: int, seed: int) -> npt.NDArray[np.float64]:
        """The statistic on `n_resamples` resamples of the rows (drawn with replacement)."""
        return _resampled([self], n_resamples, seed)[0]

    def on_rows(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """The statistic on each resample of a (resamples, n) array of row indices."""
        import numpy as np

        size = rows.shape[0]
        units = self.unit_of_row[rows]
        units += (np.arange(size, dtype=np.intp) * self.m)[:, None]
        weights = None if self.row_weight is None else self.row_weight[rows].ravel()
        counts = np.bincount(units.ravel(), weights, minlength=size * self.m)
        counts = counts.reshape(size, self.m)
        return self.compute(counts.astype(np.float64))


def _resampled(
    statistics: Sequence[_Counted], n_resamples: int, seed: int
) -> list[npt.NDArray[np.float64]]:
    """Each of `statistics` (of the same n rows) on the same `n_resamples` resamples of the
    rows: paired, so that their differences are resampled too."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(statistics[0].unit_of_row)
    out = [np.empty(n_resamples, dtype=np.float64) for _ in statistics]
    start = 0
    for size in chunk_sizes(n_resamples, max(n, *(s.m for s in statistics))):
        rows = rng.integers(0, n, size=(size, n))
        for values, statistic in zip(out, statistics, strict=True):
            values[start : start + size] = statistic.on_rows(rows)
        start += size
    return out


def _pair_arrays(
    human: Sequence[float], judge: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    if len(human) != len(judge):
        raise ValueError(
            f"human and judge values must be paired (same length), got {len(human)} and "
            f"{len(judge)}"
        )
    return finite_array(human, "human values"), finite_array(judge, "judge values")


def _level_index(
    values: npt.NDArray[np.float64], levels: npt.NDArray[np.float64], what: str
) -> npt.NDArray[np.intp]:
    import numpy as np

    idx = np.searchsorted(levels, values)
    idx = np.minimum(idx, len(levels) - 1)
    bad = levels[idx] != values
    if bad.any():
        first = int(np.argmax(bad))
        raise ValueError(
            f"{what} value {values[first]:g} (pair {first}) is not one of the levels "
            f"{[float(v) for v in levels]}"
        )
    return idx.astype(np.intp)


def _levels(
    human: npt.NDArray[np.float64],
    judge: npt.NDArray[np.float64],
    levels: Sequence[float] | None,
) -> npt.NDArray[np.float64]:
    import numpy as np

    if levels is None:
        return np.unique(np.concatenate([human, judge]))
    ordered = np.asarray(sorted(float(v) for v in levels), dtype=np.float64)
    if len(np.unique(ordered)) != len(ordered):
        raise ValueError(f"levels must be distinct, got {list(levels)}")
    return ordered


def _categorical(
    human: Sequence[float],
    judge: Sequence[float],
    levels: Sequence[float] | None,
    compute: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    undefined_because: str,
) -> tuple[_Counted, npt.NDArray[np.float64]]:
    """Pairs of category levels as cells of a k x k table (unit = human * k + judge);
    `compute` receives the tables as a (resamples, k, k) array."""
    h, j = _pair_arrays(human, judge)
    lv = _levels(h, j, levels)
    k = len(lv)
    units = _level_index(h, lv, "human") * k + _level_index(j, lv, "judge")

    def on_tables(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return compute(w.reshape(len(w), k, k))

    return _Counted(units, k * k, on_tables, undefined_because), lv


def _kappa_of_tables(
    weights: KappaWeights | None,
) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]:
    """κ = 1 − Σ w·observed / Σ w·expected, expected = the product of the two raters'
    marginal shares; disagreement weights 1 off the diagonal (Cohen), |i−j| or (i−j)²."""
    import numpy as np

    def compute(tables: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        k = tables.shape[1]
        i, j = np.indices((k, k))
        if weights is None:
            w = (i != j).astype(np.float64)
        elif weights == "linear":
            w = np.abs(i - j).astype(np.float64)
        else:
            w = ((i - j) ** 2).astype(np.float64)
        total = tables.sum(axis=(1, 2))
        observed = tables / total[:, None, None]
        expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
        disagreement = (w * observed).sum(axis=(1, 2))
        chance = (w * expected).sum(axis=(1, 2))
        with np.errstate(divide="ignore", invalid="ignore"):
            out: npt.NDArray[np.float64] = np.where(chance > 0, 1.0 - disagreement / chance, np.nan)
        return out

    return compute


def _balanced_accuracy_of_tables(
    tables: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Mean over the human classes present of the share the judge put in the same class."""
    import numpy as np

    per_class = tables.sum(axis=2)
    hits = np.diagonal(tables, axis1=1, axis2=2)
    present = per_class > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(present, hits / per_class, 0.0)
        out: npt.NDArray[np.float64] = recall.sum(axis=1) / present.sum(axis=1)
    return out


def _accuracy_of_tables(tables: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    import numpy as np

    out: npt.NDArray[np.float64] = np.trace(tables, axis1=1, axis2=2) / tables.sum(axis=(1, 2))
    return out


def _auroc_counted(labels: Sequence[float], scores: Sequence[float]) -> _Counted:
    """Units: (distinct score, class) in rising score order. AUROC = P(score of a positive >
    score of a negative) + ½ P(tie): each positive counts the negatives below its score and
    half of those at its score."""
    import numpy as np

    y, s = _pair_arrays(labels, scores)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("AUROC needs binary human labels (0 or 1)")
    levels, level_of_row = np.unique(s, return_inverse=True)
    u = len(levels)
    units = level_of_row.astype(np.intp) * 2 + y.astype(np.intp)

    def compute(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        by_level = w.reshape(len(w), u, 2)
        neg, pos = by_level[:, :, 0], by_level[:, :, 1]
        below = np.cumsum(neg, axis=1) - neg
        wins = (pos * (below + 0.5 * neg)).sum(axis=1)
        pairs = pos.sum(axis=1) * neg.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: npt.NDArray[np.float64] = np.where(pairs > 0, wins / pairs, np.nan)
        return out

    return _Counted(units, 2 * u, compute, "the human labels hold only one class")


class _MidRanks:
    """Ranks of units among the counted units, ties sharing the mean of their ranks. `group`
    numbers each unit's distinct value in rising order (every number used)."""

    def __init__(self, group: npt.NDArray[np.intp]) -> None:
        import numpy as np

        self.group = group
        self.order = np.argsort(group, kind="stable")
        sorted_groups = group[self.order]
        self.starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])

    def __call__(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """`w` (resamples, m) counts -> (resamples, m) mid-ranks."""
        import numpy as np

        per_group = np.add.reduceat(w[:, self.order], self.starts, axis=1)
        below = np.cumsum(per_group, axis=1) - per_group
        mid = below + (per_group + 1.0) / 2.0
        out: npt.NDArray[np.float64] = mid[:, self.group]
        return out


def _correlation_counted(x: Sequence[float], y: Sequence[float], *, ranks: bool) -> _Counted:
    """Units: the distinct (x, y) pairs. Pearson's r of the values, or (Spearman's ρ) of their
    mid-ranks, each unit weighted by how many times it is counted."""
    import numpy as np

    a, b = _pair_arrays(x, y)
    pairs, unit_of_row = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    unit_of_row = unit_of_row.reshape(-1).astype(np.intp)
    rank_x = _MidRanks(np.unique(pairs[:, 0], return_inverse=True)[1].astype(np.intp))
    rank_y = _MidRanks(np.unique(pairs[:, 1], return_inverse=True)[1].astype(np.intp))

    def compute(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        if ranks:
            rx, ry = rank_x(w), rank_y(w)
        else:
            rx = np.broadcast_to(pairs[:, 0], w.shape)
            ry = np.broadcast_to(pairs[:, 1], w.shape)
        total = w.sum(axis=1, keepdims=True)
        dx = rx - (w * rx).sum(axis=1, keepdims=True) / total
        dy = ry - (w * ry).sum(axis=1, keepdims=True) / total
        cov = (w * dx * dy).sum(axis=1)
        spread = np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(spread > 0, cov / spread, np.nan)
        out: npt.NDArray[np.float64] = np.clip(r, -1.0, 1.0)
        return out

    return _Counted(unit_of_row, len(pairs), compute, "one side has a single value")


def _counted(
    statistic: str,
    human: Sequence[float],
    judge: Sequence[float],
    levels: Sequence[float] | None,
) -> _Counted:
    one_class = "the pairs fall in one category only"
    if statistic == "cohen_kappa":
        return _categorical(human, judge, levels, _kappa_of_tables(None), one_class)[0]
    if statistic in ("weighted_kappa_linear", "weighted_kappa_quadratic"):
        weights: KappaWeights = "linear" if statistic.endswith("linear") else "quadratic"
        return _categorical(human, judge, levels, _kappa_of_tables(weights), one_class)[0]
    if statistic == "balanced_accuracy":
        return _categorical(human, judge, levels, _balanced_accuracy_of_tables, one_class)[0]
    if statistic == "accuracy":
        return _categorical(human, judge, levels, _accuracy_of_tables, one_class)[0]
    if statistic == "auroc":
        return _auroc_counted(human, judge)
    if statistic in ("spearman", "pearson"):
        return _correlation_counted(human, judge, ranks=statistic == "spearman")
    raise ValueError(f"unknown statistic {statistic!r}; known: {', '.join(AGREEMENT_STATISTICS)}")


def agreement(
    statistic: str,
    human: Sequence[float],
    judge: Sequence[float],
    *,
    levels: Sequence[float] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    row_weights: Sequence[float] | None = None,
) -> Estimate:
    """`statistic` (one of :data:`AGREEMENT_STATISTICS`) of the paired `human` and `judge`
    values, with a percentile-bootstrap interval over the pairs (resampled with replacement).

    Categorical statistics (κ, balanced accuracy, accuracy) take both sides as category levels
    (`levels`: their order, needed by the weighted κ; default the sorted values seen). AUROC
    takes human labels 0/1 and judge scores. Spearman and Pearson take any numbers.
    `row_weights` (one per pair, positive: 1/π of rows chosen with probability π) counts each
    pair that many times, so the statistic is that of the rows the chosen ones stand for;
    every statistic but Spearman's (whose ranks need whole counts) takes them.
    """
    check_resampling(confidence, n_resamples)
    counted = _counted(statistic, human, judge, levels)
    if row_weights is not None:
        counted = _weighted(counted, statistic, row_weights)
    n = len(counted.unit_of_row)
    method = f"percentile bootstrap over pairs, {n_resamples} resamples, seed {seed}"
    if n == 0:
        return Estimate(None, None, None, 0, confidence, method, note="no pairs")
    value = counted.observed()
    if value is None:
        return Estimate(None, None, None, n, confidence, method, note=counted.undefined_because)
    draws = counted.resampled(n_resamples, seed)
    return _bootstrapped(value, draws, n, confidence, method)


def _weighted(counted: _Counted, statistic: str, row_weights: Sequence[float]) -> _Counted:
    import dataclasses

    import numpy as np

    if statistic == "spearman":
        raise ValueError("spearman takes no row weights (its mid-ranks need whole counts)")
    weights = finite_array(row_weights, "row weights")
    if len(weights) != len(counted.unit_of_row):
        raise ValueError(
            f"one row weight per pair: got {len(weights)} for {len(counted.unit_of_row)} pairs"
        )
    if np.any(weights <= 0):
        raise ValueError("row weights must be positive")
    return dataclasses.replace(counted, row_weight=weights)


def agreement_difference(
    statistic: str,
    human: Sequence[float],
    before: Sequence[float],
    after: Sequence[float],
    *,
    levels: Sequence[float] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """How much `statistic` (as :func:`agreement` reads it) changes from judge `before` to
    judge `after` on the same rows: statistic(human, after) − statistic(human, before), with
    a **paired** percentile-bootstrap interval (each resample draws the rows once and computes
    both statistics on them, so what the two judges share cancels out)."""
    check_resampling(confidence, n_resamples)
    if not len(human) == len(before) == len(after):
        raise ValueError(
            f"human, before and after must be the same rows, got {len(human)}, {len(before)} "
            f"and {len(after)}"
        )
    old = _counted(statistic, human, before, levels)
    new = _counted(statistic, human, after, levels)
    n = len(old.unit_of_row)
    method = f"paired percentile bootstrap over pairs, {n_resamples} resamples, seed {seed}"
    if n == 0:
        return Estimate(None, None, None, 0, confidence, method, note="no pairs")
    old_value, new_value = old.observed(), new.observed()
    if old_value is None or new_value is None:
        why = (old if old_value is None else new).undefined_because
        side = "before" if old_value is None else "after"
        return Estimate(None, None, None, n, confidence, method, note=f"{side}: {why}")
    old_draws, new_draws = _resampled([old, new], n_resamples, seed)
    return _bootstrapped(new_value - old_value, new_draws - old_draws, n, confidence, method)


def _bootstrapped(
    value: float,
    draws: npt.NDArray[np.float64],
    n: int,
    confidence: float,
    method: str,
) -> Estimate:
    """`value` with the percentile interval of its bootstrap `draws` (NaN where undefined: left
    out, and no interval when more than 10% are)."""
    import numpy as np

    n_resamples = len(draws)
    defined = draws[np.isfinite(draws)]
    n_undefined = n_resamples - len(defined)
    if len(defined) < _MIN_DEFINED_SHARE * n_resamples:
        note = f"undefined on {n_undefined} of {n_resamples} resamples: no interval"
        return Estimate(value, None, None, n, confidence, method, n_undefined, note)
    low, high = percentile_interval(defined, confidence)
    # when every resample gives the value (a perfect judge), the resamples' arithmetic may put
    # the bounds a rounding error off it
    if 0 < low - value < TIE_TOLERANCE:
        low = value
    if 0 < value - high < TIE_TOLERANCE:
        high = value
    return Estimate(value, low, high, n, confidence, method, n_undefined)


def cohen_kappa(
    human: Sequence[float],
    judge: Sequence[float],
    *,
    weights: KappaWeights | None = None,
    levels: Sequence[float] | None = None,
) -> float | None:
    """Cohen's κ of two raters' category levels (None when undefined: both raters used one
    and the same category throughout). `weights` "linear" or "quadratic" gives the weighted κ
    of an ordinal scale, disagreements weighted by |i−j| or (i−j)² of the levels' ranks."""
    name = "cohen_kappa" if weights is None else f"weighted_kappa_{weights}"
    return _counted(name, human, judge, levels).observed()


def balanced_accuracy(
    human: Sequence[float],
    judge: Sequence[float],
    *,
    levels: Sequence[float] | None = None,
) -> float | None:
    """Mean over the human classes present of the share of that class the judge matched."""
    return _counted("balanced_accuracy", human, judge, levels).observed()


def auroc(labels: Sequence[float], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of `scores` for binary `labels` (ties count ½); None when the
    labels hold one class only."""
    return _counted("auroc", labels, scores, None).observed()


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ (Pearson's r of mid-ranks); None when one side is constant."""
    return _counted("spearman", x, y, None).observed()


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None when one side is constant."""
    return _counted("pearson", x, y, None).observed()


def confusion_matrix(
    human: Sequence[float], judge: Sequence[float], levels: Sequence[float]
) -> list[list[int]]:
    """Counts of pairs by (human level, judge level): rows human, columns judge, both in the
    order of the sorted `levels`."""
    import numpy as np

    h, j = _pair_arrays(human, judge)
    lv = _levels(h, j, levels)
    k = len(lv)
    units = _level_index(h, lv, "human") * k + _level_index(j, lv, "judge")
    table = np.bincount(units, minlength=k * k).reshape(k, k)
    return [[int(c) for c in row] for row in table]
