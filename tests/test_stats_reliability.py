"""Krippendorff's alpha against the worked examples of Krippendorff's own paper (Computing
Krippendorff's Alpha-Reliability, 2011) and hand computations; the flip rate of repeats."""

from __future__ import annotations

import pytest

from rageval.stats import flip_rate, krippendorff_alpha

N = None
Row = list[float | None]
# the paper's example C: four observers, twelve units, values 1..5, gaps; the paper gives
# nominal 0.743 and interval 0.849 (unit 12 has one value and is not pairable)
EXAMPLE_C: list[Row] = [
    [1, 1, N, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [N, 5, 5, 5],
    [N, N, 1, 1],
    [N, 3, N, N],
]


def test_the_papers_example_with_gaps() -> None:
    nominal = krippendorff_alpha(EXAMPLE_C, level="nominal")
    interval = krippendorff_alpha(EXAMPLE_C, level="interval")
    assert nominal.value == pytest.approx(0.743, abs=5e-4)
    assert interval.value == pytest.approx(0.849, abs=5e-4)
    assert nominal.n == interval.n == 11  # the unit with one value is not pairable
    assert nominal.low is not None and nominal.high is not None and nominal.value is not None
    assert nominal.low <= nominal.value <= nominal.high


def test_two_coders_binary_by_hand() -> None:
    # the paper's example A. Four units disagree, each 2 ordered pairs over m_u - 1 = 1: 8;
    # 14 zeros and 6 ones of n = 20: 400 - 196 - 36 = 168 ordered pairs differ by chance;
    # alpha = 1 - (n - 1) * 8 / 168 = 1 - 152/168
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    got = krippendorff_alpha(list(zip(a, b, strict=True)), level="nominal")
    assert got.value == pytest.approx(1 - 152 / 168)


def test_interval_by_hand() -> None:
    # units (0, 1), (1, 1), (1, 0.5): within Σ_{i≠j}(vi-vj)² / (m-1): 2, 0, 0.5 -> 2.5;
    # pooled 0,1,1,1,1,0.5 (n=6): Σv=4.5, Σv²=4.25 -> 2(6*4.25 - 20.25) = 10.5
    # alpha = 1 - 5 * 2.5 / 10.5
    got = krippendorff_alpha([[0, 1], [1, 1], [1, 0.5]])
    assert got.value == pytest.approx(1 - 5 * 2.5 / 10.5)


def test_perfect_agreement_is_one_and_the_interval_is_seeded() -> None:
    table = [[0.1, 0.1], [0.9, 0.9], [0.5, 0.5], [0.3, 0.3]]
    got = krippendorff_alpha(table)
    assert got.value == pytest.approx(1.0)
    assert krippendorff_alpha(EXAMPLE_C, seed=3) == krippendorff_alpha(EXAMPLE_C, seed=3)


def test_undefined_cases_say_why() -> None:
    same = krippendorff_alpha([[1, 1], [1, 1], [1, 1]])
    assert same.value is None and "same" in (same.note or "")
    lone_table: list[Row] = [[1, 0], [N, 1]]
    lone = krippendorff_alpha(lone_table)
    assert lone.value is None and lone.n == 1
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(EXAMPLE_C, level="ordinal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unit 1"):
        krippendorff_alpha([[1, 0], [float("nan"), 1]])


def test_flip_rate() -> None:
    # cell 1 passes then fails (flips); cell 2 always passes (0.5 is a pass); cell 3 has one
    # scoring and is left out; cell 4 always fails
    got = flip_rate([[0.9, 0.2], [0.5, 1.0, 0.7], [0.1], [0.0, 0.49]])
    assert (got.rate, got.n_cells, got.n_flipped, got.threshold) == (1 / 3, 3, 1, 0.5)
    assert flip_rate([[0.6, 0.8]], threshold=0.7).rate == 1.0
    assert flip_rate([[0.6]]).rate is None
