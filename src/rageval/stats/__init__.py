"""Uncertainty for metric means and for the difference between two runs (numpy only).

Confidence interval of a mean: the **percentile bootstrap**. The measured values are resampled
with replacement `n_resamples` times (default 2000); the interval is the (α/2, 1−α/2)
percentiles of the resampled means. The generator is seeded (default seed 0), so the same
values always give the same interval. With one value, or values that are all equal, every
resample is the same and the bootstrap says nothing about the uncertainty: the interval is
undefined (None, with the reason in ``undefined``), not a zero-width interval. With no value
there is no mean (None), never a 0.

Difference between two runs: **paired** and item-matched. Only items measured in both runs
take part. The difference is `b − a` per item, and a difference below `TIE_BELOW` (1e-9) is a
tie, 0: two sums of the same numbers in another order differ in their last bits, which is no
difference between runs; its mean gets a percentile-bootstrap interval
(items resampled as pairs), and a two-sided **sign-flip permutation test** gives the p-value
for "no difference": under that hypothesis each item's difference is equally likely to have
either sign. For up to 16 items every sign pattern is enumerated (exact p-value); beyond that
`n_permutations` random patterns (default 10 000) estimate it as (1 + #{|T*| ≥ |T|}) / (1 + n),
which never returns 0.

Agreement between people and a judge (used by :mod:`rageval.calibration`): Cohen's κ
(unweighted, or linearly / quadratically weighted for ordinal scales), balanced accuracy,
accuracy, AUROC, Spearman's and Pearson's correlation, and the confusion matrix. Each statistic
is computed from how many times each distinct (human, judge) pair occurs, so one vectorised
code path gives the value (the observed counts) and every bootstrap resample (counts of a
resample of the rows, drawn with replacement); :func:`agreement` returns the value with its
percentile-bootstrap interval, and :func:`agreement_difference` how much a statistic changes
from one judge to another on the same rows, with a paired interval.

Prediction-powered inference (:func:`ppi_mean`, PPI++ of Angelopoulos, Duchi and Zrnic, 2023):
the mean of a human label estimated from a judge's scores on every row, rectified by the rows
that carry a human label; see its docstring. :func:`judge_noise` splits the variance of a
mean into what the rows differ by and what the judge's own randomness adds.

Comparing two runs (:func:`compare`): every metric they share, over the samples matched by id,
with :func:`paired_difference`, and the samples that moved most.

The statistics live in one module per concern: :mod:`~rageval.stats._bootstrap` (means and
paired differences), :mod:`~rageval.stats._agreement` (people against a judge),
:mod:`~rageval.stats._ppi` (PPI++ and the judge's noise), :mod:`~rageval.stats._compare` (two
runs), on what they share in :mod:`~rageval.stats._resampling`; their names are imported from
here.
"""

from rageval.stats._agreement import (
    AGREEMENT_STATISTICS,
    Estimate,
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
from rageval.stats._bootstrap import (
    TIE_BELOW,
    ConfidenceInterval,
    PairedDifference,
    bootstrap_ci,
    paired_difference,
)
from rageval.stats._compare import MetricComparison, PPIComparison, compare
from rageval.stats._ppi import (
    JudgeNoise,
    PPIDifference,
    PPIEstimate,
    judge_noise,
    ppi_difference,
    ppi_mean,
)

__all__ = [
    "AGREEMENT_STATISTICS",
    "TIE_BELOW",
    "ConfidenceInterval",
    "Estimate",
    "JudgeNoise",
    "KappaWeights",
    "MetricComparison",
    "PPIComparison",
    "PPIDifference",
    "PPIEstimate",
    "PairedDifference",
    "agreement",
    "agreement_difference",
    "auroc",
    "balanced_accuracy",
    "bootstrap_ci",
    "cohen_kappa",
    "compare",
    "confusion_matrix",
    "judge_noise",
    "paired_difference",
    "pearson",
    "ppi_difference",
    "ppi_mean",
    "spearman",
]
