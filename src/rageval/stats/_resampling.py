"""What the statistics share: checks of their arguments, resampling in chunks of bounded
memory, percentile intervals, and the tolerance of ties."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: random draws generated per chunk, so 100 000 values x 2000 resamples stays small in memory
_CHUNK_ELEMENTS = 4_000_000
# Differences this close to the observed statistic count as "at least as extreme": sums of the
# same numbers in a different order differ in the last bits.
TIE_TOLERANCE = 1e-12


def check_resampling(confidence: float, n_resamples: int) -> None:
    """A confidence level in (0, 1) and at least one resample, or a ValueError."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def chunk_sizes(total: int, width: int) -> Iterator[int]:
    """Sizes of successive chunks of `total` rows of `width` random draws each."""
    per_chunk = max(1, _CHUNK_ELEMENTS // max(1, width))
    done = 0
    while done < total:
        size = min(per_chunk, total - done)
        yield size
        done += size


def percentile_interval(means: npt.NDArray[np.float64], confidence: float) -> tuple[float, float]:
    import numpy as np

    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def finite_array(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite numbers (leave out the rows without a value)")
    return arr
