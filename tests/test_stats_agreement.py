"""Agreement statistics (κ, balanced accuracy, AUROC, Spearman, Pearson, confusion matrix).

Each statistic is checked against a textbook computation written here, independently of the
library's vectorised weighted-count code: κ from observed and chance agreement summed cell by
cell, AUROC by comparing every positive with every negative (O(n²)), Spearman from ranks
counted pair by pair. The hand-worked cases give the expected numbers in their comments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from rageval.stats import (
    AGREEMENT_STATISTICS,
    KappaWeights,
    agreement,
    agreement_difference,
    auroc,
    balanced_accuracy,
    cohen_kappa,
    confusion_matrix,
    pearson,
    spearman,
)

# ---------------------------------------------------------------------- textbook references


def ref_kappa(a: Sequence[float], b: Sequence[float], weights: str | None = None) -> float:
    levels = sorted(set(a) | set(b))
    k, n = len(levels), len(a)
    pos = {v: i for i, v in enumerate(levels)}
    table = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        table[pos[x]][pos[y]] += 1
    rows = [sum(table[i]) / n for i in range(k)]
    cols = [sum(table[i][j] for i in range(k)) / n for j in range(k)]

    def w(i: int, j: int) -> float:
        if weights is None:
            return 0.0 if i == j else 1.0
        return abs(i - j) if weights == "linear" else (i - j) ** 2

    observed = sum(w(i, j) * table[i][j] / n for i in range(k) for j in range(k))
    chance = sum(w(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k))
    return 1 - observed / chance


def ref_auroc(labels: Sequence[float], scores: Sequence[float]) -> float:
    pos = [s for y, s in zip(labels, scores, strict=True) if y == 1]
    neg = [s for y, s in zip(labels, scores, strict=True) if y == 0]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def ref_ranks(values: Sequence[float]) -> list[float]:
    return [sum(v < x for v in values) + (sum(v == x for v in values) + 1) / 2 for x in values]


def ref_pearson(x: Sequence[float], y: Sequence[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


def ref_balanced_accuracy(truth: Sequence[float], pred: Sequence[float]) -> float:
    recalls = []
    for c in sorted(set(truth)):
        members = [p for t, p in zip(truth, pred, strict=True) if t == c]
        recalls.append(sum(p == c for p in members) / len(members))
    return sum(recalls) / len(recalls)


# ---------------------------------------------------------------------- hand-worked cases


def test_cohen_kappa_of_a_hand_worked_two_by_two_table() -> None:
    # human x judge table [[20, 5], [10, 15]]: observed agreement 35/50 = 0.7; chance
    # (25/50)(30/50) + (25/50)(20/50) = 0.5; κ = (0.7 - 0.5) / (1 - 0.5) = 0.4
    human = [0] * 25 + [1] * 25
    judge = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 15
    assert cohen_kappa(human, judge) == pytest.approx(0.4)
    assert confusion_matrix(human, judge, [0, 1]) == [[20, 5], [10, 15]]
    # recall of class 0: 20/25, of class 1: 15/25 -> (0.8 + 0.6) / 2
    assert balanced_accuracy(human, judge) == pytest.approx(0.7)


def test_weighted_kappa_of_a_hand_worked_three_level_table() -> None:
    # table [[2, 1, 0], [0, 2, 1], [1, 0, 3]] (n = 10); marginals: human (.3, .3, .4),
    # judge (.3, .3, .4). Linear weights |i-j|: observed disagreement (1+1+2)/10 = .4;
    # chance Σ|i-j| r_i c_j = 2(.3·.3·1 + .3·.4·1 + .3·.4·2) = .9 -> κ = 1 - .4/.9.
    # Quadratic: observed (1+1+4)/10 = .6; chance 2(.09 + .12 + .12·4) = 1.38 -> 1 - .6/1.38
    cells = {(0, 0): 2, (0, 1): 1, (1, 1): 2, (1, 2): 1, (2, 0): 1, (2, 2): 3}
    human = [h for (h, _), c in cells.items() for _ in range(c)]
    judge = [j for (_, j), c in cells.items() for _ in range(c)]
    assert cohen_kappa(human, judge, weights="linear") == pytest.approx(1 - 0.4 / 0.9)
    assert cohen_kappa(human, judge, weights="quadratic") == pytest.approx(1 - 0.6 / 1.38)


def test_auroc_of_a_hand_worked_case_with_ties() -> None:
    # positives 0.9, 0.5; negatives 0.5, 0.1: pairs (0.9>0.5), (0.9>0.1), (0.5=0.5 -> ½),
    # (0.5>0.1) -> 3.5 / 4
    assert auroc([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1]) == pytest.approx(0.875)


def test_spearman_of_a_hand_worked_case_with_ties() -> None:
    # x ranks 1, 2.5, 2.5, 4; y ranks 1, 2, 3, 4 -> r = 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))


# ---------------------------------------------------------------------- against the references


@pytest.mark.parametrize("seed", range(5))
def test_statistics_match_textbook_computations_on_random_cases(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 80))
    human3 = list(rng.integers(0, 3, size=n).astype(float))
    judge3 = [float(min(2, max(0, h + rng.integers(-1, 2)))) for h in human3]
    assert cohen_kappa(human3, judge3) == pytest.approx(ref_kappa(human3, judge3))
    weightings: tuple[KappaWeights, ...] = ("linear", "quadratic")
    for w in weightings:
        assert cohen_kappa(human3, judge3, weights=w) == pytest.approx(ref_kappa(human3, judge3, w))
    assert balanced_accuracy(human3, judge3) == pytest.approx(ref_balanced_accuracy(human3, judge3))
    labels = list(rng.integers(0, 2, size=n).astype(float))
    scores = [float(round(y * 0.3 + rng.uniform(), 1)) for y in labels]  # many ties
    assert auroc(labels, scores) == pytest.approx(ref_auroc(labels, scores))
    x = list(np.round(rng.normal(size=n), 1))
    y = [float(round(v + rng.normal(), 1)) for v in x]
    assert spearman(x, y) == pytest.approx(ref_pearson(ref_ranks(x), ref_ranks(y)))
    assert pearson(x, y) == pytest.approx(ref_pearson(x, y))


def test_bootstrap_resamples_are_the_rows_resampled() -> None:
    # The counts-based resampling must equal drawing row indices with replacement and
    # computing the statistic on each resample: same seed, same draws, same interval.
    rng = np.random.default_rng(7)
    n, resamples, seed = 40, 300, 3
    labels = list(rng.integers(0, 2, size=n).astype(float))
    scores = [float(round(y * 0.4 + rng.uniform(), 2)) for y in labels]
    x = list(rng.normal(size=n))
    y = [v + rng.normal() for v in x]
    human = list(rng.integers(0, 3, size=n).astype(float))
    judge = [float(min(2, max(0, h + rng.integers(-1, 2)))) for h in human]
    cases = {
        "auroc": (labels, scores, ref_auroc),
        "spearman": (x, y, lambda a, b: ref_pearson(ref_ranks(a), ref_ranks(b))),
        "weighted_kappa_quadratic": (human, judge, lambda a, b: ref_kappa(a, b, "quadratic")),
    }
    for name, (a, b, ref) in cases.items():
        draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        values = []
        for idx in draws:
            ra, rb = [a[i] for i in idx], [b[i] for i in idx]
            try:
                values.append(ref(ra, rb))
            except ZeroDivisionError:
                continue
        expected = np.quantile(values, [0.025, 0.975])
        est = agreement(name, a, b, n_resamples=resamples, seed=seed)
        assert est.low == pytest.approx(expected[0])
        assert est.high == pytest.approx(expected[1])
        assert est.n_undefined == resamples - len(values)


def test_a_change_of_judge_is_resampled_in_pairs() -> None:
    # after − before on the same rows: each resample draws the rows once and computes both
    # statistics on them (row indices drawn as the single-statistic test draws them)
    rng = np.random.default_rng(5)
    n, resamples, seed = 50, 400, 2
    human = list(rng.integers(0, 2, size=n).astype(float))
    before = [float(h if rng.uniform() < 0.6 else 1 - h) for h in human]
    after = [float(h if rng.uniform() < 0.85 else 1 - h) for h in human]
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    values = []
    for idx in draws:
        h = [human[i] for i in idx]
        values.append(
            ref_kappa(h, [after[i] for i in idx]) - ref_kappa(h, [before[i] for i in idx])
        )
    expected = np.quantile(values, [0.025, 0.975])
    change = agreement_difference(
        "cohen_kappa", human, before, after, n_resamples=resamples, seed=seed
    )
    assert change.value == pytest.approx(ref_kappa(human, after) - ref_kappa(human, before))
    assert change.low == pytest.approx(expected[0]) and change.high == pytest.approx(expected[1])
    assert change.method.startswith("paired percentile bootstrap") and change.n == n
    # pairing: the change's interval is narrower than the two intervals' spread suggests
    one = agreement("cohen_kappa", human, before, n_resamples=resamples, seed=seed)
    other = agreement("cohen_kappa", human, after, n_resamples=resamples, seed=seed)
    assert change.low is not None and change.high is not None
    assert one.high is not None and one.low is not None
    assert other.high is not None and other.low is not None
    assert change.high - change.low < (other.high - other.low) + (one.high - one.low)


def test_no_change_of_judge_is_zero_with_a_zero_interval() -> None:
    human = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    judge = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    same = agreement_difference("balanced_accuracy", human, judge, judge)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    one_class = agreement_difference("auroc", [1.0] * 8, judge, judge)  # no negative
    assert one_class.value is None and one_class.note is not None
    assert one_class.note.startswith("before: ")
    with pytest.raises(ValueError, match="the same rows"):
        agreement_difference("auroc", human, judge, judge[:-1])


# ---------------------------------------------------------------------- intervals and edges


def test_every_statistic_has_an_interval_around_its_value() -> None:
    rng = np.random.default_rng(11)
    human = rng.integers(0, 2, size=200).astype(float)
    judge_score = np.clip(human * 0.5 + rng.normal(0.25, 0.2, size=200), 0, 1)
    judge_label = (judge_score >= 0.5).astype(float)
    for name in AGREEMENT_STATISTICS:
        judge = judge_score if name in ("auroc", "spearman", "pearson") else judge_label
        est = agreement(name, list(human), list(judge))
        assert est.value is not None and est.low is not None and est.high is not None, name
        assert est.low <= est.value <= est.high, name
        assert est.high - est.low < 0.3, name
        assert est.n == 200 and est.n_undefined == 0


def test_interval_narrows_with_more_pairs() -> None:
    rng = np.random.default_rng(12)

    def width(n: int) -> float:
        x = rng.normal(size=n)
        est = agreement("spearman", list(x), list(x + rng.normal(size=n)))
        assert est.low is not None and est.high is not None
        return est.high - est.low

    assert width(2000) < width(50) / 4


def test_undefined_statistics_say_why_instead_of_inventing_a_number() -> None:
    one_class = agreement("auroc", [1, 1, 1], [0.2, 0.5, 0.9])
    assert one_class.value is None and one_class.note is not None and "one class" in one_class.note
    constant = agreement("spearman", [1, 2, 3], [0.5, 0.5, 0.5])
    assert constant.value is None and constant.low is None
    same = agreement("cohen_kappa", [1, 1], [1, 1])
    assert same.value is None
    empty = agreement("pearson", [], [])
    assert empty.value is None and empty.n == 0


def test_an_interval_needs_the_statistic_defined_on_nearly_every_resample() -> None:
    # 1 positive among 6: a third of the resamples have no positive, so no interval is given
    est = agreement("auroc", [1, 0, 0, 0, 0, 0], [0.9, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert est.value == 1.0
    assert est.low is None and est.high is None
    assert est.n_undefined > 200 and est.note is not None and "no interval" in est.note


def test_bad_input_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="paired"):
        agreement("spearman", [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        agreement("pearson", [1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="binary"):
        auroc([0, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="not one of the levels"):
        confusion_matrix([0, 1], [0, 0.5], [0, 1])
    with pytest.raises(ValueError, match="unknown statistic"):
        agreement("f1", [1.0], [1.0])
