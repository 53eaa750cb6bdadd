"""A run directory as the report reads it, through the run log's models (:mod:`rageval.log`).

The summary comes from ``summary.json`` when the run wrote one; a run that never did (it was
killed) is summed up line by line while its log is read, with the same aggregation the runner
uses, so the totals -- cost included -- are those ``load_run(...).summary()`` gives. Only the
confidence intervals (and the PPI++ means of human labels, and the judge noise) are missing
then: they need every value at once. A calibration run's ``calibration.json`` is read too, and a pairwise run's
``pairwise.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rageval.log import (
    RESULTS_FILE,
    CalibrationReport,
    Manifest,
    PairwiseReport,
    RunTally,
    Summary,
    read_calibration,
    read_lines,
    read_manifest,
    read_pairwise,
    read_summary,
)

__all__ = ["RunData"]


@dataclass
class RunData:
    """A run directory loaded: its manifest, its finished samples (by row, the first
    `max_samples` rows only) as the JSON the page embeds, its summary and, for a calibration
    run, its agreement with the human labels."""

    manifest: Manifest
    summary: Summary
    #: the rows of the samples kept, in order
    rows: list[int]
    #: the JSON of each kept sample's line, as the current format writes it (the page's samples)
    results_json: list[str]
    #: the metric names the kept samples have cells for, in the order first met
    result_metrics: list[str] = field(default_factory=list)
    #: the summary is the run's own summary.json (else it was summed up from the log)
    has_summary: bool = True
    #: finished samples past `max_samples` that were read but not kept
    samples_left_out: int = 0
    #: agreement with human labels, when the run was a calibration (calibration.json)
    calibration: CalibrationReport | None = None
    #: what a pairwise run's verdicts add up to (pairwise.json)
    pairwise: PairwiseReport | None = None

    @classmethod
    def load(cls, run_dir: str | Path, *, max_samples: int | None = None) -> RunData:
        """Load a run directory; with `max_samples`, keep only the samples of the first rows
        (the others are counted) so that a huge run's report stays within memory."""
        run_dir = Path(run_dir)
        manifest = read_manifest(run_dir)
        summary = read_summary(run_dir)
        tally = RunTally(m.name for m in manifest.metrics) if summary is None else None
        # row -> (its line's JSON, its cells' names): the lines themselves are not kept, which
        # halves the time to read a log (kept, their objects cost the garbage collector as much
        # as validating them did)
        kept: dict[int, tuple[str, tuple[str, ...]]] = {}
        left_out: set[int] = set()
        last_at: dict[int, int] = {}  # row -> byte offset of its last line
        rewritten = False  # a row has more than one line (the last one counts)
        path = run_dir / RESULTS_FILE
        if path.exists():
            for entry in read_lines(path):
                line = entry.line
                rewritten = rewritten or line.row in last_at
                last_at[line.row] = entry.start
                if tally is not None:
                    tally.add(line)
                if max_samples is not None and line.row >= max_samples:
                    left_out.add(line.row)
                else:
                    kept[line.row] = (entry.json_text(), tuple(line.cells))
        if tally is not None and rewritten:
            # sum up again, counting each row once: its last line
            tally = RunTally(m.name for m in manifest.metrics)
            for entry in read_lines(path):
                if last_at[entry.line.row] == entry.start:
                    tally.add(entry.line)
        if tally is not None:
            summary = tally.summary(n_rows=manifest.data.n_rows)
        assert summary is not None
        rows = sorted(kept)
        return cls(
            manifest=manifest,
            summary=summary,
            rows=rows,
            # the log's own text where it is already the current format's JSON: writing each
            # line anew would cost as much as reading it did
            results_json=[kept[row][0] for row in rows],
            result_metrics=list(dict.fromkeys(name for row in rows for name in kept[row][1])),
            has_summary=tally is None,
            samples_left_out=len(left_out),
            calibration=read_calibration(run_dir),
            pairwise=read_pairwise(run_dir),
        )

    def metric_names(self) -> list[str]:
        """Metrics in manifest order, then any that only the results or summary mention."""
        names = [m.name for m in self.manifest.metrics]
        return list(dict.fromkeys(names + self.result_metrics + list(self.summary.metrics)))
