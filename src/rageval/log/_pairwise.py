"""``pairwise.json``: the statistics of a pairwise run (``rageval pairwise``).

The run's cells hold each pair's verdict (metric ``pairwise``, evidence kind ``pairwise``:
the winner and both orders' readings); this file holds what they add up to: per pair of
systems the win rate of B over A with its interval, the wins, ties and flips, the sign test;
for three or more systems their Bradley–Terry strengths; with people's preferences on some
pairs, the judge's agreement with them and the PPI++ win rate.
"""

from __future__ import annotations

import os
from pathlib import Path

from rageval.log._io import _read_json_file
from rageval.log._models import _LogModel, _Versioned

PAIRWISE_FILE = "pairwise.json"


class Interval(_LogModel):
    """An estimate with its interval (None: undefined, `why` says why)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    why: str | None = None


class SystemPair(_LogModel):
    """System B against system A over the pairs measured (ties counted half)."""

    system_a: str
    system_b: str
    n: int
    wins_a: int
    wins_b: int
    ties: int
    #: B's win rate over A, ties half, with its percentile-bootstrap interval over the pairs
    win_rate: Interval
    #: pairs whose two orders (A shown first, B shown first) gave different verdicts
    flips: int
    flip_rate: Interval
    #: two-sided exact binomial (sign) test on the pairs with a winner
    sign_test_p: float
    #: pairs the judge gave no verdict on (their causes are in the run's cells)
    not_measured: int = 0


class SystemStrength(_LogModel):
    """A system's Bradley–Terry log strength (systems' mean 0) and the comparisons it rests on."""

    system: str
    strength: Interval
    wins: int
    losses: int
    ties: int
    #: comparisons against each other system
    opponents: dict[str, int]


class HumanAgreement(_LogModel):
    """The judge's verdicts against people's on the pairs they judged."""

    system_a: str
    system_b: str
    n_labelled: int
    #: exact agreement (a, b or tie alike)
    agreement: Interval
    #: B's win rate by PPI++: people's verdicts rectifying the judge's on every pair
    ppi_win_rate: Interval
    #: the same from the labelled pairs alone
    labelled_win_rate: Interval


class PairwiseReport(_Versioned):
    """What a pairwise run's verdicts add up to (``pairwise.json``)."""

    criterion: str
    confidence: float
    method: str
    pairs: list[SystemPair]
    strengths: list[SystemStrength] | None = None
    strengths_method: str | None = None
    human: list[HumanAgreement] | None = None


def read_pairwise(run_dir: str | os.PathLike[str]) -> PairwiseReport | None:
    """The statistics of the pairwise run in `run_dir`, or None when it was no pairwise run."""
    path = Path(run_dir) / PAIRWISE_FILE
    return _read_json_file(PairwiseReport, path) if path.exists() else None
