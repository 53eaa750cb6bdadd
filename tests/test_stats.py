"""Bootstrap confidence intervals and the paired comparison of two runs."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rageval.stats import bootstrap_ci, compare, paired_difference


def test_ci_of_a_known_distribution_covers_its_mean_about_95_percent_of_the_time() -> None:
    # Skewed data (exponential, mean 1) at a realistic size; the percentile bootstrap slightly
    # under-covers at small n, so the band allows 91-98%.
    trials, n, covered = 400, 60, 0
    for trial in range(trials):
        data = np.random.default_rng(10_000 + trial).exponential(1.0, size=n)
        ci = bootstrap_ci(list(data), seed=trial)
        assert ci.low is not None and ci.high is not None
        covered += ci.low <= 1.0 <= ci.high
    assert 0.91 <= covered / trials <= 0.98


def test_ci_narrows_with_more_data_and_contains_the_mean() -> None:
    rng = np.random.default_rng(1)
    small = bootstrap_ci(list(rng.uniform(size=20)))
    large = bootstrap_ci(list(rng.uniform(size=2000)))
    for ci in (small, large):
        assert ci.low is not None and ci.high is not None and ci.mean is not None
        assert ci.low <= ci.mean <= ci.high
    assert large.high is not None and large.low is not None
    assert small.high is not None and small.low is not None
    assert (large.high - large.low) < (small.high - small.low) / 5


def test_ci_is_reproducible_and_depends_on_the_seed() -> None:
    values = list(np.random.default_rng(2).normal(size=50))
    assert bootstrap_ci(values) == bootstrap_ci(values)
    assert bootstrap_ci(values, seed=1).low != bootstrap_ci(values, seed=0).low


def test_not_measured_values_are_left_out_not_counted_as_zero() -> None:
    ci = bootstrap_ci([1.0, None, 0.5, None])
    assert ci.n == 2
    assert ci.mean == 0.75 and ci.low is not None and ci.high is not None


def test_edge_sizes() -> None:
    one = bootstrap_ci([0.7])
    # one value says nothing about the uncertainty: a mean, and no interval (not [0.7, 0.7])
    assert (one.mean, one.low, one.high, one.n) == (0.7, None, None, 1)
    assert one.undefined == "one measured value"
    same = bootstrap_ci([0.25, None, 0.25, 0.25])
    assert (same.mean, same.low, same.high) == (0.25, None, None)
    assert same.undefined == "all 3 measured values are equal"
    assert bootstrap_ci([0.25, 0.5]).undefined is None
    none = bootstrap_ci([None, None])
    assert none.mean is None and none.low is None and none.n == 0
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([float("nan")])


def test_large_input_is_handled_in_chunks() -> None:
    values = list(np.random.default_rng(3).uniform(size=100_000))
    ci = bootstrap_ci(values)
    assert ci.low is not None and ci.high is not None
    assert ci.high - ci.low < 0.01
    assert ci.low < 0.5 < ci.high


def test_paired_difference_finds_a_planted_difference() -> None:
    rng = np.random.default_rng(4)
    a = rng.uniform(0.3, 0.9, size=80)
    b = a + 0.05 + rng.normal(0, 0.05, size=80)  # the same items, improved by 0.05 on average
    d = paired_difference(list(a), list(b))
    assert d.n_pairs == 80
    assert d.p_value is not None and d.p_value < 0.001
    assert d.low is not None and d.high is not None and 0 < d.low < 0.05 < d.high


def test_paired_difference_finds_nothing_between_identical_runs() -> None:
    a = list(np.random.default_rng(5).uniform(size=50))
    d = paired_difference(a, list(a))
    assert d.mean_diff == 0.0 and d.low == 0.0 and d.high == 0.0
    assert d.p_value == 1.0


def test_differences_below_1e9_are_ties() -> None:
    # the same values summed in another order: differences in the last bits, both signs
    rng = np.random.default_rng(6)
    a = rng.uniform(size=40)
    b = a + rng.choice([-1, 1], size=40) * rng.uniform(1e-16, 5e-10, size=40)
    d = paired_difference(list(a), list(b))
    assert d.n_ties == d.n_pairs == 40 and d.no_difference
    assert d.mean_diff == 0.0 and d.low == 0.0 and d.high == 0.0 and d.p_value == 1.0
    # one real change among them is no tie
    b[3] += 0.25
    d = paired_difference(list(a), list(b))
    assert d.n_ties == 39 and not d.no_difference
    assert d.mean_diff == pytest.approx(0.25 / 40, abs=1e-9)


@dataclass
class _Run:
    """What compare() reads of a run: one metric, no label column."""

    ids: list[str]
    values: list[float | None]
    metrics: tuple[str, ...] = ("m",)

    def __getitem__(self, metric: str) -> list[float | None]:
        return self.values

    def summary(self) -> dict[str, Any]:
        return {"m": SimpleNamespace(ppi={})}

    def label_values(self, column: str) -> list[float | None]:
        raise AssertionError("no label column")


def test_compare_names_no_sample_that_moved_by_less_than_1e9() -> None:
    a = _Run(["s1", "s2", "s3"], [0.2098, 0.5, 0.7])
    b = _Run(["s3", "s2", "s1"], [0.7 + 2e-16, 0.75, 0.2098 - 3e-17])
    (c,) = compare(a, b)
    assert c.movers == [("s2", 0.5, 0.75)]
    assert c.diff.n_ties == 2 and not c.diff.no_difference
    (same,) = compare(a, _Run(["s1", "s2", "s3"], [0.2098 - 3e-17, 0.5, 0.7 + 2e-16]))
    assert same.movers == [] and same.diff.no_difference and same.diff.p_value == 1.0


def test_paired_difference_with_noise_only_is_rarely_significant() -> None:
    significant = 0
    for trial in range(100):
        rng = np.random.default_rng(100 + trial)
        a = rng.uniform(size=30)
        b = a + rng.normal(0, 0.1, size=30)  # no true difference
        d = paired_difference(list(a), list(b), seed=trial)
        assert d.p_value is not None
        significant += d.p_value < 0.05
    assert significant <= 12  # about 5 expected


def test_paired_difference_uses_only_items_measured_in_both() -> None:
    d = paired_difference([0.1, None, 0.5, 0.2], [0.3, 0.9, None, 0.4])
    assert d.n_pairs == 2
    assert d.mean_diff == pytest.approx(0.2)


def test_exact_permutation_p_value_for_small_n() -> None:
    # all 4 differences positive: of the 16 sign patterns, only all-plus and all-minus are as
    # extreme, so the exact two-sided p-value is 2/16
    d = paired_difference([0.0] * 4, [0.1, 0.2, 0.3, 0.4])
    assert d.p_value == pytest.approx(2 / 16)
    assert "exact" in d.method


def test_paired_difference_rejects_unmatched_inputs() -> None:
    with pytest.raises(ValueError, match="item-matched"):
        paired_difference([1.0], [1.0, 2.0])
    empty = paired_difference([None], [1.0])
    assert empty.n_pairs == 0 and empty.mean_diff is None and empty.p_value is None
