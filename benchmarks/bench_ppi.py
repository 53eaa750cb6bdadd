"""How many human labels a prediction-powered mean needs: coverage and width by simulation.

Each scenario draws a population of rows with a human label y and a synthetic judge score f
whose bias and noise are known; every simulated dataset has n labelled rows and N unlabelled
ones. For each (scenario, n) it runs `rageval.stats.ppi_mean` on many datasets and reports:

* the coverage of the 95% interval (the true mean inside it), PPI++ and labelled rows alone;
* the mean interval width of both, and their ratio;
* the mean power-tuned λ and the judge's correlation with the labels;
* the bias of the judge's own mean (what PPI corrects) and of the PPI estimate;
* the labels needed for a ±0.05 interval, from the width at n (width ∝ 1/√n).

A second table is about calibration itself: the bootstrap 95% interval of Cohen's κ, balanced
accuracy and AUROC (`rageval.stats.agreement`) for a judge that agrees with people on 85% of
binary labels, by number of labelled rows, and how often that interval covers the true value.

    python benchmarks/bench_ppi.py --datasets 2000 --unlabelled 2000 --json ppi.json

No model, no network: pure numpy, about a minute with the defaults.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rageval.stats import agreement, ppi_mean

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    true_mean: float
    draw: Draw


def _binary(p: float, base: float, gain: float, noise: float) -> Draw:
    def draw(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        y = (rng.random(size) < p).astype(float)
        return y, np.clip(base + gain * y + rng.normal(0, noise, size), 0, 1)

    return draw


def _graded(base: float, gain: float, noise: float) -> Draw:
    def draw(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.beta(2, 2, size)
        return y, np.clip(base + gain * y + rng.normal(0, noise, size), 0, 1)

    return draw


def _useless(p: float) -> Draw:
    def draw(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.random(size) < p).astype(float), rng.uniform(0.5, 1.0, size)

    return draw


SCENARIOS = [
    Scenario(
        "strong", "binary labels, 70% positive; judge 0.15 + 0.7·y ± 0.15", 0.7,
        _binary(0.7, 0.15, 0.7, 0.15),
    ),
    Scenario(
        "medium", "binary labels, 70% positive; judge 0.3 + 0.4·y ± 0.25 (biased low)", 0.7,
        _binary(0.7, 0.3, 0.4, 0.25),
    ),
    Scenario(
        "weak", "binary labels, 70% positive; judge 0.45 + 0.15·y ± 0.3", 0.7,
        _binary(0.7, 0.45, 0.15, 0.3),
    ),
    Scenario(
        "useless", "binary labels, 70% positive; judge uniform on 0.5–1, unrelated", 0.7,
        _useless(0.7),
    ),
    Scenario(
        "graded", "labels on 0–1 (Beta(2,2)); judge 0.3 + 0.5·y ± 0.1 (generous)", 0.5,
        _graded(0.3, 0.5, 0.1),
    ),
]  # fmt: skip


def simulate(scenario: Scenario, n: int, big_n: int, datasets: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    truth = scenario.true_mean
    covered = classical_covered = 0
    widths, classical_widths, lams, corrs, estimates, judge_means = [], [], [], [], [], []
    for _ in range(datasets):
        y, f = scenario.draw(rng, n + big_n)
        est = ppi_mean([*y[:n].tolist(), *([None] * big_n)], f.tolist())
        assert est.low is not None and est.high is not None and est.mean is not None
        assert est.classical_low is not None and est.classical_high is not None
        covered += est.low <= truth <= est.high
        classical_covered += est.classical_low <= truth <= est.classical_high
        widths.append(est.high - est.low)
        classical_widths.append(est.classical_high - est.classical_low)
        lams.append(est.lam or 0.0)
        estimates.append(est.mean)
        judge_means.append(float(f.mean()))
        if f[:n].std() > 0 and y[:n].std() > 0:
            corrs.append(float(np.corrcoef(y[:n], f[:n])[0, 1]))
    width = float(np.mean(widths))
    classical = float(np.mean(classical_widths))
    return {
        "n": n,
        "coverage": covered / datasets,
        "classical_coverage": classical_covered / datasets,
        "width": width,
        "classical_width": classical,
        "width_ratio": width / classical,
        "never_wider": bool(np.all(np.asarray(widths) <= np.asarray(classical_widths) + 1e-12)),
        "lambda": float(np.mean(lams)),
        "judge_corr": float(np.mean(corrs)) if corrs else math.nan,
        "ppi_bias": float(np.mean(estimates)) - truth,
        "judge_bias": float(np.mean(judge_means)) - truth,
        "labels_for_0.05": math.ceil(n * (width / 2 / 0.05) ** 2),
        "classical_labels_for_0.05": math.ceil(n * (classical / 2 / 0.05) ** 2),
    }


def calibration_widths(sizes: list[int], datasets: int) -> None:
    """κ, balanced accuracy and AUROC of a judge right on 85% of binary labels (60% positive):
    mean interval width and coverage of the population value, by number of labelled rows."""
    # the population values, from one very large sample
    rng = np.random.default_rng(7)

    def draw(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y = (rng.random(size) < 0.6).astype(float)
        right = rng.random(size) < 0.85
        verdict = np.where(right, y, 1 - y)
        score = np.clip(0.5 * verdict + 0.25 + rng.normal(0, 0.2, size), 0, 1)
        return y, verdict, score

    y, v, sc = draw(400_000)
    truth = {
        "cohen_kappa": agreement("cohen_kappa", y, v, n_resamples=1).value,
        "balanced_accuracy": agreement("balanced_accuracy", y, v, n_resamples=1).value,
        "auroc": agreement("auroc", y, sc, n_resamples=1).value,
    }
    print(
        "\ncalibration: a judge right on 85% of binary labels (60% positive); bootstrap 95% "
        f"intervals, {datasets} datasets per row\n"
    )
    print("| n labelled | " + " | ".join(f"{k} width (coverage)" for k in truth) + " |")
    print("|---|" + "---|" * len(truth))
    for n in sizes:
        widths: dict[str, list[float]] = {k: [] for k in truth}
        covered = dict.fromkeys(truth, 0)
        for _ in range(datasets):
            y, v, sc = draw(n)
            for name, target in truth.items():
                est = agreement(
                    name, y, sc if name == "auroc" else v, seed=int(rng.integers(1 << 30))
                )
                if est.low is None or est.high is None or target is None:
                    continue
                widths[name].append(est.high - est.low)
                covered[name] += est.low <= target <= est.high
        cells = [f"±{np.mean(widths[k]) / 2:.3f} ({covered[k] / datasets:.0%})" for k in truth]
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)
    print(
        "\npopulation values: "
        + ", ".join(f"{k} {v:.3f}" for k, v in truth.items() if v is not None)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=2000, help="simulated datasets per cell")
    parser.add_argument("--unlabelled", type=int, default=2000, help="rows without a label (N)")
    parser.add_argument("--labelled", type=int, nargs="+", default=[25, 50, 100, 200, 400, 800])
    parser.add_argument("--json", help="write every row here")
    parser.add_argument(
        "--calibration-datasets", type=int, default=200, help="datasets per row of the κ table"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    rows = []
    print(
        f"{args.datasets} simulated datasets per row, N = {args.unlabelled} unlabelled rows, "
        "95% intervals (normal approximation)\n"
    )
    print(
        "| judge | n labelled | ρ(judge, label) | λ | coverage PPI++ | coverage labels only | "
        "width PPI++ | width labels only | ratio | judge mean bias | PPI++ bias |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s_index, scenario in enumerate(SCENARIOS):
        for n in args.labelled:
            r = simulate(scenario, n, args.unlabelled, args.datasets, seed=1000 * s_index + n)
            rows.append({"scenario": scenario.name, **r})
            print(
                f"| {scenario.name} | {n} | {r['judge_corr']:.2f} | {r['lambda']:.2f} | "
                f"{r['coverage']:.1%} | {r['classical_coverage']:.1%} | {r['width']:.3f} | "
                f"{r['classical_width']:.3f} | {r['width_ratio']:.2f} | {r['judge_bias']:+.3f} | "
                f"{r['ppi_bias']:+.4f} |",
                flush=True,
            )
    print("\nlabels needed for a 95% interval of ±0.05 (from the width at n = 200):\n")
    print("| judge | scenario | labels only | PPI++ | saved |")
    print("|---|---|---|---|---|")
    for scenario in SCENARIOS:
        at = [r for r in rows if r["scenario"] == scenario.name]
        r = min(at, key=lambda x: abs(x["n"] - 200))
        saved = 1 - r["labels_for_0.05"] / r["classical_labels_for_0.05"]
        print(
            f"| {scenario.name} | {scenario.description} | {r['classical_labels_for_0.05']} | "
            f"{r['labels_for_0.05']} | {saved:.0%} |"
        )
    calibration_widths(args.labelled, args.calibration_datasets)
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
