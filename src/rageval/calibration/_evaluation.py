"""What an evaluation reports about human labels (PPI++) and about the judge's own noise.

* `evaluate(..., human_labels={"human_correct": "answer_accuracy"})`: rows whose label column
  is filled rectify the judge's scores on every row; the summary gives the PPI++ mean of the
  label (:func:`rageval.stats.ppi_mean`) next to the judge's mean.
* `evaluate(..., repeats=K)`: each judge cell is scored K times (the repeats bypass the request
  cache); the cell's value is the mean of its measured scores, the scores are kept in its
  evidence under ``repeats``, and the summary splits the variance of the mean into what the rows
  differ by and what the judge's randomness adds (:func:`rageval.stats.judge_noise`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rageval.labels import parse_label
from rageval.metrics.base import MetricResult
from rageval.samples import Sample
from rageval.stats import JudgeNoise, PPIDifference, PPIEstimate, ppi_mean

__all__ = [
    "REPEATS_EVIDENCE",
    "combine_repeats",
    "describe_noise",
    "describe_ppi",
    "noise_to_json",
    "ppi_difference_to_json",
    "ppi_of",
    "ppi_to_json",
    "repeat_values",
]

#: the evidence key of a repeated cell: {"values": [...], "sd": ..., "not_measured": k}
REPEATS_EVIDENCE = "repeats"


def ppi_of(
    samples: Sequence[Sample | None],
    values: Sequence[float | None],
    column: str,
    *,
    confidence: float = 0.95,
) -> PPIEstimate:
    """The PPI++ mean of label `column` (in each sample's metadata) rectifying `values` (the
    metric's value by row, None where it has none)."""
    labels = [parse_label(s.metadata.get(column)) if s is not None else None for s in samples]
    return ppi_mean(labels, values, confidence=confidence)


def _round(value: float | None) -> float | None:
    return None if value is None else float(value)


def ppi_to_json(e: PPIEstimate) -> dict[str, Any]:
    return {
        "mean": _round(e.mean),
        "ci_low": _round(e.low),
        "ci_high": _round(e.high),
        "labelled_mean": _round(e.classical_mean),
        "labelled_ci_low": _round(e.classical_low),
        "labelled_ci_high": _round(e.classical_high),
        "lambda": _round(e.lam),
        "n_labelled": e.n_labelled,
        "n_unlabelled": e.n_unlabelled,
        "n_labelled_without_judge": e.n_labelled_without_judge,
        "confidence": e.confidence,
        "method": e.method,
    }


def ppi_difference_to_json(d: PPIDifference) -> dict[str, Any]:
    return {
        "mean_diff": _round(d.mean_diff),
        "ci_low": _round(d.low),
        "ci_high": _round(d.high),
        "n_labelled": d.n_labelled,
        "n_unlabelled": d.n_unlabelled,
        "n_left_out": d.n_left_out,
        "confidence": d.confidence,
        "method": d.method,
    }


def noise_to_json(n: JudgeNoise) -> dict[str, Any]:
    return {
        "repeats": n.repeats,
        "n_cells": n.n_cells,
        "mean_cell_sd": n.mean_cell_sd,
        "within_variance": n.within_variance,
        "cell_variance": n.cell_variance,
        "noise_variance_share": n.noise_variance_share,
        "ci_width_share": n.ci_width_share,
    }


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def describe_ppi(metric: str, column: str, e: PPIEstimate) -> str:
    """One line for the summary table."""
    head = f"{metric} <- {column}: "
    if e.mean is None:
        return head + f"no estimate ({e.n_labelled} rows with a label and a judge value)"
    text = (
        f"{head}{e.mean:.3f} {_interval(e.low, e.high)} from {e.n_labelled:,} labelled + "
        f"{e.n_unlabelled:,} judge-only rows, λ {e.lam:.2f}; labelled rows alone "
        f"{e.classical_mean:.3f} {_interval(e.classical_low, e.classical_high)}"
    )
    if e.n_labelled_without_judge:
        text += f" ({e.n_labelled_without_judge} labelled rows without a judge value left out)"
    return text


def describe_noise(metric: str, n: JudgeNoise) -> str:
    """One line for the summary table."""
    return (
        f"{metric}: {n.repeats} scores per cell, mean spread (SD) {n.mean_cell_sd:.3f}; "
        f"judge noise is {n.noise_variance_share:.0%} of the variance of the mean, "
        f"{n.ci_width_share:.0%} of its CI width"
    )


def combine_repeats(scorings: Sequence[MetricResult]) -> MetricResult:
    """One cell from the K scorings of a cell: the mean of the measured values, the first
    measured scoring's reason and evidence, and every score under ``repeats``; not measured
    (the first scoring's cause) when none was measured."""
    measured = [r for r in scorings if r.measured and r.value is not None]
    values = [r.value for r in measured if r.value is not None]
    spread = {
        "values": values,
        "sd": _sd(values),
        "not_measured": len(scorings) - len(measured),
    }
    if not measured:
        first = scorings[0]
        return first.model_copy(update={"evidence": {**first.evidence, REPEATS_EVIDENCE: spread}})
    base = measured[0]
    return MetricResult.ok(
        sum(values) / len(values),
        base.reason,
        **{**base.evidence, REPEATS_EVIDENCE: spread},
    )


def _sd(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def repeat_values(evidence: Any) -> list[float] | None:
    """The repeated scores kept in a cell's evidence, if any."""
    found = evidence.get(REPEATS_EVIDENCE) if isinstance(evidence, Mapping) else None
    if not isinstance(found, Mapping) or not isinstance(found.get("values"), list):
        return None
    return [float(v) for v in found["values"]]
