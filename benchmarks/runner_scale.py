"""Peak memory and throughput of a large evaluation run (the runner streams samples).

    python benchmarks/runner_scale.py --rows 100000
    python benchmarks/runner_scale.py --rows 20000 --metrics token_f1,rouge_l,faithfulness

Writes a synthetic JSONL of realistic row sizes, starts the project's fake OpenAI server in a
separate process (so its request log does not count), runs `rageval.evaluate` with a run
directory, and prints rows/s, requests/s and this process's peak RSS. Target: peak RSS <= 1 GB
at 100,000 rows.

The HTML report is left out of the run and built afterwards, so that the runner's peak and the
report's (which holds every sample in one page) are reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the handler lives next to this script (benchmarks/synthetic_judge.py): the server's child
# process gets this directory on its path
HANDLER = "synthetic_judge:handle"
HERE = Path(__file__).resolve().parent


def write_rows(path: Path, n: int) -> None:
    filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = {
                "id": f"s{i:06d}",
                "user_input": f"Question about sample s{i:06d}: what does the record say?",
                "response": f"Sample s{i:06d} says {filler * 3}",
                "retrieved_contexts": [
                    f"Context {k} of sample s{i:06d}. {filler * 4}" for k in range(3)
                ],
                "reference": f"The record of s{i:06d} says {filler}",
            }
            fh.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--metrics", default="token_f1,rouge_l,faithfulness")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    metrics = [m for m in args.metrics.split(",") if m]

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["RAGEVAL_CACHE_DIR"] = str(tmp_path / "cache")
        data = tmp_path / "data.jsonl"
        write_rows(data, args.rows)
        server = subprocess.Popen(
            [sys.executable, "-m", "rageval.testing.serve", "--handler", HANDLER],
            stdout=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            },
        )
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            if not base_url:
                raise RuntimeError("the fake server did not start")
            from rageval.judge import Judge
            from rageval.runner import _rundir, evaluate

            build_report = _rundir.RunDir.write_report
            _rundir.RunDir.write_report = lambda self: self.path  # type: ignore[method-assign]

            judge = Judge(
                "bench-model",
                base_url=base_url,
                api_key="sk-bench",
                max_concurrency=args.concurrency,
            )
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.perf_counter()
            result = evaluate(data, metrics, llm=judge, run_dir=tmp_path / "run", progress=None)
            elapsed = time.perf_counter() - start
            peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            report_start = time.perf_counter()
            build_report(_rundir.RunDir(tmp_path / "run"))
            report_s = time.perf_counter() - report_start
            report_peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        finally:
            server.terminate()
            server.wait(timeout=10)
    requests = result.usage.requests
    print(f"rows={args.rows} metrics={','.join(metrics)} finished={result.n_finished}")
    rates = f"{args.rows / elapsed:,.0f} rows/s  {requests / elapsed:,.0f} requests/s"
    print(f"time {elapsed:.1f}s  {rates}")
    print(f"peak RSS {peak_kb / 1024:,.0f} MB (before the run {rss_before / 1024:,.0f} MB)")
    print(f"then report.html: {report_s:.1f}s, peak RSS {report_peak_kb / 1024:,.0f} MB")
    for name, s in result.summary().items():
        print(f"  {name}: mean {s.mean} measured {s.n_measured} not measured {s.n_not_measured}")
    return 0 if peak_kb <= 1024 * 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
