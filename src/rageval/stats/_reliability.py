"""How far several judges agree with each other, and how often one judge changes its mind.

:func:`krippendorff_alpha` is Krippendorff's α of a (units x coders) table with gaps: the
judges of a panel are the coders, the rows of a run the units. α = 1 − D_o / D_e, where D_o is
the disagreement observed within units and D_e the disagreement expected by chance from every
pairable value pooled (Krippendorff, *Computing Krippendorff's Alpha-Reliability*, 2011). A
unit counts only with at least two values. The difference function is the squared difference
for the interval level and "not equal" for the nominal level. Each unit reduces to a few sums
(its value count, its within-unit disagreement, and its values' sums or category counts), so
the value and every bootstrap resample of the units are one matrix product each; the interval
is the percentile interval of α over resamples of the units drawn with replacement.

:func:`flip_rate` is the share of cells scored several times whose pass/fail decision is not
the same in every scoring (pass: a value at or above the threshold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rageval.stats._agreement import Estimate
from rageval.stats._resampling import check_resampling, chunk_sizes, percentile_interval

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

AlphaLevel = Literal["interval", "nominal"]
# As for the agreement statistics: an interval only when α is defined on most resamples.
_MIN_DEFINED_SHARE = 0.9


def _unit_sums(
    table: Sequence[Sequence[float | None]], level: AlphaLevel
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per pairable unit: its value count m_u, its within-unit disagreement
    Σ_{i≠j} δ(v_i, v_j) / (m_u − 1), and the pooled features D_e is made of (interval: Σv and
    Σv²; nominal: the count of each category)."""
    import numpy as np

    units = []
    for u, row in enumerate(table):
        values = [float(v) for v in row if v is not None]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"unit {u}: values must be finite numbers (None for a gap)")
        if len(values) >= 2:
            units.append(values)
    categories = sorted({v for values in units for v in values})
    index = {c: i for i, c in enumerate(categories)}
    counts = np.zeros(len(units), dtype=np.float64)
    within = np.zeros(len(units), dtype=np.float64)
    width = 2 if level == "interval" else len(categories)
    features = np.zeros((len(units), width), dtype=np.float64)
    for u, values in enumerate(units):
        arr = np.asarray(values, dtype=np.float64)
        m = len(arr)
        counts[u] = m
        if level == "interval":
            # Σ_{i≠j} (v_i − v_j)² = 2 (m Σv² − (Σv)²)
            pairs = 2.0 * (m * float(np.sum(arr * arr)) - float(arr.sum()) ** 2)
            features[u] = (arr.sum(), np.sum(arr * arr))
        else:
            per_category = np.bincount([index[v] for v in values], minlength=width)
            pairs = float(m * m - np.sum(per_category * per_category))
            features[u] = per_category
        within[u] = pairs / (m - 1)
    return counts, within, features


def _alpha_of(
    weights: npt.NDArray[np.float64],
    counts: npt.NDArray[np.float64],
    within: npt.NDArray[np.float64],
    features: npt.NDArray[np.float64],
    level: AlphaLevel,
) -> npt.NDArray[np.float64]:
    """α for each row of `weights` (resamples x units: how many times each unit is drawn);
    NaN where the pooled values do not vary (D_e = 0)."""
    import numpy as np

    n = weights @ counts
    observed = weights @ within
    pooled = weights @ features
    if level == "interval":
        expected_pairs = 2.0 * (n * pooled[:, 1] - pooled[:, 0] ** 2)
    else:
        expected_pairs = n * n - np.sum(pooled * pooled, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * observed / expected_pairs
    # a tiny or negative expected disagreement is rounding of none: α is undefined there
    alpha[~(expected_pairs > 1e-12 * np.maximum(1.0, n * n))] = np.nan
    return np.asarray(alpha, dtype=np.float64)


def krippendorff_alpha(
    table: Sequence[Sequence[float | None]],
    *,
    level: AlphaLevel = "interval",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Krippendorff's α of `table`, one row per unit (a sample), one column per coder (a
    judge), None where a coder gave no value; with its percentile-bootstrap interval over the
    units (see the module docstring).

    Args:
        table: the values, units x coders; rows may differ in length (a gap is None).
        level: "interval" (squared differences: scores) or "nominal" (equal or not: labels).
        confidence: the interval's confidence level, in (0, 1).
        n_resamples: bootstrap resamples of the units.
        seed: the resampling's random seed (the same seed gives the same interval).

    `value` is None when fewer than two units have two values or every value is the same
    (`note` says which); the interval is None when α is undefined on more than a tenth of
    the resamples (resamples where every value is the same)."""
    import numpy as np

    if level not in ("interval", "nominal"):
        raise ValueError(f"level must be 'interval' or 'nominal', got {level!r}")
    check_resampling(confidence, n_resamples)
    counts, within, features = _unit_sums(table, level)
    n_units = len(counts)
    method = (
        f"Krippendorff's alpha ({level}); percentile bootstrap of the units "
        f"({n_resamples} resamples, seed {seed})"
    )
    if n_units < 2:
        note = f"{n_units} unit(s) with two values or more: alpha needs at least 2"
        return Estimate(None, None, None, n_units, confidence, method, note=note)
    value = float(_alpha_of(np.ones((1, n_units)), counts, within, features, level)[0])
    if not math.isfinite(value):
        note = "every value is the same: no disagreement is expected by chance"
        return Estimate(None, None, None, n_units, confidence, method, note=note)
    rng = np.random.default_rng(seed)
    resampled = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in chunk_sizes(n_resamples, n_units):
        drawn = rng.integers(0, n_units, size=(size, n_units))
        offsets = (np.arange(size, dtype=np.intp) * n_units)[:, None]
        weights = np.bincount((drawn + offsets).ravel(), minlength=size * n_units)
        weights_2d = weights.reshape(size, n_units).astype(np.float64)
        resampled[start : start + size] = _alpha_of(weights_2d, counts, within, features, level)
        start += size
    defined = resampled[np.isfinite(resampled)]
    n_undefined = n_resamples - len(defined)
    if len(defined) < _MIN_DEFINED_SHARE * n_resamples:
        return Estimate(value, None, None, n_units, confidence, method, n_undefined)
    low, high = percentile_interval(defined, confidence)
    return Estimate(value, low, high, n_units, confidence, method, n_undefined)


@dataclass(frozen=True)
class FlipRate:
    """How often a cell's pass/fail decision changes across its scorings."""

    #: flipped / cells (None: no cell has two scorings)
    rate: float | None
    #: cells with at least two scorings, and those whose decision was not always the same
    n_cells: int
    n_flipped: int
    #: a value at or above it passes
    threshold: float


def flip_rate(scorings: Sequence[Sequence[float]], threshold: float = 0.5) -> FlipRate:
    """The share of cells whose pass/fail decision (pass: value ≥ `threshold`) is not the same
    in all of their scorings, over the cells scored at least twice.

    Args:
        scorings: each cell's measured values, one per scoring (a cell with fewer than two
            is left out).
        threshold: the value at or above which a cell passes.
    """
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    decisions = [{v >= threshold for v in values} for values in scorings if len(values) >= 2]
    flipped = sum(len(d) > 1 for d in decisions)
    rate = flipped / len(decisions) if decisions else None
    return FlipRate(rate, len(decisions), flipped, threshold)
