"""rageval's lexical baselines against their reference implementations on public text pairs.

    python benchmarks/bench_lexical_reference.py --data-root /work/shared/data

For every (response, reference) pair of STS-B (train, dev and test), SICK (train, trial and
test), EVOUNA (NQ and TQ: each judged answer against its gold answers) and NQ301 (each judged
answer against its gold answers), with each metric at its default settings:

* rouge_l against Google's `rouge-score`,
  ``RougeScorer(["rougeL"]).score(reference, response)["rougeL"].fmeasure`` (its defaults);
* token_f1 against the official SQuAD v2 script's F1 (benchmarks/squad_reference.py).

Prints, per dataset, the pairs whose values are equal to the last bit, those that differ (with
the largest difference and an example's length), and those rageval leaves unmeasured (with
what the reference says there). Only counts are printed, never the data's text: the datasets
are for research use and stay where they are. The script uses only what every rageval version
has (``RougeL().score``, ``TokenF1().score``), so an older checkout can be measured the same
way (``PYTHONPATH=<its src>``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rouge_score import rouge_scorer

from rageval.calibration.datasets import evouna, nq301, sick, stsb
from rageval.metrics import RougeL, TokenF1
from squad_reference import squad_f1


def _pairs(rows: list[dict[str, object]]) -> Iterator[tuple[str, str]]:
    for row in rows:
        yield str(row["response"]), str(row["reference"])


SOURCES: dict[str, Callable[[Path], Iterator[tuple[str, str]]]] = {
    "STS-B": lambda root: (
        p
        for split in ("train", "dev", "test")
        for p in _pairs(stsb(root / "stsbenchmark", split).rows)
    ),
    "SICK": lambda root: _pairs(sick(root / "sick", "all").rows),
    "EVOUNA-NQ": lambda root: _pairs(evouna(root / "evouna", "NQ").rows),
    "EVOUNA-TQ": lambda root: _pairs(evouna(root / "evouna", "TQ").rows),
    "NQ301": lambda root: _pairs(nq301(root / "nq301-openqa-eval").rows),
}


@dataclass
class Agreement:
    pairs: int = 0
    equal: int = 0
    differ: int = 0
    largest: float = 0.0
    #: rageval left the cell unmeasured: what the reference said there, by value
    unmeasured: dict[float, int] = field(default_factory=dict)

    def add(self, ours: float | None, theirs: float) -> None:
        self.pairs += 1
        if ours is None:
            self.unmeasured[theirs] = self.unmeasured.get(theirs, 0) + 1
        elif ours == theirs:
            self.equal += 1
        else:
            self.differ += 1
            self.largest = max(self.largest, abs(ours - theirs))

    def merge(self, other: Agreement) -> None:
        self.pairs += other.pairs
        self.equal += other.equal
        self.differ += other.differ
        self.largest = max(self.largest, other.largest)
        for value, n in other.unmeasured.items():
            self.unmeasured[value] = self.unmeasured.get(value, 0) + n

    def row(self, name: str) -> str:
        share = f"{self.differ / self.pairs:.1%}" if self.pairs else "—"
        unmeasured = sum(self.unmeasured.values())
        said = ", ".join(f"{n} × {v:g}" for v, n in sorted(self.unmeasured.items()))
        return (
            f"| {name} | {self.pairs:,} | {self.equal:,} | {self.differ:,} ({share}) | "
            f"{self.largest:.3f} | {unmeasured:,}{f' (reference: {said})' if said else ''} |"
        )


def measure(root: Path, names: list[str]) -> dict[str, dict[str, Agreement]]:
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rouge, f1 = RougeL(), TokenF1()
    out: dict[str, dict[str, Agreement]] = {}
    for name in names:
        by_metric = out[name] = {"rouge_l": Agreement(), "token_f1": Agreement()}
        for response, reference in SOURCES[name](root):
            ours = rouge.score(response=response, reference=reference)
            theirs = scorer.score(reference, response)["rougeL"].fmeasure
            by_metric["rouge_l"].add(ours.value, theirs)
            ours = f1.score(response=response, reference=reference)
            by_metric["token_f1"].add(ours.value, squad_f1(response, reference))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, required=True)
    parser.add_argument("--datasets", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    args = parser.parse_args()
    results = measure(args.data_root, args.datasets)
    for metric, reference in (("rouge_l", "rouge-score 0.1.2"), ("token_f1", "SQuAD v2 F1")):
        print(f"\n{metric} against {reference}\n")
        print("| pairs of | pairs | equal | differ | largest difference | not measured |")
        print("|---|---:|---:|---:|---:|---|")
        total = Agreement()
        for name, by_metric in results.items():
            print(by_metric[metric].row(name))
            total.merge(by_metric[metric])
        print(total.row("all"))


if __name__ == "__main__":
    main()
