"""Two `rageval evaluate --resume DIR` at once (issue 22's bar): the second exits non-zero
within 2 s and writes nothing; the first finishes the run, every row once.

    python benchmarks/bench_lock.py --samples 200 --tries 5 [--load 2]

Starts ``judge_server.py`` (synthetic judge, ``--latency-ms``) in its own process; runs
``rageval evaluate`` on faithfulness and kills it (-9) once some rows are logged; resumes it
(the holder); while the holder runs, starts a second ``--resume`` of the same directory
`--tries` times and times each from its start to its exit (the whole process: interpreter,
imports, refusal). One more try runs with the holder stopped (SIGSTOP) so that the run
directory can be compared byte for byte before and after it. `--load N` keeps N busy processes
running throughout (a stress-like load).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _harness import JudgeServer, Scratch, child_env, load_average
from synthetic_data import write_jsonl


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 600
    while not condition():
        if proc.poll() is not None:
            raise SystemExit(f"the run ended before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting until {what}")
        time.sleep(0.02)


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` processes spinning on a core each."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def snapshot(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--load", type=int, default=0, help="busy processes meanwhile")
    args = parser.parse_args(argv)
    with (
        JudgeServer(args.latency_ms) as server,
        Scratch() as scratch,
        busy(args.load),
    ):
        data = write_jsonl(scratch / "data.jsonl", args.samples, 0)
        env = {**child_env(), "OPENAI_API_KEY": "sk-bench", "RAGEVAL_CACHE_DIR": str(scratch)}
        run = scratch / "run"
        log = run / "results.jsonl"
        start = [
            sys.executable, "-m", "rageval", "evaluate", str(data), "-m", "faithfulness",
            "--llm", "gpt-4o-mini", "--base-url", server.base_url, "--no-cache",
            "--concurrency", "4", "-q", "-o", str(run),
        ]  # fmt: skip
        resume = [sys.executable, "-m", "rageval", "evaluate", "--resume", str(run), "-q"]

        first = subprocess.Popen(start, env=env, stderr=subprocess.PIPE, text=True)
        wait_for("20 rows are logged", lambda: lines(log) >= 20, first)
        first.kill()
        first.communicate()

        holder = subprocess.Popen(resume, env=env, stderr=subprocess.PIPE, text=True)
        logged = lines(log)

        def holding() -> bool:
            lock = run / "writer.lock"
            named = lock.exists() and f'"pid": {holder.pid},' in lock.read_text()
            return named and lines(log) > logged

        wait_for("the resume holds the directory and writes", holding, holder)

        def second() -> tuple[float, subprocess.CompletedProcess[str]]:
            began = time.perf_counter()
            done = subprocess.run(resume, env=env, capture_output=True, text=True, timeout=600)
            return time.perf_counter() - began, done

        load = load_average()
        walls, codes, named = [], [], []
        for _ in range(args.tries):
            wall, done = second()
            walls.append(wall)
            codes.append(done.returncode)
            named.append(f"pid {holder.pid} on host" in done.stderr)
        holder.send_signal(signal.SIGSTOP)  # still holding; the directory stands still
        try:
            before = snapshot(run)
            wall, done = second()
            unchanged = snapshot(run) == before
        finally:
            holder.send_signal(signal.SIGCONT)
        message = done.stderr.strip()
        _, err = holder.communicate(timeout=3600)
        ids = [json.loads(line)["id"] for line in log.read_text().splitlines()]
        manifest = json.loads((run / "manifest.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        stats = server.stats()

    print(f"second --resume while the holder runs ({args.tries} tries, load {load:.1f}, "
          f"{args.load} busy processes): exit codes {codes}, wall "
          f"{', '.join(f'{w:.2f}' for w in walls)} s (median {statistics.median(walls):.2f}, "
          f"max {max(walls):.2f}); holder named in {sum(named)} of {args.tries}")  # fmt: skip
    print(f"with the holder stopped: exit {done.returncode} in {wall:.2f} s; run directory "
          f"unchanged byte for byte: {unchanged}")  # fmt: skip
    print(f"message: {message}")
    print(f"holder: exit {holder.returncode}; results.jsonl {len(ids)} lines, "
          f"{len(set(ids))} ids of {args.samples}; sessions in the manifest "
          f"{1 + len(manifest['resumed_at'])}; summary n_measured "
          f"{summary['metrics']['faithfulness']['n_measured']}; chat requests "
          f"{stats['chat_requests']}")  # fmt: skip
    ok = (
        all(c == 6 for c in codes)
        and done.returncode == 6
        and max([*walls, wall]) <= 2.0
        and all(named)
        and unchanged
        and holder.returncode == 0
        and len(ids) == len(set(ids)) == args.samples
        and len(manifest["resumed_at"]) == 1
    )
    if holder.returncode != 0:
        print(err)
    print("bar met" if ok else "bar NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
