"""Pairwise preferences: the win rate of B over A, the position-flip rate, the sign test,
Bradley–Terry strengths of three or more systems, and a win rate rectified by people's
preferences on some pairs (PPI++).

A verdict is ``"a"``, ``"b"`` or ``"tie"``; read as B's score it is 0, 1 or 0.5, so the win
rate is the mean of those scores (ties counted half). Intervals are percentile bootstraps over
the pairs (the win rate, the flip rate, the agreement with people) or over the groups the pairs
come from (Bradley–Terry: all the comparisons of one question are resampled together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rageval.stats._bootstrap import ConfidenceInterval, bootstrap_ci
from rageval.stats._ppi import PPIEstimate, ppi_mean
from rageval.stats._resampling import check_resampling, percentile_interval

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Winner = Literal["a", "b", "tie"]
_SCORE: dict[str, float] = {"a": 0.0, "tie": 0.5, "b": 1.0}


def winner_score(winner: str) -> float:
    """A verdict as B's score: a → 0, tie → 0.5, b → 1 (ValueError for anything else)."""
    try:
        return _SCORE[winner]
    except KeyError:
        raise ValueError(f"a pairwise verdict is 'a', 'b' or 'tie', got {winner!r}") from None


def sign_test(wins_b: int, wins_a: int) -> float:
    """Two-sided exact binomial test of "A and B are equally likely to win" on the pairs with a
    winner (ties left out, as the sign test leaves zero differences out): twice the smaller
    tail of Binomial(n, 1/2), at most 1; 1.0 when no pair has a winner.

    Args:
        wins_b: pairs B won.
        wins_a: pairs A won.
    """
    if wins_a < 0 or wins_b < 0:
        raise ValueError("win counts cannot be negative")
    n = wins_a + wins_b
    if n == 0:
        return 1.0
    k = min(wins_a, wins_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class PairwiseSummary:
    """B against A over `n` pairs: wins, ties, the win rate with its interval, the flip rate
    (pairs whose two orders disagreed) and the sign test's p-value."""

    n: int
    wins_a: int
    wins_b: int
    ties: int
    win_rate: ConfidenceInterval
    flips: int
    flip_rate: ConfidenceInterval
    sign_test_p: float


def pairwise_summary(
    winners: Sequence[str],
    flips: Sequence[bool],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairwiseSummary:
    """The win rate of B over A (ties half) with a bootstrap interval, the flip rate and the
    sign test, from each pair's verdict.

    Args:
        winners: each pair's verdict, "a", "b" or "tie".
        flips: whether each pair's two orders disagreed (same length as `winners`).
        confidence: the intervals' level.
        n_resamples: bootstrap resamples.
        seed: the resampling's seed.
    """
    if len(flips) != len(winners):
        raise ValueError(f"{len(winners)} verdicts but {len(flips)} flip flags")
    scores = [winner_score(w) for w in winners]
    wins_a, wins_b = scores.count(0.0), scores.count(1.0)
    kw = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    return PairwiseSummary(
        n=len(scores),
        wins_a=wins_a,
        wins_b=wins_b,
        ties=len(scores) - wins_a - wins_b,
        win_rate=bootstrap_ci(scores, **kw),  # type: ignore[arg-type]
        flips=sum(bool(f) for f in flips),
        flip_rate=bootstrap_ci([float(f) for f in flips], **kw),  # type: ignore[arg-type]
        sign_test_p=sign_test(wins_b, wins_a),
    )


@dataclass(frozen=True)
class HumanPreferences:
    """The judge against people's verdicts on the pairs they judged: how often the two agree
    (exactly: a, b or tie), and B's win rate by PPI++ (people's verdicts rectifying the
    judge's on every pair)."""

    n_labelled: int
    agreement: ConfidenceInterval
    win_rate: PPIEstimate


def human_preferences(
    judge: Sequence[str | None],
    human: Sequence[str | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> HumanPreferences:
    """The judge's agreement with people's preferences and the PPI++ win rate of B.

    Args:
        judge: each pair's judged verdict ("a", "b", "tie"; None: not measured).
        human: people's verdict on the same pair (None where they gave none).
        confidence: the intervals' level.
        n_resamples: bootstrap resamples of the agreement.
        seed: the resampling's seed.
    """
    if len(judge) != len(human):
        raise ValueError(f"{len(judge)} judged verdicts but {len(human)} human ones")
    judged = [None if j is None else winner_score(j) for j in judge]
    labels = [None if h is None else winner_score(h) for h in human]
    matches = [float(j == h) for j, h in zip(judged, labels, strict=True) if None not in (j, h)]
    return HumanPreferences(
        n_labelled=len(matches),
        agreement=bootstrap_ci(matches, confidence=confidence, n_resamples=n_resamples, seed=seed),
        # a win rate lies in [0, 1]
        win_rate=ppi_mean(labels, judged, confidence=confidence, bounds=(0.0, 1.0)),
    )


# --------------------------------------------------------------------------- Bradley–Terry


@dataclass(frozen=True)
class Strength:
    """A system's Bradley–Terry strength (log scale, the systems' mean 0: B beats A with
    probability 1 / (1 + exp(strength_A − strength_B))), its bootstrap interval, and the
    comparisons it rests on: its wins, losses and ties, and how many against each opponent."""

    system: str
    strength: float
    low: float | None
    high: float | None
    wins: int
    losses: int
    ties: int
    opponents: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class BradleyTerry:
    """Strengths, strongest first, with how they were fitted and resampled."""

    strengths: list[Strength]
    prior: float
    n_comparisons: int
    n_groups: int
    confidence: float
    method: str


def _counts(
    comparisons: Sequence[tuple[str, str, str]], systems: Sequence[str]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each ordered pair's score (i over j: wins + ties/2) and each pair's comparisons."""
    import numpy as np

    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    score, n = np.zeros((k, k)), np.zeros((k, k))
    for a, b, winner in comparisons:
        i, j, s = index[a], index[b], winner_score(winner)
        score[j, i] += s
        score[i, j] += 1.0 - s
        n[i, j] += 1.0
        n[j, i] += 1.0
    return score, n


def _mm(
    score: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    *,
    tol: float = 1e-10,
    max_iter: int = 100_000,
) -> npt.NDArray[np.float64] | None:
    """Hunter's (2004) MM iteration for the Bradley–Terry maximum likelihood:
    p_i ← W_i / Σ_j n_ij / (p_i + p_j), rescaled to a geometric mean of 1 each step. The log
    strengths (mean 0), or None when there is no maximum (a system with no win, or a group of
    systems that never loses to the rest) or it was not reached."""
    import numpy as np

    wins = score.sum(axis=1)
    if np.any(wins <= 0.0):
        return None
    p = np.ones(len(wins))
    for _ in range(max_iter):
        denom = (n / (p[:, None] + p[None, :])).sum(axis=1)
        new = wins / denom
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(np.log(new) - np.log(p))) < tol:
            logs = np.log(new)
            return logs - logs.mean()  # type: ignore[no-any-return]
        p = new
    return None


def bradley_terry(
    comparisons: Sequence[tuple[str, str, str]],
    groups: Sequence[str] | None = None,
    *,
    prior: float = 1.0,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> BradleyTerry:
    """Bradley–Terry strengths of the systems in `comparisons`, with bootstrap intervals.

    A tie counts as half a win for each side (the likelihood of a tie is that of one half-win
    each way). `prior` adds that many virtual ties between every two systems, which keeps every
    strength finite when a system wins or loses all its comparisons (a bootstrap resample does
    often); ``prior=0`` is the plain maximum likelihood, which must exist. The interval of each
    strength is a percentile bootstrap that resamples the `groups` (e.g. the questions: all
    the comparisons of one question together; by default each comparison alone).

    Args:
        comparisons: (system A, system B, verdict "a" | "b" | "tie") per comparison.
        groups: each comparison's group, resampled together (same length as `comparisons`).
        prior: virtual ties added between every two systems (>= 0).
        confidence: the intervals' level.
        n_resamples: bootstrap resamples of the groups.
        seed: the resampling's seed.
    """
    import numpy as np

    check_resampling(confidence, n_resamples)
    if prior < 0:
        raise ValueError(f"prior must be >= 0, got {prior}")
    groups = list(groups) if groups is not None else [str(i) for i in range(len(comparisons))]
    if len(groups) != len(comparisons):
        raise ValueError(f"{len(comparisons)} comparisons but {len(groups)} groups")
    if any(a == b for a, b, _ in comparisons):
        raise ValueError("a system compared with itself")
    systems = sorted({s for a, b, _ in comparisons for s in (a, b)})
    if len(systems) < 2:
        raise ValueError("Bradley–Terry needs comparisons between at least two systems")
    k = len(systems)
    virtual = prior * (1.0 - np.eye(k))  # `prior` ties per pair: prior/2 to each side
    names = sorted(set(groups))
    per_group = {
        g: _counts([c for c, h in zip(comparisons, groups, strict=True) if h == g], systems)
        for g in names
    }
    score_g = np.stack([per_group[g][0] for g in names])
    n_g = np.stack([per_group[g][1] for g in names])
    fitted = _mm(score_g.sum(axis=0) + virtual / 2, n_g.sum(axis=0) + virtual)
    if fitted is None:
        raise ValueError(
            "the comparisons have no Bradley–Terry maximum: a system never wins, or some "
            "systems never lose to the others; give prior > 0"
        )
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_resamples):
        weights = np.bincount(rng.integers(0, len(names), len(names)), minlength=len(names))
        s = np.tensordot(weights, score_g, axes=1) + virtual / 2
        fit = _mm(s, np.tensordot(weights, n_g, axes=1) + virtual)
        if fit is not None:  # only with prior 0: that resample has no maximum
            draws.append(fit)
    resampled = np.array(draws)
    strengths = []
    for i, system in enumerate(systems):
        low, high = percentile_interval(resampled[:, i], confidence) if len(draws) else (None, None)
        strengths.append(_strength(system, float(fitted[i]), low, high, comparisons))
    strengths.sort(key=lambda s: -s.strength)
    kept = f"{len(draws)} of {n_resamples}" if len(draws) < n_resamples else f"{n_resamples}"
    return BradleyTerry(
        strengths=strengths,
        prior=prior,
        n_comparisons=len(comparisons),
        n_groups=len(names),
        confidence=confidence,
        method=(
            f"MM maximum likelihood, ties as half wins, {prior:g} virtual ties per pair; "
            f"percentile bootstrap over {len(names)} groups, {kept} resamples, seed {seed}"
        ),
    )


def _strength(
    system: str,
    value: float,
    low: float | None,
    high: float | None,
    comparisons: Sequence[tuple[str, str, str]],
) -> Strength:
    wins = losses = ties = 0
    opponents: dict[str, int] = {}
    for a, b, winner in comparisons:
        if system not in (a, b):
            continue
        other = b if system == a else a
        opponents[other] = opponents.get(other, 0) + 1
        if winner == "tie":
            ties += 1
        elif (winner == "a") == (system == a):
            wins += 1
        else:
            losses += 1
    return Strength(system, value, low, high, wins, losses, ties, dict(sorted(opponents.items())))
