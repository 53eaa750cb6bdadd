"""Uncertainty for metric means and for the difference between two runs (numpy only).

Confidence interval of a mean: the **percentile bootstrap**. The measured values are resampled
with replacement `n_resamples` times (default 2000); the interval is the (α/2, 1−α/2)
percentiles of the resampled means. The generator is seeded (default seed 0), so the same
values always give the same interval. With one value, or values that are all equal, every
resample is the same and the bootstrap says nothing about the uncertainty: the interval is
undefined (None, with the reason in ``undefined``), not a zero-width interval. With no value
there is no mean (None), never a 0.

Difference between two runs: **paired** and item-matched. Only items measured in both runs
take part. The difference is `b − a` per item, and a difference below `TIE_BELOW` (1e-9) is a
tie, 0: two sums of the same numbers in another order differ in their last bits, which is no
difference between runs; its mean gets a percentile-bootstrap interval
(items resampled as pairs), and a two-sided **sign-flip permutation test** gives the p-value
for "no difference": under that hypothesis each item's difference is equally likely to have
either sign. For up to 16 items every sign pattern is enumerated (exact p-value); beyond that
`n_permutations` random patterns (default 10 000) estimate it as (1 + #{|T*| ≥ |T|}) / (1 + n),
which never returns 0.

Agreement between people and a judge (used by :mod:`rageval.calibration`): Cohen's κ
(unweighted, or linearly / quadratically weighted for ordinal scales), balanced accuracy,
accuracy, AUROC, Spearman's and Pearson's correlation, and the confusion matrix. Each statistic
is computed from how many times each distinct (human, judge) pair occurs, so one vectorised
code path gives the value (the observed counts) and every bootstrap resample (counts of a
resample of the rows, drawn with replacement); :func:`agreement` returns the value with its
percentile-bootstrap interval, and :func:`agreement_difference` how much a statistic changes
from one judge to another on the same rows, with a paired interval.

Prediction-powered inference (:func:`ppi_mean`, PPI++ of Angelopoulos, Duchi and Zrnic, 2023):
the mean of a human label estimated from a judge's scores on every row, rectified by the rows
that carry a human label; see its docstring. :func:`judge_noise` splits the variance of a
mean into what the rows differ by and what the judge's own randomness adds.

Comparing two runs (:func:`compare`): every metric they share, over the samples matched by id,
with :func:`paired_difference`, and the samples that moved most.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "AGREEMENT_STATISTICS",
    "TIE_BELOW",
    "ConfidenceInterval",
    "Estimate",
    "JudgeNoise",
    "MetricComparison",
    "PPIComparison",
    "PPIDifference",
    "PPIEstimate",
    "PairedDifference",
    "agreement",
    "agreement_difference",
    "auroc",
    "balanced_accuracy",
    "bootstrap_ci",
    "cohen_kappa",
    "compare",
    "confusion_matrix",
    "judge_noise",
    "paired_difference",
    "pearson",
    "ppi_difference",
    "ppi_mean",
    "spearman",
]

#: random draws generated per chunk, so 100 000 values x 2000 resamples stays small in memory
_CHUNK_ELEMENTS = 4_000_000
_EXACT_MAX_N = 16
# Differences this close to the observed statistic count as "at least as extreme": sums of the
# same numbers in a different order differ in the last bits.
_TIE_TOLERANCE = 1e-12
#: per-item differences smaller than this (in absolute value) are ties: no difference
TIE_BELOW = 1e-9


@dataclass(frozen=True)
class ConfidenceInterval:
    mean: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float
    method: str
    #: why there is a mean but no interval (one value, or all values equal); else None
    undefined: str | None = None


@dataclass(frozen=True)
class PairedDifference:
    """Mean of `b − a` over the items measured in both runs, with its interval and p-value;
    `n_ties` of the `n_pairs` items differ by less than `TIE_BELOW` (counted as 0)."""

    mean_diff: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n_pairs: int
    confidence: float
    method: str
    n_ties: int = 0

    @property
    def no_difference(self) -> bool:
        """Every item measured in both runs has the same value in both (to `TIE_BELOW`)."""
        return self.n_pairs > 0 and self.n_ties == self.n_pairs


def _measured(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    import numpy as np

    arr = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite numbers (use None for a value not measured)")
    return arr


def _check(confidence: float, n_resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _chunks(total: int, width: int) -> Iterator[int]:
    """Sizes of successive chunks of `total` rows of `width` random draws each."""
    per_chunk = max(1, _CHUNK_ELEMENTS // max(1, width))
    done = 0
    while done < total:
        size = min(per_chunk, total - done)
        yield size
        done += size


def _bootstrap_means(
    arr: npt.NDArray[np.float64], n_resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(arr)
    out = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in _chunks(n_resamples, n):
        idx = rng.integers(0, n, size=(size, n))
        out[start : start + size] = arr[idx].mean(axis=1)
        start += size
    return out


def _percentiles(means: npt.NDArray[np.float64], confidence: float) -> tuple[float, float]:
    import numpy as np

    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> ConfidenceInterval:
    """Mean of the measured values (None entries are left out) with a percentile-bootstrap
    interval; see the module docstring."""
    _check(confidence, n_resamples)
    arr = _measured(values)
    method = f"percentile bootstrap, {n_resamples} resamples, seed {seed}"
    n = len(arr)
    if n == 0:
        return ConfidenceInterval(None, None, None, 0, confidence, method)
    mean = float(arr.mean())
    if n == 1 or bool((arr == arr[0]).all()):
        # every resample is the same: a zero-width interval would claim a certainty that
        # one value (or values that happen to agree) cannot give
        why = "one measured value" if n == 1 else f"all {n} measured values are equal"
        return ConfidenceInterval(mean, None, None, n, confidence, method, undefined=why)
    low, high = _percentiles(_bootstrap_means(arr, n_resamples, seed), confidence)
    return ConfidenceInterval(mean, low, high, n, confidence, method)


def _sign_flip_p(
    diffs: npt.NDArray[np.float64], n_permutations: int, seed: int
) -> tuple[float, str]:
    import numpy as np

    n = len(diffs)
    observed = abs(float(diffs.sum()))
    threshold = observed - _TIE_TOLERANCE * max(1.0, observed)
    if n <= _EXACT_MAX_N:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64) & 1
        signs = 1.0 - 2.0 * patterns
        sums = np.abs(signs @ diffs)
        return float((sums >= threshold).mean()), "exact sign-flip permutation test"
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in _chunks(n_permutations, n):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n), dtype=np.int8)
        extreme += int((np.abs(signs @ diffs) >= threshold).sum())
    return (1 + extreme) / (1 + n_permutations), (
        f"sign-flip permutation test, {n_permutations} permutations, seed {seed}"
    )


def paired_difference(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> PairedDifference:
    """Mean of `b[i] − a[i]` over the items measured in both (`a` and `b` are item-matched:
    same length, same item at each position), with a bootstrap interval and a sign-flip
    permutation p-value; see the module docstring."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"a and b must be item-matched (same length), got {len(a)} and {len(b)}")
    if n_permutations < 5000:
        raise ValueError("n_permutations must be >= 5000 for a stable p-value")
    _check(confidence, n_resamples)
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    diffs = np.asarray([y - x for x, y in pairs], dtype=np.float64)
    if not np.all(np.isfinite(diffs)):
        raise ValueError("values must be finite numbers (use None for a value not measured)")
    n = len(diffs)
    if n == 0:
        return PairedDifference(
            None, None, None, None, 0, confidence, "no item measured in both runs"
        )
    ties = np.abs(diffs) < TIE_BELOW
    diffs[ties] = 0.0
    mean = float(diffs.mean())
    p_value, test = _sign_flip_p(diffs, n_permutations, seed)
    method = f"paired percentile bootstrap ({n_resamples} resamples, seed {seed}); {test}"
    n_ties = int(ties.sum())
    if n == 1 or bool((diffs == diffs[0]).all()):
        return PairedDifference(mean, mean, mean, p_value, n, confidence, method, n_ties)
    low, high = _percentiles(_bootstrap_means(diffs, n_resamples, seed), confidence)
    return PairedDifference(mean, low, high, p_value, n, confidence, method, n_ties)


