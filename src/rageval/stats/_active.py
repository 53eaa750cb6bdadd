"""Active statistical inference (Zrnic and Candès, 2024): which rows a person should label, and
the mean of their labels when the rows were not chosen uniformly.

The rows are visited in a random order (a stream). Visiting row i, a coin with probability
π_i decides whether it is shown for labelling; π_i is larger where the judge is less certain,
so the labels go where they correct the judge most (:func:`selection_probabilities`). Every
visited row counts, chosen or not: that is what makes a person free to stop at any point.
:func:`active_ppi_mean` weighs each label by 1/π_i (inverse probability), so the estimate stays
unbiased however unequal the π are; with every π = 1 it is the PPI++ mean of a random sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rageval.stats._ppi import power_tuned
from rageval.stats._resampling import finite_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: the share of every row's selection probability spread evenly over the rows: however wrong
#: the judge's certainty is, no row's probability falls below this share of the uniform one
#: (which bounds the inverse-probability weights, and so the variance). Zrnic and Candès mix
#: the uncertainty rule with the uniform one against poor uncertainty; 0.7 is where, in
#: tests/test_stats_active.py's simulation, an overconfident judge's interval is no wider than
#: a random sample's (0.169 and 0.169) and a calibrated judge's still narrower (0.131 against
#: 0.137); at 0.2 the overconfident one was 7% wider, at 0.8 the calibrated gain is 2.7%
UNIFORM_SHARE = 0.7


def judge_uncertainty(value: float) -> float:
    """How much a label can correct the judge's `value` (a score in [0, 1]): √(p(1 − p)), the
    standard deviation of a 0/1 label that the judge calls true with probability p. Zrnic and
    Candès' optimal selection probability is proportional to it.

    Args:
        value: the judge's score (clipped to [0, 1]).
    """
    p = min(1.0, max(0.0, value))
    return math.sqrt(p * (1.0 - p))


def selection_probabilities(
    uncertainty: Sequence[float | None],
    budget: int,
    *,
    uniform_share: float = UNIFORM_SHARE,
) -> list[float]:
    """The probability of choosing each row when it is visited, so that about `budget` rows
    are chosen from a full pass: proportional to a mix of the rows' `uncertainty` (None: no
    judge value, taken as the largest uncertainty seen) and a uniform share, and at most 1
    (what a capped row cannot take goes to the others).

    Args:
        uncertainty: a non-negative number per row (e.g. :func:`judge_uncertainty`).
        budget: how many rows the person means to label (>= 1).
        uniform_share: the part of the budget spread evenly over the rows, in (0, 1].
    """
    if budget < 1:
        raise ValueError(f"the label budget must be at least 1, got {budget}")
    if not 0.0 < uniform_share <= 1.0:
        raise ValueError(f"uniform_share must be in (0, 1], got {uniform_share}")
    n = len(uncertainty)
    if n == 0:
        return []
    known = [u for u in uncertainty if u is not None]
    if any(u < 0 or not math.isfinite(u) for u in known):
        raise ValueError("uncertainties must be finite and non-negative")
    top = max(known, default=1.0) or 1.0
    u = [top if v is None else v for v in uncertainty]
    total = sum(u)
    shape = [
        uniform_share / n + (1.0 - uniform_share) * (v / total if total > 0 else 1.0 / n) for v in u
    ]
    # water-filling: scale to the budget, cap at 1, give what the capped rows cannot take to
    # the rest; each round caps at least one more row, so it ends within n rounds
    capped: set[int] = set()
    while True:
        left = min(budget, n) - len(capped)
        free = sum(s for i, s in enumerate(shape) if i not in capped)
        scale = left / free if free > 0 else 0.0
        over = [i for i, s in enumerate(shape) if i not in capped and s * scale >= 1.0]
        if not over:
            return [1.0 if i in capped else s * scale for i, s in enumerate(shape)]
        capped.update(over)


@dataclass(frozen=True)
class ActivePPIEstimate:
    """The mean of a human label from actively chosen rows (inverse-probability weighted).

    `mean`/`low`/`high` are None when fewer than two visited rows carry a label. `lam` is the
    power-tuning weight given to the judge (0 = the weighted labels alone)."""

    mean: float | None
    low: float | None
    high: float | None
    lam: float | None
    #: rows with a label among the visited ones
    n_labelled: int
    #: rows visited in the stream (chosen or not)
    n_visited: int
    #: rows with a judge value
    n_judged: int
    confidence: float
    method: str


def active_ppi_mean(
    labels: Sequence[float | None],
    judge: Sequence[float | None],
    probabilities: Sequence[float | None],
    *,
    confidence: float = 0.95,
    lam: float | None = None,
) -> ActivePPIEstimate:
    """The mean human label, judge-powered, from rows chosen with unequal probabilities.

    Row i was visited when `probabilities[i]` is its selection probability π_i (None: not
    visited yet); `labels[i]` is its label (None: not chosen, or chosen and not labelled) and
    `judge[i]` the judge's value (None: not measured). Over the N judged rows and the k
    visited judged rows, with ξ_i = 1 for a labelled row, a_i = y_i·ξ_i/π_i, b_i = f_i·ξ_i/π_i:

        θ̂(λ) = λ·mean_N(f) + mean_k(a − λ·b)
        Var̂(λ) = λ²·s²_N(f)/N + s²_k(a − λ·b)/k

    E[ξ/π] = 1, so mean_k(a − λ·b) is unbiased for the mean of y − λ·f over the rows, whatever
    the π (Horvitz-Thompson). The weights w_i = ξ_i/π_i have a known mean, 1, so each term
    first gives up what it owes to them alone: a − c_a·(w − 1) and b − c_b·(w − 1), with c_a,
    c_b their least-squares slopes on w (a control variate: without it, the share of the rows
    that happened to be chosen moves the estimate, and a design that chooses even uniformly
    among the visited rows comes out wider than a random sample). λ minimises Var̂ —
    s_k(a, b) / (s²_k(b) + (k/N)·s²_N(f)) — clipped to [0, 1]; `lam` fixes it. With every
    π = 1 and every visited row labelled (w constant: nothing to give up) this is PPI++ on a
    random sample. A chosen row left unlabelled (skipped) counts as not chosen,
    which is unbiased only if skipping does not depend on the answer.

    Args:
        labels: each row's human label, or None.
        judge: each row's judge value on the label's scale, or None.
        probabilities: each visited row's selection probability in (0, 1], None elsewhere.
        confidence: the interval's level.
        lam: a fixed weight for the judge in [0, 1] (None: power-tuned).
    """

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not len(labels) == len(judge) == len(probabilities):
        raise ValueError("labels, judge values and probabilities must be row-matched")
    if lam is not None and not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    a_list: list[float] = []
    b_list: list[float] = []
    w_list: list[float] = []
    for row, (y, f, p) in enumerate(zip(labels, judge, probabilities, strict=True)):
        if p is None or f is None:
            continue
        if not 0.0 < p <= 1.0:
            raise ValueError(f"row {row}: a selection probability is in (0, 1], got {p}")
        a_list.append(0.0 if y is None else y / p)
        b_list.append(0.0 if y is None else f / p)
        w_list.append(0.0 if y is None else 1.0 / p)
    f_all = finite_array([f for f in judge if f is not None], "judge values")
    a, b = finite_array(a_list, "labels"), finite_array(b_list, "judge values")
    w = finite_array(w_list, "weights")
    n_labelled = sum(
        y is not None and f is not None and p is not None
        for y, f, p in zip(labels, judge, probabilities, strict=True)
    )
    k, big_n = len(a), len(f_all)
    method = (
        "active PPI++ (inverse-probability weighted, the weights as a control variate, "
        "power-tuned λ clipped to [0, 1]); "
        f"normal-approximation {confidence:.0%} interval"
    )
    if n_labelled < 2 or k < 2:
        return ActivePPIEstimate(
            None, None, None, None, n_labelled, k, big_n, confidence,
            method + "; needs at least 2 labelled rows with a judge value",
        )  # fmt: skip
    a, b = _less_weight_noise(a, w), _less_weight_noise(b, w)
    # PPI++ over the k visited rows' weighted terms (a, b) and the N judged rows (N >= k >= 2)
    estimate, half, lam = power_tuned(a, b, f_all, lam, confidence)
    return ActivePPIEstimate(
        estimate, estimate - half, estimate + half, lam, n_labelled, k, big_n, confidence, method
    )


def _less_weight_noise(
    terms: npt.NDArray[np.float64], w: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """`terms` less c·(w − 1), c their least-squares slope on the weights `w`. The weights' mean
    is 1 by design, so for a fixed c the mean of `terms` keeps its expectation; c fitted on the
    same rows (as λ is) leaves a bias of order 1/k. `terms` as they are when every weight is the
    same."""
    var_w = float(w.var(ddof=1))
    if not var_w > 0.0:
        return terms
    slope = float(((terms - terms.mean()) * (w - w.mean())).sum()) / (len(w) - 1) / var_w
    return terms - slope * (w - 1.0)


__all__ = [
    "UNIFORM_SHARE",
    "ActivePPIEstimate",
    "active_ppi_mean",
    "judge_uncertainty",
    "selection_probabilities",
]
