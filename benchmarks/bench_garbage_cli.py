"""The command line against a judge that always answers garbage (issue 11's bar): the run
completes (exit 7: every metric measured nothing), every judged cell is not measured with a
kind and a cause, and what the terminal shows fits on a screen.

    python benchmarks/bench_garbage_cli.py --samples 200

Starts ``judge_server.py --judge garbage`` in its own process, runs ``rageval evaluate`` on the
eight metrics in a fresh process (the local embedding model, a fresh cache and run directory),
prints its stdout, then checks ``summary.json`` and ``results.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _harness import EIGHT, WORK, JudgeServer, Scratch, child_env, load_average
from rageval.cli import EXIT_UNMEASURED
from synthetic_data import write_jsonl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = write_jsonl(
        WORK / f"samples-{args.samples}-seed{args.seed}.jsonl", args.samples, args.seed
    )
    with JudgeServer(0.0, judge="garbage") as server, Scratch() as scratch:
        env = {**child_env(), "RAGEVAL_CACHE_DIR": str(scratch / "cache")}
        run_dir = scratch / "run"
        cmd = [
            sys.executable, "-m", "rageval", "evaluate", str(data), "-m", ",".join(EIGHT),
            "--llm", "gpt-4o-mini", "--base-url", server.base_url, "--embeddings", "local",
            "-o", str(run_dir), "-q",
        ]  # fmt: skip
        load = load_average()
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        wall = time.perf_counter() - started
        stats = server.stats()
        summary = json.loads((run_dir / "summary.json").read_text())
        cells = [
            cell
            for line in (run_dir / "results.jsonl").read_text().splitlines()
            for cell in json.loads(line)["metrics"].values()
        ]
    print(proc.stdout, end="")
    lines = proc.stdout.splitlines()
    failed = [c for c in cells if c["status"] != "ok"]
    print("\n---")
    print(f"exit code {proc.returncode}; {len(lines)} lines of stdout; wall {wall:.1f} s; "
          f"load {load:.1f}; {stats['chat_requests']} chat requests "
          f"({stats['chat_requests'] / args.samples:.2f} per sample)")  # fmt: skip
    print(f"cells: {len(cells)}, not measured: {len(failed)}, "
          f"with a kind and a cause: {sum(bool(c['cause_kind'] and c['cause']) for c in failed)}")  # fmt: skip
    kinds = {
        m: {g["kind"]: g["count"] for g in s["failures"]} for m, s in summary["metrics"].items()
    }
    print("kinds:", kinds)
    ok = (
        proc.returncode == EXIT_UNMEASURED  # every metric measured nothing (issue 22)
        and len(failed) == len(cells) == args.samples * len(EIGHT)
        and all(c["cause_kind"] and c["cause"] for c in failed)
        and len(lines) <= 50
    )
    print("bar met" if ok else "bar NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
