"""Uncertainty for metric means and for the difference between two runs (numpy only).

Confidence interval of a mean: the **percentile bootstrap**. The measured values are resampled
with replacement `n_resamples` times (default 2000); the interval is the (α/2, 1−α/2)
percentiles of the resampled means. The generator is seeded (default seed 0), so the same
values always give the same interval. With one value the interval is that value; with none
there is no mean (None), never a 0.

Difference between two runs: **paired** and item-matched. Only items measured in both runs
take part. The difference is `b − a` per item; its mean gets a percentile-bootstrap interval
(items resampled as pairs), and a two-sided **sign-flip permutation test** gives the p-value
for "no difference": under that hypothesis each item's difference is equally likely to have
either sign. For up to 16 items every sign pattern is enumerated (exact p-value); beyond that
`n_permutations` random patterns (default 10 000) estimate it as (1 + #{|T*| ≥ |T|}) / (1 + n),
which never returns 0.

Comparing two runs (:func:`compare`): every metric they share, over the samples matched by id,
with :func:`paired_difference`, and the samples that moved most.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ConfidenceInterval",
    "MetricComparison",
    "PairedDifference",
    "bootstrap_ci",
    "compare",
    "paired_difference",
]

#: random draws generated per chunk, so 100 000 values x 2000 resamples stays small in memory
_CHUNK_ELEMENTS = 4_000_000
_EXACT_MAX_N = 16
# Differences this close to the observed statistic count as "at least as extreme": sums of the
# same numbers in a different order differ in the last bits.
_TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class ConfidenceInterval:
    mean: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float
    method: str


@dataclass(frozen=True)
class PairedDifference:
    """Mean of `b − a` over the items measured in both runs, with its interval and p-value."""

    mean_diff: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n_pairs: int
    confidence: float
    method: str


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
        # every resample is the same: the interval has no width
        return ConfidenceInterval(mean, mean, mean, n, confidence, method)
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
    mean = float(diffs.mean())
    p_value, test = _sign_flip_p(diffs, n_permutations, seed)
    method = f"paired percentile bootstrap ({n_resamples} resamples, seed {seed}); {test}"
    if n == 1 or bool((diffs == diffs[0]).all()):
        return PairedDifference(mean, mean, mean, p_value, n, confidence, method)
    low, high = _percentiles(_bootstrap_means(diffs, n_resamples, seed), confidence)
    return PairedDifference(mean, low, high, p_value, n, confidence, method)


# ---------------------------------------------------------------------- comparing runs


class Run(Protocol):
    """What :func:`compare` reads of a run (an ``EvaluationResult``, e.g. from ``load_run``):
    the sample ids by row, the metric names, and a metric's values by row (None: no value)."""

    @property
    def ids(self) -> Sequence[str]: ...

    @property
    def metrics(self) -> Sequence[str]: ...

    def __getitem__(self, metric: str) -> Sequence[float | None]: ...


@dataclass(frozen=True)
class MetricComparison:
    """Run B minus run A on one metric, over the samples (matched by id) measured in both."""

    metric: str
    diff: PairedDifference
    mean_a: float | None
    mean_b: float | None
    #: (id, value in A, value in B) of the samples that moved most, largest change first
    movers: list[tuple[str, float, float]]


def compare(a: Run, b: Run, *, top: int = 5) -> list[MetricComparison]:
    """Paired, item-matched comparison of every metric the two runs share."""
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
            )
        )
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