# ---------------------------------------------------------------------- agreement

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

    def observed(self) -> float | None:
        import numpy as np

        counts = np.bincount(self.unit_of_row, minlength=self.m).astype(np.float64)
        value = float(self.compute(counts[None, :])[0])
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
        counts = np.bincount(units.ravel(), minlength=size * self.m).reshape(size, self.m)
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
    for size in _chunks(n_resamples, max(n, *(s.m for s in statistics))):
        rows = rng.integers(0, n, size=(size, n))
        for values, statistic in zip(out, statistics, strict=True):
            values[start : start + size] = statistic.on_rows(rows)
        start += size
    return out


def _finite_array(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite numbers (leave out the rows without a value)")
    return arr


def _pair_arrays(
    human: Sequence[float], judge: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    if len(human) != len(judge):
        raise ValueError(
            f"human and judge values must be paired (same length), got {len(human)} and "
            f"{len(judge)}"
        )
    return _finite_array(human, "human values"), _finite_array(judge, "judge values")


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


def _balanced_accuracy_of_tables(tables: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
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
) -> Estimate:
    """`statistic` (one of :data:`AGREEMENT_STATISTICS`) of the paired `human` and `judge`
    values, with a percentile-bootstrap interval over the pairs (resampled with replacement).

    Categorical statistics (κ, balanced accuracy, accuracy) take both sides as category levels
    (`levels`: their order, needed by the weighted κ; default the sorted values seen). AUROC
    takes human labels 0/1 and judge scores. Spearman and Pearson take any numbers.
    """
    _check(confidence, n_resamples)
    counted = _counted(statistic, human, judge, levels)
    n = len(counted.unit_of_row)
    method = f"percentile bootstrap over pairs, {n_resamples} resamples, seed {seed}"
    if n == 0:
        return Estimate(None, None, None, 0, confidence, method, note="no pairs")
    value = counted.observed()
    if value is None:
        return Estimate(None, None, None, n, confidence, method, note=counted.undefined_because)
    draws = counted.resampled(n_resamples, seed)
    return _bootstrapped(value, draws, n, confidence, method)


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
    _check(confidence, n_resamples)
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
    low, high = _percentiles(defined, confidence)
    # when every resample gives the value (a perfect judge), the resamples' arithmetic may put
    # the bounds a rounding error off it
    if 0 < low - value < _TIE_TOLERANCE:
        low = value
    if 0 < value - high < _TIE_TOLERANCE:
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
    human: Sequence[float], judge: Sequence[float], *, levels: Sequence[float] | None = None
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


# ---------------------------------------------------------------------- PPI++


@dataclass(frozen=True)
class PPIEstimate:
    """The mean of a human label, judge-powered (PPI++), next to the labelled rows alone.

    `mean`/`low`/`high` are None when fewer than two rows carry both a label and a judge
    value. `classical_*` is the labelled rows' own mean and interval (same normal
    approximation); `lam` the power-tuning weight given to the judge (0 = labelled rows only).
    """

    mean: float | None
    low: float | None
    high: float | None
    classical_mean: float | None
    classical_low: float | None
    classical_high: float | None
    lam: float | None
    n_labelled: int
    n_unlabelled: int
    #: rows with a human label whose judge value is missing (not measured): left out
    n_labelled_without_judge: int
    confidence: float
    method: str


def ppi_mean(
    labels: Sequence[float | None],
    judge: Sequence[float | None],
    *,
    confidence: float = 0.95,
    lam: float | None = None,
) -> PPIEstimate:
    """Prediction-powered estimate of the mean human label (PPI++, power-tuned).

    `labels[i]` is row i's human label (None when unlabelled), `judge[i]` the judge's value on
    the same scale (None when not measured). Rows with both form the labelled set L (n rows),
    rows with a judge value only the unlabelled set U (N rows); a label without a judge value
    cannot be rectified and is left out (counted).

        θ̂(λ) = λ·mean_U(f) + mean_L(y − λ·f)
        Var̂(λ) = λ²·s²_U(f)/N + s²_L(y − λ·f)/n

    λ is the minimiser of Var̂ — s_L(y, f) / (s²_L(f) + (n/N)·s²_U(f)), the PPI++ power-tuning
    of Angelopoulos et al. (2023) with each variance taken on the rows it describes — clipped to
    [0, 1]. λ = 0 is the labelled rows alone, so the interval is never wider than theirs; λ = 1
    is classic PPI. The interval is the normal approximation θ̂ ± z·√Var̂ (the same for the
    classical mean, s_L(y)/√n). `lam` fixes λ instead of tuning it.
    """
    import numpy as np

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if len(labels) != len(judge):
        raise ValueError(
            f"labels and judge values must be row-matched (same length), got {len(labels)} "
            f"and {len(judge)}"
        )
    if lam is not None and not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    pairs = [(y, f) for y, f in zip(labels, judge, strict=True) if y is not None and f is not None]
    unlabelled = [f for y, f in zip(labels, judge, strict=True) if y is None and f is not None]
    without_judge = sum(y is not None and f is None for y, f in zip(labels, judge, strict=True))
    y_l = _finite_array([y for y, _ in pairs], "human labels")
    f_l = _finite_array([f for _, f in pairs], "judge values")
    f_u = _finite_array(unlabelled, "judge values")
    n, big_n = len(y_l), len(f_u)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    method = (
        f"PPI++ (power-tuned λ clipped to [0, 1]); normal-approximation {confidence:.0%} interval"
    )
    if n < 2:
        return PPIEstimate(
            None, None, None, None, None, None, None, n, big_n, without_judge, confidence,
            method + "; needs at least 2 rows with both a human label and a judge value",
        )  # fmt: skip
    var_y = float(np.var(y_l, ddof=1))
    var_fl = float(np.var(f_l, ddof=1))
    cov = float(np.cov(y_l, f_l, ddof=1)[0, 1])
    var_fu = float(np.var(f_u, ddof=1)) if big_n >= 2 else 0.0
    if lam is None:
        denominator = var_fl + (n / big_n) * var_fu if big_n >= 2 else 0.0
        lam = min(1.0, max(0.0, cov / denominator)) if denominator > 0 else 0.0
    mean_u = float(f_u.mean()) if big_n else 0.0
    estimate = lam * mean_u + float((y_l - lam * f_l).mean())
    variance = (var_y - 2 * lam * cov + lam * lam * var_fl) / n
    if big_n >= 2:
        variance += lam * lam * var_fu / big_n
    half = z * math.sqrt(max(variance, 0.0))
    classical = float(y_l.mean())
    classical_half = z * math.sqrt(var_y / n)
    return PPIEstimate(
        estimate, estimate - half, estimate + half,
        classical, classical - classical_half, classical + classical_half,
        lam, n, big_n, without_judge, confidence, method,
    )  # fmt: skip


@dataclass(frozen=True)
class PPIDifference:
    """Run B's PPI++ mean minus run A's, over rows matched between the runs."""

    mean_diff: float | None
    low: float | None
    high: float | None
    #: rows labelled in both runs (and scored by both judges), and rows labelled in neither
    n_labelled: int
    n_unlabelled: int
    #: rows left out: labelled in one run only, or without a judge value in either
    n_left_out: int
    confidence: float
    method: str


def ppi_difference(
    labels_a: Sequence[float | None],
    judge_a: Sequence[float | None],
    labels_b: Sequence[float | None],
    judge_b: Sequence[float | None],
    *,
    lam_a: float,
    lam_b: float,
    confidence: float = 0.95,
) -> PPIDifference:
    """θ̂_B − θ̂_A of two PPI++ means on the same items (row-matched), each with its own λ.

    Both estimates are sums of per-row terms (λ·f/N on unlabelled rows, (y − λ·f)/n on
    labelled ones), so on rows playing the same part in both runs the difference is the mean
    over unlabelled rows of d_U = λ_B·f_B − λ_A·f_A plus the mean over labelled rows of
    d_L = (y_B − λ_B·f_B) − (y_A − λ_A·f_A), with variance s²(d_U)/N + s²(d_L)/n (λs taken as
    fixed, as in each run's own interval) and a normal-approximation interval. Pairing removes
    what the two runs share (the same questions), so this interval is narrower than the two
    intervals side by side suggest.
    """
    import numpy as np

    if not len(labels_a) == len(judge_a) == len(labels_b) == len(judge_b):
        raise ValueError("the two runs' labels and judge values must be row-matched")
    matched: list[tuple[float | None, float, float | None, float]] = []
    for ya, fa, yb, fb in zip(labels_a, judge_a, labels_b, judge_b, strict=True):
        if fa is not None and fb is not None and (ya is None) == (yb is None):
            matched.append((ya, fa, yb, fb))
    n_left_out = len(labels_a) - len(matched)
    unlabelled = [(fa, fb) for ya, fa, _, fb in matched if ya is None]
    labelled = [(ya, fa, yb, fb) for ya, fa, yb, fb in matched if ya is not None]
    n, big_n = len(labelled), len(unlabelled)
    method = f"paired PPI++ difference; normal-approximation {confidence:.0%} interval"
    if big_n == 0:  # nothing to rectify: the labelled rows alone (λ = 0 in both)
        lam_a = lam_b = 0.0
        method += "; no row is unlabelled in both runs: the labelled rows alone"
    if n < 2:
        return PPIDifference(
            None, None, None, n, big_n, n_left_out, confidence,
            method + "; needs at least 2 rows labelled in both runs",
        )  # fmt: skip
    d_u = _finite_array([lam_b * fb - lam_a * fa for fa, fb in unlabelled], "judge values")
    d_l = _finite_array(
        [
            (yb - lam_b * fb) - (ya - lam_a * fa)
            for ya, fa, yb, fb in labelled
            if ya is not None and yb is not None
        ],
        "labels and judge values",
    )
    diff = float(d_l.mean()) + (float(d_u.mean()) if big_n else 0.0)
    variance = float(np.var(d_l, ddof=1)) / n
    if big_n >= 2:
        variance += float(np.var(d_u, ddof=1)) / big_n
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(max(variance, 0.0))
    return PPIDifference(diff, diff - half, diff + half, n, big_n, n_left_out, confidence, method)


# ---------------------------------------------------------------------- judge noise


@dataclass(frozen=True)
class JudgeNoise:
    """How much of a mean's uncertainty is the judge's own randomness, from cells scored
    several times.

    `within_variance` is the pooled variance of one cell's repeated scores (the judge's noise);
    `cell_variance` the variance of the cell values (each the mean of its repeats) across rows.
    The mean's variance is `cell_variance`/n; of it, the average noise variance left in a cell
    value (`within_variance`/k) is the `noise_variance_share`. `ci_width_share` is how much
    narrower the interval would be with a noiseless judge: 1 − √(1 − share).
    """

    n_cells: int
    repeats: int
    mean_cell_sd: float
    within_variance: float
    cell_variance: float
    noise_variance_share: float
    ci_width_share: float


def judge_noise(repeats: Sequence[Sequence[float]]) -> JudgeNoise | None:
    """The noise decomposition of cells scored several times (`repeats[i]`: the measured
    scores of cell i); cells with fewer than two scores are left out. None when fewer than two
    cells have two or more scores."""
    import numpy as np

    cells = [_finite_array(list(r), "repeated scores") for r in repeats if len(r) >= 2]
    if len(cells) < 2:
        return None
    squares = sum(float(((c - c.mean()) ** 2).sum()) for c in cells)
    dof = sum(len(c) - 1 for c in cells)
    within = squares / dof
    values = np.asarray([c.mean() for c in cells])
    cell_variance = float(np.var(values, ddof=1))
    noise = float(np.mean([within / len(c) for c in cells]))
    share = min(1.0, noise / cell_variance) if cell_variance > 0 else 0.0
    return JudgeNoise(
        n_cells=len(cells),
        repeats=max(len(c) for c in cells),
        mean_cell_sd=float(np.mean([c.std(ddof=1) for c in cells])),
        within_variance=within,
        cell_variance=cell_variance,
        noise_variance_share=share,
        ci_width_share=1.0 - math.sqrt(1.0 - share),
    )


# ---------------------------------------------------------------------- comparing runs


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
