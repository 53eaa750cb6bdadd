"""Prediction-powered inference (:func:`ppi_mean`, PPI++ of Angelopoulos, Duchi and Zrnic, 2023):
the mean of a human label estimated from a judge's scores on every row, rectified by the rows
that carry a human label; see its docstring. :func:`judge_noise` splits the variance of a
mean into what the rows differ by and what the judge's own randomness adds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rageval.stats._resampling import finite_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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
    bounds: tuple[float, float] | None = None,
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
    classical mean, s_L(y)/√n). `lam` fixes λ instead of tuning it. `bounds` (low, high) are
    where the labels lie, a bounded metric's range (a win rate's [0, 1]): the estimates and
    their intervals are cut to them, where the normal approximation on a few labels (or the
    rectification) reaches past them (seen: a win rate's [-0.480, 1.480] on 2 labels); where
    the estimate itself lies past them, `method` says so.
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
    if bounds is not None and not bounds[0] < bounds[1]:
        raise ValueError(f"bounds must be (low, high) with low < high, got {bounds}")
    pairs = [(y, f) for y, f in zip(labels, judge, strict=True) if y is not None and f is not None]
    unlabelled = [f for y, f in zip(labels, judge, strict=True) if y is None and f is not None]
    without_judge = sum(y is not None and f is None for y, f in zip(labels, judge, strict=True))
    y_l = finite_array([y for y, _ in pairs], "human labels")
    f_l = finite_array([f for _, f in pairs], "judge values")
    f_u = finite_array(unlabelled, "judge values")
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
    estimate, half, lam = power_tuned(y_l, f_l, f_u, lam, confidence)
    classical = float(y_l.mean())
    classical_half = z * math.sqrt(float(np.var(y_l, ddof=1)) / n)
    low, high = bounds if bounds is not None else (-math.inf, math.inf)

    def cut(value: float) -> float:
        return min(high, max(low, value))

    if cut(estimate) != estimate:
        method += (
            f"; the rectified mean {estimate:.3g} lies past the labels' range [{low:g}, "
            f"{high:g}], cut (the cut interval's width is no certainty)"
        )
    return PPIEstimate(
        cut(estimate), cut(estimate - half), cut(estimate + half),
        classical, cut(classical - classical_half), cut(classical + classical_half),
        lam, n, big_n, without_judge, confidence, method,
    )  # fmt: skip


def power_tuned(
    y: npt.NDArray[np.float64],
    f: npt.NDArray[np.float64],
    f_all: npt.NDArray[np.float64],
    lam: float | None,
    confidence: float,
) -> tuple[float, float, float]:
    """The PPI++ estimate of a mean, its normal-approximation interval's half-width and λ, from
    the n labelled rows' label terms `y` and judge terms `f` (row-matched, n >= 2) and the
    judge's values `f_all` on the N rows its term averages over:

        θ̂(λ) = λ·mean_N(f_all) + mean_n(y − λ·f)
        Var̂(λ) = λ²·s²_N(f_all)/N + s²_n(y − λ·f)/n

    λ (unless `lam` fixes it) minimises Var̂: s_n(y, f) / (s²_n(f) + (n/N)·s²_N(f_all)),
    clipped to [0, 1]; with N < 2 the judge's term has no variance to weigh and λ is 0.
    :func:`ppi_mean` and the active (inverse-probability weighted) mean both estimate this way.

    Args:
        y: the labelled rows' label terms.
        f: the labelled rows' judge terms.
        f_all: the judge's values on the rows its term averages over.
        lam: a fixed λ in [0, 1] (None: power-tuned).
        confidence: the interval's level.
    """
    import numpy as np

    n, big_n = len(y), len(f_all)
    var_y = float(np.var(y, ddof=1))
    var_f = float(np.var(f, ddof=1))
    cov = float(np.cov(y, f, ddof=1)[0, 1])
    var_all = float(np.var(f_all, ddof=1)) if big_n >= 2 else 0.0
    if lam is None:
        denominator = var_f + (n / big_n) * var_all if big_n >= 2 else 0.0
        lam = min(1.0, max(0.0, cov / denominator)) if denominator > 0 else 0.0
    mean_all = float(f_all.mean()) if big_n else 0.0
    estimate = lam * mean_all + float((y - lam * f).mean())
    variance = (var_y - 2 * lam * cov + lam * lam * var_f) / n
    if big_n >= 2:
        variance += lam * lam * var_all / big_n
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return estimate, z * math.sqrt(max(variance, 0.0)), lam


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
    d_u = finite_array([lam_b * fb - lam_a * fa for fa, fb in unlabelled], "judge values")
    d_l = finite_array(
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

    cells = [finite_array(list(r), "repeated scores") for r in repeats if len(r) >= 2]
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
