"""The pairwise statistics (rageval.stats): win rate, flips, sign test, Bradley–Terry, and
people's preferences, against hand-computed numbers and choix's Bradley–Terry."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from rageval.stats import (
    bradley_terry,
    human_preferences,
    pairwise_summary,
    ppi_mean,
    sign_test,
    winner_score,
)


def test_sign_test_is_the_exact_two_sided_binomial() -> None:
    # 7 wins against 2: 2 * P(X <= 2 | n=9, 1/2) = 2 * (1 + 9 + 36) / 512
    assert sign_test(7, 2) == pytest.approx(92 / 512)
    assert sign_test(2, 7) == pytest.approx(92 / 512)
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(3, 3) == 1.0  # capped: both tails overlap at the middle
    assert sign_test(0, 0) == 1.0  # no pair with a winner: no evidence at all
    with pytest.raises(ValueError, match="negative"):
        sign_test(-1, 2)


def test_win_rate_counts_ties_half_and_flips_apart() -> None:
    s = pairwise_summary(["a", "b", "tie", "b", "tie"], [False, False, True, False, False])
    assert (s.n, s.wins_a, s.wins_b, s.ties, s.flips) == (5, 1, 2, 2, 1)
    assert s.win_rate.mean == pytest.approx((0 + 1 + 0.5 + 1 + 0.5) / 5)
    assert s.win_rate.low is not None and s.win_rate.high is not None
    assert s.win_rate.low <= 0.6 <= s.win_rate.high
    assert s.flip_rate.mean == pytest.approx(0.2)
    assert s.sign_test_p == pytest.approx(sign_test(2, 1)) == 1.0
    with pytest.raises(ValueError, match="'a', 'b' or 'tie'"):
        winner_score("A wins")
    with pytest.raises(ValueError, match="flip flags"):
        pairwise_summary(["a"], [])


def test_bradley_terry_of_two_systems_is_the_log_odds() -> None:
    # A beat B 3 times in 4: p_A / p_B = 3, so the log strengths are ±ln(3)/2
    bt = bradley_terry([("A", "B", "a")] * 3 + [("A", "B", "b")], prior=0, n_resamples=50)
    strengths = {s.system: s.strength for s in bt.strengths}
    assert strengths["A"] == pytest.approx(math.log(3) / 2)
    assert strengths["B"] == pytest.approx(-math.log(3) / 2)
    # a tie is half a win each way: one win and one tie for A is 1.5 : 0.5, the same odds
    tied = bradley_terry([("A", "B", "a"), ("B", "A", "tie")], prior=0, n_resamples=50)
    assert tied.strengths[0].strength == pytest.approx(math.log(3) / 2)
    assert (tied.strengths[0].wins, tied.strengths[0].ties, tied.strengths[0].losses) == (1, 1, 0)


def test_bradley_terry_prior_adds_virtual_ties() -> None:
    # A always wins: no maximum likelihood; one virtual tie per pair makes it 2.5 : 0.5
    with pytest.raises(ValueError, match="no Bradley–Terry maximum"):
        bradley_terry([("A", "B", "a")] * 2, prior=0)
    bt = bradley_terry([("A", "B", "a")] * 2, prior=1.0, n_resamples=50)
    assert bt.strengths[0].system == "A"
    assert bt.strengths[0].strength == pytest.approx(math.log(5) / 2)


def test_bradley_terry_matches_choix_on_random_tournaments() -> None:
    choix = pytest.importorskip("choix")
    rng = random.Random(7)
    names = ["s0", "s1", "s2", "s3", "s4"]
    truth = [0.0, 0.4, -0.3, 1.0, -0.8]
    comparisons = []
    for _ in range(300):
        i, j = rng.sample(range(5), 2)
        p_j = 1 / (1 + math.exp(truth[i] - truth[j]))
        u = rng.random()
        comparisons.append((names[i], names[j], "tie" if u < 0.1 else "b" if u < p_j else "a"))
    bt = bradley_terry(comparisons, prior=0, n_resamples=20)
    # choix has no ties: each win counts twice, each tie once each way (the same likelihood)
    data = []
    for a, b, w in comparisons:
        i, j = names.index(a), names.index(b)
        data += {"a": [(i, j)] * 2, "b": [(j, i)] * 2, "tie": [(i, j), (j, i)]}[w]
    ref = choix.mm_pairwise(5, data, alpha=0.0, tol=1e-12, max_iter=100_000)
    ref = ref - ref.mean()
    ours = {s.system: s.strength for s in bt.strengths}
    assert [ours[n] for n in names] == pytest.approx(list(ref), abs=1e-6)
    assert [s.system for s in bt.strengths] == [names[i] for i in np.argsort(-ref)]


def test_bradley_terry_intervals_resample_groups_and_say_what_each_rests_on() -> None:
    comparisons, groups = [], []
    for q in range(12):
        for a, b, w in (("x", "y", "a"), ("y", "z", "a" if q % 3 else "b"), ("x", "z", "tie")):
            comparisons.append((a, b, w))
            groups.append(f"q{q}")
    bt = bradley_terry(comparisons, groups, n_resamples=200)
    assert bt.n_groups == 12 and bt.n_comparisons == 36
    for s in bt.strengths:
        assert s.low is not None and s.high is not None and s.low <= s.strength <= s.high
        assert sum(s.opponents.values()) == s.wins + s.losses + s.ties == 24
    x = next(s for s in bt.strengths if s.system == "x")
    assert (x.wins, x.losses, x.ties, x.opponents) == (12, 0, 12, {"y": 12, "z": 12})
    assert "12 groups" in bt.method
    with pytest.raises(ValueError, match="groups"):
        bradley_terry(comparisons, groups[:-1])
    with pytest.raises(ValueError, match="itself"):
        bradley_terry([("x", "x", "a")])


def test_human_preferences_agreement_and_ppi_win_rate() -> None:
    judge = ["a", "b", "tie", "b", None, "a"]
    human = ["a", "a", None, "b", "b", None]
    h = human_preferences(judge, human, n_resamples=200)
    # pairs with both: 0 (a = a), 1 (b ≠ a), 3 (b = b); pair 4 has no judge verdict
    assert h.n_labelled == 3
    assert h.agreement.mean == pytest.approx(2 / 3)
    expected = ppi_mean([0.0, 0.0, None, 1.0, 1.0, None], [0.0, 1.0, 0.5, 1.0, None, 0.0])
    assert expected.low is not None and expected.high is not None
    assert expected.low < 0.0 < expected.high < 1.0  # the normal approximation on 3 labels
    assert h.win_rate == dataclasses.replace(
        expected,
        low=0.0,
        classical_low=max(0.0, expected.classical_low or 0.0),
        classical_high=min(1.0, expected.classical_high or 1.0),
    )  # a win rate's interval is cut to [0, 1]
    assert h.win_rate.n_labelled == 3 and h.win_rate.n_unlabelled == 2
