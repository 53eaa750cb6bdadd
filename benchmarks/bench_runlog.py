"""What the run log costs: per finished sample, and reading a run back.

* ``record``: what the runner does for each finished sample once its cells are scored: make the
  log line (a faithfulness cell with its evidence and usage, the sample's inputs), append it to
  ``results.jsonl`` and add it to the ``EvaluationResult``. Best of ``--repeat`` timings of
  ``--records`` records each (the minimum is what the code costs; the rest is the machine).
* ``load_run`` and ``write_report`` of a run of ``--rows`` such samples (CPU seconds).

``--src DIR`` measures another rageval tree (e.g. one from before the run log was typed, which
had no ``rageval.log``: its record is made as that tree's runner made it).

    python benchmarks/bench_runlog.py --rows 20000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

EVIDENCE = {
    "statements": [
        {"id": i, "text": f"Statement {i} of the response.", "verdict": i % 2 == 0, "reason": "x"}
        for i in range(1, 4)
    ]
}


def _recorder(sample: Any, result: Any, usage: Any) -> Callable[[int, str], Any]:
    """(row, id) -> the finished sample's record, as the measured tree's runner makes it."""
    if importlib.util.find_spec("rageval.log") is not None:
        from rageval.log import Cell, Inputs, SampleLine

        def line(row: int, sample_id: str) -> Any:
            cells = {"faithfulness": Cell.of(result, usage)}
            return SampleLine(
                row=row, id=sample_id, inputs=Inputs.of(sample), cells=cells, shared_usage=usage
            )

        return line
    # a tree from before rageval.log (--src)
    from rageval.results import SampleRecord  # type: ignore[attr-defined]
    from rageval.runner._schedule import _cell  # type: ignore[attr-defined]

    return lambda row, sample_id: SampleRecord(
        row, sample_id, sample, {"faithfulness": _cell(result, usage)}, usage
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--src", type=Path, default=HERE.parent / "src", help="rageval tree")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.src.resolve()))
    import rageval
    from rageval.judge import Usage
    from rageval.metrics.base import MetricResult
    from rageval.report import write_report
    from rageval.results import EvaluationResult, load_run
    from rageval.runner._rundir import RunDir
    from rageval.samples import Sample

    print(f"measuring {Path(rageval.__file__).parent}", file=sys.stderr)
    sample = Sample(
        id="s1",
        user_input="What does the sample say about the sky?",
        response="The sky is blue. " * 5,
        retrieved_contexts=["The sky is blue on clear days. " * 4] * 2,
    )
    result = MetricResult.ok(0.5, "1 of 2 statements are supported", **EVIDENCE)
    usage = Usage(166, 41, requests=1, cost_usd=4.95e-05)
    record = _recorder(sample, result, usage)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(tmp) / "run")
        run.path.mkdir()
        ids = [f"s{i}" for i in range(args.rows)]
        evaluation = EvaluationResult(["faithfulness"], ids, [sample] * args.rows)

        def one() -> None:
            line = record(1, "s1")
            evaluation.add(line, offset=run.append(line))

        best = min(timeit.repeat(one, number=args.records, repeat=args.repeat))
        per_record_us = best / args.records * 1e6
        run.close()
        # a run of --rows samples, read back and reported
        (run.path / "results.jsonl").unlink()
        for row in range(args.rows):
            run.append(record(row, ids[row]))
        run.close()
        manifest = {
            "rageval_version": "bench",
            "created_at": "2026-01-01T00:00:00+00:00",
            "metrics": [{"name": "faithfulness", "params": {}}],
            "data": {"n_rows": args.rows},
        }
        (run.path / "manifest.json").write_text(json.dumps(manifest))
        t = time.process_time()
        loaded = load_run(run.path)
        load_s = time.process_time() - t
        assert loaded.n_finished == args.rows
        t = time.process_time()
        write_report(run.path)
        report_s = time.process_time() - t
    print("| measure | value |")
    print("|---|---:|")
    print(f"| record: make, append, add (best of {args.repeat}) | {per_record_us:.1f} us |")
    print(f"| load_run, {args.rows:,} rows | {load_s:.2f} s CPU |")
    print(f"| write_report, {args.rows:,} rows (no summary.json) | {report_s:.2f} s CPU |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
