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

from rageval._progress import text_table
from rageval.log._align import _num
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

    def table(self) -> str:
        """The tables ``rageval pairwise`` prints: per pair of systems the wins, B's win rate
        with its interval, the flips and the sign test; the Bradley–Terry strengths; the
        agreement with people."""
        lines = [
            f"criterion: {self.criterion}; each pair judged in both orders (A first, B first)\n"
        ]
        header = (
            "A",
            "B",
            "pairs",
            "A wins",
            "B wins",
            "ties",
            "B win rate [95% CI]",
            "flips",
            "p",
        )
        rows = [
            (
                p.system_a,
                p.system_b,
                str(p.n) + (f" (+{p.not_measured} not measured)" if p.not_measured else ""),
                str(p.wins_a),
                str(p.wins_b),
                str(p.ties),
                _interval(p.win_rate),
                f"{p.flips} ({_num(p.flip_rate.value)})",
                f"{p.sign_test_p:.4f}",
            )
            for p in self.pairs
        ]
        lines.append(text_table(header, rows))
        lines.append(
            "\nwin rate: B's share of the pairs, ties counted half; flips: pairs whose two "
            "orders' verdicts disagreed (ties when the winner is read from the verdicts); p: "
            "two-sided sign test on the pairs with a winner"
        )
        if self.strengths:
            lines.append("\nBradley-Terry strengths (log scale, mean 0), strongest first:")
            header_bt = ("system", "strength [95% CI]", "wins", "losses", "ties", "compared with")
            table = [
                (
                    s.system,
                    _interval(s.strength, signed=True),
                    str(s.wins),
                    str(s.losses),
                    str(s.ties),
                    ", ".join(f"{o} {n}" for o, n in s.opponents.items()),
                )
                for s in self.strengths
            ]
            lines.append(text_table(header_bt, table))
            lines.append(f"({self.strengths_method})")
        lines += [
            f"\npeople's verdicts on {h.n_labelled} pairs: the judge agrees on "
            f"{_interval(h.agreement)}; B's win rate by PPI++ {_interval(h.ppi_win_rate)} "
            f"(the labelled pairs alone: {_interval(h.labelled_win_rate)})"
            for h in self.human or []
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        systems = len({s for p in self.pairs for s in (p.system_a, p.system_b)})
        return f"PairwiseReport({systems} systems, {len(self.pairs)} pairs of them)\n{self.table()}"


def _interval(i: Interval, *, signed: bool = False) -> str:
    if i.low is None or i.high is None:
        return _num(i.value, signed=signed) + (f" ({i.why})" if i.why else "")
    low, high = _num(i.low, signed=signed), _num(i.high, signed=signed)
    return f"{_num(i.value, signed=signed)} [{low}, {high}]"


def read_pairwise(run_dir: str | os.PathLike[str]) -> PairwiseReport | None:
    """The statistics of the pairwise run in `run_dir`, or None when it was no pairwise run."""
    path = Path(run_dir) / PAIRWISE_FILE
    return _read_json_file(PairwiseReport, path) if path.exists() else None
