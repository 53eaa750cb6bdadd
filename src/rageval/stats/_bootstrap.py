"""The interval of a mean, and the paired difference of two runs.

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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

from rageval.stats._resampling import (
    TIE_TOLERANCE,
    check_resampling,
    chunk_sizes,
    percentile_interval,
)

_EXACT_MAX_N = 16
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


def _bootstrap_means(
    arr: npt.NDArray[np.float64], n_resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(arr)
    out = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in chunk_sizes(n_resamples, n):
        idx = rng.integers(0, n, size=(size, n))
        out[start : start + size] = arr[idx].mean(axis=1)
        start += size
    return out


def bootstrap_ci(
    values: Sequence[float | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> ConfidenceInterval:
    """Mean of the measured values (None entries are left out) with a percentile-bootstrap
    interval; see the module docstring."""
    check_resampling(confidence, n_resamples)
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
    low, high = percentile_interval(_bootstrap_means(arr, n_resamples, seed), confidence)
    return ConfidenceInterval(mean, low, high, n, confidence, method)


def _sign_flip_p(
    diffs: npt.NDArray[np.float64], n_permutations: int, seed: int
) -> tuple[float, str]:
    import numpy as np

    n = len(diffs)
    observed = abs(float(diffs.sum()))
    threshold = observed - TIE_TOLERANCE * max(1.0, observed)
    if n <= _EXACT_MAX_N:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64) & 1
        signs = 1.0 - 2.0 * patterns
        sums = np.abs(signs @ diffs)
        return float((sums >= threshold).mean()), "exact sign-flip permutation test"
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in chunk_sizes(n_permutations, n):
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
    check_resampling(confidence, n_resamples)
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
    low, high = percentile_interval(_bootstrap_means(diffs, n_resamples, seed), confidence)
    return PairedDifference(mean, low, high, p_value, n, confidence, method, n_ties)
