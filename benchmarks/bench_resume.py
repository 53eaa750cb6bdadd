"""Interrupted runs and their resume: the requests the judge endpoint answered, in all.

Every step runs ``rageval evaluate`` (the CLI, whole processes) on the same data with the
default metrics (those the data has the fields for: the nine judge metrics and the three
offline ones) against ``judge_server.py``, whose counters say how many chat requests it
handled; the request cache is on (the default), in a directory of its own per run.

1. an uninterrupted run: the requests R of the job;
2. a run killed with SIGKILL (kill -9) once half its rows are in ``results.jsonl``, then
   ``--resume DIR``: the requests of both, against R;
3. the same with SIGINT (Ctrl-C);
4. ``--resume`` of the finished run of step 1: nothing left to do;
5. that run with its log cut back to half its rows (as a kill leaves it) and no summary, every
   request of the rest already in the cache, then ``--resume``: nothing to send;
6. the same evaluation into a new run directory with step 1's cache: no request, and (kept
   cells) no embedding with the local model either: its wall time, and what its summary says
   the cache answered (against step 1's requests).

    python benchmarks/bench_resume.py --samples 200 --latency-ms 50

``--src DIR`` runs another tree's ``src`` (e.g. a ``git archive`` of an earlier commit) for a
before/after comparison.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from _harness import ROOT, WORK, JudgeServer, Scratch, child_env, markdown_table
from synthetic_data import write_jsonl


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _reaped(proc: subprocess.Popen[bytes]) -> float:
    """Wait for `proc`; its peak resident set size in MB, from the kernel's account of that
    process alone (``wait4``: not the judge server's, not this script's)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024  # KiB on Linux


class Cli:
    """``rageval evaluate`` in child processes against one judge server; ``peak_rss_mb`` is
    the peak RSS of the last process."""

    def __init__(self, server: JudgeServer, src: Path) -> None:
        self.server = server
        self.env = child_env()
        self.env.update(OPENAI_API_KEY="sk-bench", PYTHONPATH=str(src))
        self.peak_rss_mb = 0.0

    def command(self, *args: str | Path) -> list[str]:
        return [sys.executable, "-m", "rageval", "evaluate", *map(str, args), "-q"]

    def new_run(self, data: Path, run: Path) -> list[str]:
        return self.command(data, "--llm", "gpt-4o-mini", "--base-url", self.server.base_url,
                            "-o", run)  # fmt: skip

    def _start(self, args: list[str], cache: Path, output: IO[bytes]) -> subprocess.Popen[bytes]:
        self.server.reset()
        return subprocess.Popen(
            args, env={**self.env, "RAGEVAL_CACHE_DIR": str(cache)}, cwd=ROOT,
            stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def run(self, args: list[str], cache: Path) -> tuple[int, float, str]:
        """Run to the end: (chat requests the server handled, wall seconds, the summary's
        "(N judge calls answered from the cache)" line or ""); a run that turns its request
        cache off says so on stderr."""
        with tempfile.TemporaryFile() as output:
            started = time.perf_counter()
            proc = self._start(args, cache, output)
            self.peak_rss_mb = _reaped(proc)
            wall = time.perf_counter() - started
            output.seek(0)
            said = output.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: rc {proc.returncode}\n{said[-3000:]}")
        if "disabled" in said:
            print(f"{' '.join(args)}: {said.strip()}", file=sys.stderr, flush=True)
        cached = [line for line in said.splitlines() if "from the cache" in line]
        return int(self.server.stats()["chat_requests"]), wall, "".join(cached)

    def interrupted(self, args: list[str], cache: Path, run: Path, rows: int, sig: int) -> int:
        """Start a run, send it `sig` once `rows` rows are finished; the requests handled."""
        with tempfile.TemporaryFile() as output:
            proc = self._start(args, cache, output)
            while _lines(run / "results.jsonl") < rows:
                if proc.poll() is not None:
                    output.seek(0)
                    raise RuntimeError(f"the run ended before {rows} rows: {output.read()!r}")
                time.sleep(0.01)
            proc.send_signal(sig)
            self.peak_rss_mb = _reaped(proc)
        return int(self.server.stats()["chat_requests"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args(argv)
    half = args.samples // 2

    data = write_jsonl(WORK / f"samples-{args.samples}-seed0.jsonl", args.samples)
    table: list[list[str]] = []

    def row(step: str, sent: int, whole: int | None, note: str = "") -> None:
        ratio = f"{sent / whole:.3f}×" if whole else "–"
        table.append([step, f"{sent:,}", ratio, note])
        print(f"{step}: {sent} requests {note}", file=sys.stderr, flush=True)

    with JudgeServer(args.latency_ms) as server, Scratch() as scratch:
        cli = Cli(server, args.src.resolve())
        whole, first_wall, _ = cli.run(cli.new_run(data, scratch / "u"), scratch / "cache-u")
        row("uninterrupted run", whole, whole, f"{first_wall:.1f} s")

        for name, sig in (("kill -9", signal.SIGKILL), ("SIGINT", signal.SIGINT)):
            run, cache = scratch / name.replace(" ", ""), scratch / f"cache-{name}"
            before = cli.interrupted(cli.new_run(data, run), cache, run, half, sig)
            after, _, _ = cli.run(cli.command("--resume", run), cache)
            finished = _lines(run / "results.jsonl")
            row(f"{name} at {half} rows + `--resume`", before + after, whole,
                f"{before:,} + {after:,}; {finished} rows")  # fmt: skip

        sent, wall, _ = cli.run(cli.command("--resume", scratch / "u"), scratch / "cache-u")
        row("`--resume` of the finished run", sent, None, f"{wall:.2f} s")

        log = scratch / "u" / "results.jsonl"
        log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:half]))
        (scratch / "u" / "summary.json").unlink()
        sent, wall, said = cli.run(cli.command("--resume", scratch / "u"), scratch / "cache-u")
        row(f"`--resume` of it cut to {half} rows (all cached)", sent, None, f"{wall:.2f} s {said}")

        sent, wall, said = cli.run(cli.new_run(data, scratch / "again"), scratch / "cache-u")
        row("same evaluation, new run dir, same cache", sent, None, f"{wall:.2f} s {said}")

    print(markdown_table(["step", "chat requests", "of the job", "note"], table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
