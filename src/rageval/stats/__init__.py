"""Uncertainty for metric means and for the difference between two runs (numpy only).

One module per concern, their names imported from here:

* :mod:`~rageval.stats._bootstrap`: the percentile-bootstrap interval of a mean
  (:func:`bootstrap_ci`) and the paired difference of two runs with its sign-flip p-value
  (:func:`paired_difference`);
* :mod:`~rageval.stats._agreement`: how well a judge agrees with people (:func:`agreement`,
  :func:`agreement_difference`: Cohen's κ, balanced accuracy, AUROC, correlations, the
  confusion matrix), used by :mod:`rageval.calibration`;
* :mod:`~rageval.stats._ppi`: the mean of a human label powered by a judge (:func:`ppi_mean`,
  PPI++) and what the judge's own randomness adds (:func:`judge_noise`);
* :mod:`~rageval.stats._active`: which rows to label where the judge is least certain
  (:func:`selection_probabilities`) and the inverse-probability-weighted PPI++ mean of those
  labels (:func:`active_ppi_mean`, active statistical inference);
* :mod:`~rageval.stats._reliability`: how far the judges of a panel agree with each other
  (:func:`krippendorff_alpha`) and how often a judge's pass/fail flips across repeats
  (:func:`flip_rate`);
* :mod:`~rageval.stats._compare`: two runs metric by metric (:func:`compare`);
* :mod:`~rageval.stats._pairwise`: pairwise preferences (``rageval pairwise``): the win rate
  with the flip rate and the sign test (:func:`pairwise_summary`, :func:`sign_test`),
  Bradley–Terry strengths with bootstrap intervals (:func:`bradley_terry`), the agreement
  with people's preferences and the PPI++ win rate (:func:`human_preferences`);
* :mod:`~rageval.stats._resampling`: what they share (argument checks, chunked resampling,
  percentile intervals).
"""

from rageval.stats._active import (
    ActivePPIEstimate,
    active_ppi_mean,
    judge_uncertainty,
    selection_probabilities,
)
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
from rageval.stats._pairwise import (
    BradleyTerry,
    HumanPreferences,
    PairwiseSummary,
    Strength,
    bradley_terry,
    human_preferences,
    pairwise_summary,
    sign_test,
    winner_score,
)
from rageval.stats._ppi import (
    JudgeNoise,
    PPIDifference,
    PPIEstimate,
    judge_noise,
    ppi_difference,
    ppi_mean,
)
from rageval.stats._reliability import AlphaLevel, FlipRate, flip_rate, krippendorff_alpha

__all__ = [
    "AGREEMENT_STATISTICS",
    "TIE_BELOW",
    "ActivePPIEstimate",
    "AlphaLevel",
    "BradleyTerry",
    "ConfidenceInterval",
    "Estimate",
    "FlipRate",
    "HumanPreferences",
    "JudgeNoise",
    "KappaWeights",
    "MetricComparison",
    "PPIComparison",
    "PPIDifference",
    "PPIEstimate",
    "PairedDifference",
    "PairwiseSummary",
    "Strength",
    "active_ppi_mean",
    "agreement",
    "agreement_difference",
    "auroc",
    "balanced_accuracy",
    "bootstrap_ci",
    "bradley_terry",
    "cohen_kappa",
    "compare",
    "confusion_matrix",
    "flip_rate",
    "human_preferences",
    "judge_noise",
    "judge_uncertainty",
    "krippendorff_alpha",
    "paired_difference",
    "pairwise_summary",
    "pearson",
    "ppi_difference",
    "ppi_mean",
    "selection_probabilities",
    "sign_test",
    "spearman",
    "winner_score",
]
