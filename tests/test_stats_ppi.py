"""Prediction-powered means (PPI++) and the judge-noise decomposition.

The simulation tests draw synthetic human labels and a synthetic judge whose bias and noise
are known, many times over, and check what a confidence interval promises: the 95% interval
covers the true mean in 93–97% of the datasets (2,000 datasets per case, so the Monte-Carlo
error of a coverage is about ±0.5%), and it is never wider than the labelled rows' own.
Below about 50 labelled rows the normal approximation covers a little less (about 93.5% at
n = 50): benchmarks/archive/RESULTS-2026-12.md has the coverage and width by label count.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from rageval.stats import judge_noise, ppi_mean

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def _binary_good_judge(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    # 60% of answers are faithful; the judge scores them 0.2 + 0.6·y ± 0.15: biased low, noisy
    y = (rng.random(size) < 0.6).astype(float)
    return y, np.clip(0.2 + 0.6 * y + rng.normal(0, 0.15, size), 0, 1)


def _binary_useless_judge(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(size) < 0.6).astype(float)
    return y, rng.uniform(0.5, 1.0, size)  # unrelated to the label, and biased high


def _graded_biased_judge(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    # human ratings on 0..1 (mean 0.5); the judge is generous (+0.3) and compresses the scale
    y = rng.beta(2, 2, size)
    return y, np.clip(0.3 + 0.5 * y + rng.normal(0, 0.1, size), 0, 1)


TRUE_MEAN: dict[Draw, float] = {
    _binary_good_judge: 0.6,
    _binary_useless_judge: 0.6,
    _graded_biased_judge: 0.5,
}


def _simulate(draw: Draw, n: int, big_n: int, datasets: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    truth = TRUE_MEAN[draw]
    covered = classical_covered = 0
    widths, classical_widths, estimates, judge_means = [], [], [], []
    for _ in range(datasets):
        y, f = draw(rng, n + big_n)
        labels: list[float | None] = [*y[:n].tolist(), *([None] * big_n)]
        est = ppi_mean(labels, f.tolist())
        assert est.low is not None and est.high is not None and est.mean is not None
        assert est.classical_low is not None and est.classical_high is not None
        covered += est.low <= truth <= est.high
        classical_covered += est.classical_low <= truth <= est.classical_high
        widths.append(est.high - est.low)
        classical_widths.append(est.classical_high - est.classical_low)
        estimates.append(est.mean)
        judge_means.append(float(f.mean()))
    w, cw = np.asarray(widths), np.asarray(classical_widths)
    return {
        "coverage": covered / datasets,
        "classical_coverage": classical_covered / datasets,
        "never_wider": float(np.all(w <= cw + 1e-12)),
        "width_ratio": float(w.mean() / cw.mean()),
        "bias": float(np.mean(estimates) - truth),
        "judge_bias": float(np.mean(judge_means) - truth),
    }


@pytest.mark.parametrize(
    ("draw", "n", "big_n", "max_width_ratio"),
    [
        (_binary_good_judge, 200, 1000, 0.75),
        (_binary_good_judge, 100, 1000, 0.75),
        (_binary_useless_judge, 200, 1000, 1.0),
        (_graded_biased_judge, 100, 1000, 0.85),
    ],
    ids=["good-judge-n200", "good-judge-n100", "useless-judge", "biased-graded-judge"],
)
def test_ppi_interval_covers_the_true_mean_and_is_never_wider(
    draw: Draw, n: int, big_n: int, max_width_ratio: float
) -> None:
    result = _simulate(draw, n, big_n, datasets=2000, seed=n + big_n)
    assert 0.93 <= result["coverage"] <= 0.97, result
    assert result["never_wider"] == 1.0, result
    assert result["width_ratio"] <= max_width_ratio, result
    # the judge's own mean is off; the corrected mean is not
    assert abs(result["bias"]) < 0.005, result


def test_a_biased_judge_mean_misses_where_ppi_does_not() -> None:
    result = _simulate(_graded_biased_judge, 100, 1000, datasets=300, seed=1)
    assert result["judge_bias"] > 0.04  # the generous judge's mean is far off the truth
    assert abs(result["bias"]) < 0.01


def test_hand_worked_ppi_estimate() -> None:
    # labelled (y, f): (1, .8), (0, .4), (1, .6); unlabelled f: .5, .7, .9, .3
    # s²_L(y) = 1/3, s²_L(f) = .04, s_L(y, f) = .1; s²_U(f) = .2/3; n/N = 3/4
    # λ = .1 / (.04 + .75 · .2/3) = 1.1111 -> clipped to 1
    # θ̂ = mean_U(f) + mean_L(y - f) = .6 + (.2 - .4 + .4)/3 = .6 + 0.0667 = .66667
    # Var̂ = s²_U(f)/N + s²_L(y - f)/n = (.2/3)/4 + s²(.2, -.4, .4)/3
    labels = [1.0, 0.0, 1.0, None, None, None, None]
    judge = [0.8, 0.4, 0.6, 0.5, 0.7, 0.9, 0.3]
    est = ppi_mean(labels, judge)
    assert est.lam == 1.0
    assert est.mean == pytest.approx(0.6 + 0.2 / 3)
    rect = np.array([0.2, -0.4, 0.4])
    variance = (0.2 / 3) / 4 + rect.var(ddof=1) / 3
    assert est.high is not None and est.mean is not None
    assert est.high - est.mean == pytest.approx(1.959964 * math.sqrt(variance), rel=1e-5)
    assert (est.n_labelled, est.n_unlabelled) == (3, 4)
    assert est.classical_mean == pytest.approx(2 / 3)


def test_tuned_lambda_is_the_power_tuning_formula_when_not_clipped() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=300)
    f = 0.5 * y + rng.normal(size=300)  # weakly informative: λ* inside (0, 1)
    labels: list[float | None] = [*y[:100].tolist(), *([None] * 200)]
    est = ppi_mean(labels, f.tolist())
    cov = np.cov(y[:100], f[:100], ddof=1)[0, 1]
    expected = cov / (f[:100].var(ddof=1) + (100 / 200) * f[100:].var(ddof=1))
    assert 0 < expected < 1
    assert est.lam == pytest.approx(expected)


def test_lambda_zero_is_the_labelled_rows_alone_and_lambda_one_classic_ppi() -> None:
    labels: list[float | None] = [1.0, 0.0, 1.0, 1.0, None, None, None]
    judge = [0.9, 0.2, 0.7, 0.4, 0.6, 0.8, 0.1]
    alone = ppi_mean(labels, judge, lam=0.0)
    assert alone.mean == pytest.approx(0.75) and alone.mean == alone.classical_mean
    assert (alone.low, alone.high) == (alone.classical_low, alone.classical_high)
    classic = ppi_mean(labels, judge, lam=1.0)
    assert classic.mean == pytest.approx(0.5 + (0.1 - 0.2 + 0.3 + 0.6) / 4)


def test_bounds_cut_the_estimates_and_intervals_where_the_labels_lie() -> None:
    # two labels, no unlabelled row: λ = 0, the mean 0.5, s² = 0.5, half-width
    # 1.959964·√(0.5/2) = 0.979982: [-0.479982, 1.479982], past a [0, 1] scale on both sides
    labels, judge = [0.0, 1.0], [0.0, 1.0]
    free = ppi_mean(labels, judge)
    assert free.low == pytest.approx(-0.479982, abs=1e-6)
    assert free.high == pytest.approx(1.479982, abs=1e-6)
    cut = ppi_mean(labels, judge, bounds=(0.0, 1.0))
    assert (cut.mean, cut.low, cut.high) == (0.5, 0.0, 1.0)
    assert (cut.classical_mean, cut.classical_low, cut.classical_high) == (0.5, 0.0, 1.0)
    # the rectified mean itself is cut too: labels 1 where the judge said 0, and the judge
    # saying 1 on the rows nobody labelled (λ fixed at 1: 1 + mean_L(y − f) = 1 + 1 = 2)
    # with variance 0 (both terms constant): [2, 2] is cut to [1, 1], and the method says
    # the estimate lay past the range
    over = ppi_mean([1.0, 1.0, None, None], [0.0, 0.0, 1.0, 1.0], lam=1.0, bounds=(0.0, 1.0))
    assert (over.mean, over.low, over.high) == (1.0, 1.0, 1.0)
    assert "the rectified mean 2 lies past the labels' range [0, 1], cut" in over.method
    assert "past the labels' range" not in cut.method
    with pytest.raises(ValueError, match="bounds"):
        ppi_mean(labels, judge, bounds=(1.0, 0.0))


def test_rows_without_a_judge_value_or_without_labels() -> None:
    est = ppi_mean([1.0, 0.0, 1.0, None, 0.0], [0.9, 0.1, 0.8, 0.5, None])
    assert (est.n_labelled, est.n_unlabelled, est.n_labelled_without_judge) == (3, 1, 1)
    too_few = ppi_mean([1.0, None, None], [0.9, 0.5, 0.4])
    assert too_few.mean is None and too_few.low is None and "at least 2" in too_few.method
    no_unlabelled = ppi_mean([1.0, 0.0, 1.0], [0.9, 0.2, 0.7])
    assert no_unlabelled.lam == 0.0 and no_unlabelled.mean == no_unlabelled.classical_mean
    with pytest.raises(ValueError, match="row-matched"):
        ppi_mean([1.0], [0.5, 0.4])
    with pytest.raises(ValueError, match="lam"):
        ppi_mean([1.0, 0.0], [0.5, 0.4], lam=1.5)


# ---------------------------------------------------------------------- judge noise


def test_hand_worked_judge_noise() -> None:
    # cells (repeats): [.2, .4] -> mean .3, s² .02; [.6, .6] -> .6, 0; [1., .8] -> .9, .02
    # pooled within variance = (.02 + 0 + .02) / 3 dof... squares .02+0+.02 = .04 over 3 = .01333
    # cell means .3, .6, .9: variance .09; noise left in a mean of 2: .01333 / 2 = .006667
    # share = .006667 / .09 = .07407; width share = 1 - sqrt(1 - .07407)
    noise = judge_noise([[0.2, 0.4], [0.6, 0.6], [1.0, 0.8]])
    assert noise is not None
    assert noise.within_variance == pytest.approx(0.04 / 3)
    assert noise.cell_variance == pytest.approx(0.09)
    assert noise.noise_variance_share == pytest.approx((0.04 / 3 / 2) / 0.09)
    assert noise.ci_width_share == pytest.approx(1 - math.sqrt(1 - (0.04 / 3 / 2) / 0.09))
    assert noise.mean_cell_sd == pytest.approx((math.sqrt(0.02) + 0 + math.sqrt(0.02)) / 3)
    assert (noise.n_cells, noise.repeats) == (3, 2)


def test_judge_noise_of_a_noiseless_judge_is_zero_and_needs_two_cells() -> None:
    still = judge_noise([[0.5, 0.5, 0.5], [0.7, 0.7, 0.7]])
    assert still is not None
    assert still.noise_variance_share == pytest.approx(0.0, abs=1e-12)
    assert still.ci_width_share == pytest.approx(0.0, abs=1e-12)
    assert judge_noise([[0.5, 0.6]]) is None
    assert judge_noise([[0.5], [0.6]]) is None


def test_judge_noise_share_recovers_a_known_noise_level() -> None:
    # true cell values vary with variance .04; the judge adds noise of variance .04 per score;
    # with k = 4 repeats a cell mean keeps .01 of noise: share .01 / .05 = 0.2
    rng = np.random.default_rng(5)
    truth = rng.normal(0.5, 0.2, size=4000)
    repeats = truth[:, None] + rng.normal(0, 0.2, size=(4000, 4))
    noise = judge_noise(repeats.tolist())
    assert noise is not None
    assert noise.within_variance == pytest.approx(0.04, rel=0.05)
    assert noise.noise_variance_share == pytest.approx(0.2, abs=0.02)
