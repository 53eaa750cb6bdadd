"""Reliability: what a run does when things go wrong, against the project's test judge (and,
for ``one-slot``, a real llama-server). One command per check:

    python benchmarks/bench_reliability.py garbage --samples 200
    python benchmarks/bench_reliability.py lock --samples 200 --tries 5 [--load 2]
    python benchmarks/bench_reliability.py resume --samples 200 --latency-ms 50
    python benchmarks/bench_reliability.py conversations-resume --conversations 1000
    python benchmarks/bench_reliability.py one-slot --model qwen1.5b --samples 16
    python benchmarks/bench_reliability.py faults --conversations 200 --seed 3

* ``garbage``: the command line against a judge that never answers JSON;
* ``lock``: two ``--resume`` of one run directory at once;
* ``resume``: interrupted runs (kill -9, SIGINT) and their ``--resume``, requests paid twice;
* ``conversations-resume``: a conversation run killed and resumed ends with the same cells;
* ``one-slot``: a one-slot llama-server with and without the run's endpoint check;
* ``faults``: the conversation judges against the random-within-schema judge with 30 % faults.

Each check's own description: ``python benchmarks/bench_reliability.py CHECK --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from _harness import (
    EIGHT,
    HERE,
    ROOT,
    WORK,
    JudgeServer,
    Scratch,
    child_env,
    load_average,
    markdown_table,
    run_subcommand,
)
from rageval.cli import EXIT_UNMEASURED
from rageval.metrics.base import registered_metrics, scores_conversations
from rageval.results import EvaluationResult, load_run
from synthetic_data import write_jsonl

# ---------------------------------------------------------------------- garbage

_DOC_GARBAGE = """The command line against a judge that always answers garbage (issue 11's bar): the run
completes (exit 7: every metric measured nothing), every judged cell is not measured with a
kind and a cause, and what the terminal shows fits on a screen.

    python benchmarks/bench_reliability.py garbage --samples 200

Starts ``judge_server.py --judge garbage`` in its own process, runs ``rageval evaluate`` on the
eight metrics in a fresh process (the local embedding model, a fresh cache and run directory),
prints its stdout, then checks ``summary.json`` and ``results.jsonl``.
"""


def cmd_garbage(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_GARBAGE.splitlines()[0])
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


# ---------------------------------------------------------------------- lock

_DOC_LOCK = """Two `rageval evaluate --resume DIR` at once (issue 22's bar): the second exits non-zero
within 2 s and writes nothing; the first finishes the run, every row once.

    python benchmarks/bench_reliability.py lock --samples 200 --tries 5 [--load 2]

Starts ``judge_server.py`` (synthetic judge, ``--latency-ms``) in its own process; runs
``rageval evaluate`` on faithfulness and kills it (-9) once some rows are logged; resumes it
(the holder); while the holder runs, starts a second ``--resume`` of the same directory
`--tries` times and times each from its start to its exit (the whole process: interpreter,
imports, refusal). One more try runs with the holder stopped (SIGSTOP) so that the run
directory can be compared byte for byte before and after it. `--load N` keeps N busy processes
running throughout (a stress-like load).
"""


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


def cmd_lock(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_LOCK.splitlines()[0])
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


# ---------------------------------------------------------------------- resume

_DOC_RESUME = """Interrupted runs and their resume: the requests the judge endpoint answered, in all.

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

    python benchmarks/bench_reliability.py resume --samples 200 --latency-ms 50

``--src DIR`` runs another tree's ``src`` (e.g. a ``git archive`` of an earlier commit) for a
before/after comparison.
"""


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


def cmd_resume(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_RESUME.splitlines()[0])
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


# ---------------------------------------------------------------------- conversations-resume

_DOC_CONVERSATIONS_RESUME = """A conversation run killed with kill -9 and resumed ends with the uninterrupted run's cells.

Seeded synthetic conversations (``synthetic_data.make_conversation``: 5 user/assistant
exchanges, every answer with its retrieved contexts and reference, one tool call, reference
tool calls and a goal) are scored by ``rageval evaluate`` (the CLI, whole processes) with every
conversation metric against ``judge_server.py --judge random``: the test server answering at
random within each request's JSON schema, the same reply for the same request (as
tests/reliability/ do).

1. an uninterrupted run: its requests, wall time and peak RSS;
2. a run killed with SIGKILL once half its conversations are in ``results.jsonl``, then
   ``--resume DIR``: the requests of both, the wall time of both, the peak RSS of each;
3. every cell of the two runs compared: value, status, cause and evidence must be identical.

Each process gets a judge server of its own: at temperature > 0 (turn_answer_relevancy's
generated questions) the random judge draws anew for a request it has already answered, as a
real model would, and a request in flight at the kill (answered, never cached) is sent again
by the resume; a fresh server answers it as the uninterrupted run's server did. The resume's
server listens on the killed run's port: the endpoint's URL is part of every request's cache
key, so a judge at another URL would find nothing the killed run cached. The request cache is
on (the default), in a directory of its own per run.

    python benchmarks/bench_reliability.py conversations-resume --conversations 1000 --latency-ms 20
"""

METRICS = sorted(name for name, cls in registered_metrics().items() if scores_conversations(cls))


def _cells(result: EvaluationResult, metric: str) -> list[Any]:
    """Everything a cell says, as the run log stores it."""
    out = []
    for cell in result.cells(metric):
        assert cell is not None
        evidence = cell.evidence.model_dump(mode="json")
        out.append((cell.status, cell.value, cell.cause, cell.reason, evidence))
    return out


def differing_cells(a: EvaluationResult, b: EvaluationResult) -> dict[str, int]:
    """Per metric, the rows whose cells differ between the two results."""
    return {
        m: sum(x != y for x, y in zip(_cells(a, m), _cells(b, m), strict=True)) for m in METRICS
    }


def cmd_conversations_resume(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_CONVERSATIONS_RESUME.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    args = parser.parse_args(argv)
    half = args.conversations // 2
    src = args.src.resolve()
    data = write_jsonl(
        WORK / f"conversations-{args.conversations}-seed0.jsonl", args.conversations,
        conversations=True,
    )  # fmt: skip
    metric_args = [a for m in METRICS for a in ("-m", m)]
    table: list[list[str]] = []

    def row(step: str, sent: int, wall: float, rss: str, note: str = "") -> None:
        table.append([step, f"{sent:,}", f"{wall:.1f}", rss, note])
        print(f"{step}: {sent} requests, {wall:.1f} s, {rss} MB {note}", file=sys.stderr)

    load_before = load_average()
    with Scratch() as scratch:
        whole_run = scratch / "whole"
        with JudgeServer(args.latency_ms, judge="random") as server:
            cli = Cli(server, src)
            whole, whole_wall, _ = cli.run(
                [*cli.new_run(data, whole_run), *metric_args], scratch / "cache-whole"
            )
            row("uninterrupted run", whole, whole_wall, f"{cli.peak_rss_mb:.0f}")

        killed_run, cache = scratch / "killed", scratch / "cache-killed"
        with JudgeServer(args.latency_ms, judge="random") as server:
            cli = Cli(server, src)
            started = time.perf_counter()
            before = cli.interrupted(
                [*cli.new_run(data, killed_run), *metric_args], cache, killed_run, half,
                signal.SIGKILL,
            )  # fmt: skip
            killed_wall = time.perf_counter() - started
            at_kill = _lines(killed_run / "results.jsonl")
            killed_rss = cli.peak_rss_mb
            port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        with JudgeServer(args.latency_ms, judge="random", port=port) as server:
            cli = Cli(server, src)
            resume = cli.command("--resume", killed_run, "--base-url", server.base_url)
            after, resume_wall, _ = cli.run(resume, cache)
            row(
                f"kill -9 at {at_kill:,} conversations + `--resume`", before + after,
                killed_wall + resume_wall, f"{killed_rss:.0f} / {cli.peak_rss_mb:.0f}",
                f"{before:,} + {after:,} requests; {killed_wall:.1f} + {resume_wall:.1f} s",
            )  # fmt: skip
        differing = differing_cells(load_run(whole_run), load_run(killed_run))
    load_after = load_average()

    cells = args.conversations * len(METRICS)
    print(markdown_table(["step", "chat requests", "wall s", "peak RSS MB", "note"], table))
    print(f"\ncells compared: {cells:,} ({args.conversations:,} conversations × {len(METRICS)}"
          f" metrics); differing: {sum(differing.values())} {differing}")  # fmt: skip
    print(f"load average (1 min): {load_before:.1f} before, {load_after:.1f} after")
    return 1 if any(differing.values()) else 0


# ---------------------------------------------------------------------- one-slot

_DOC_ONE_SLOT = """A llama.cpp server with one slot, with and without the run's endpoint check (issue 23, item
2: concurrency against a server with one slot, measured on the real judge).

With the check (the default), the run reads the server's slots from ``/props`` and sends that
many requests at once, each allowed 600 s. Without it (``--no-probe``) the run knows nothing of
the server and uses the generic defaults: 16 requests at once, 60 s each. On a one-slot server
the other 15 queue inside the server, so the last of them pass 60 s before they are decoded:
the client gives up and sends them again, and the server's work on an abandoned request is
thrown away.

Each mode runs ``rageval evaluate`` on the same synthetic rows in a fresh process, with a fresh
request cache and run directory, against a llama-server started for it (so neither finds the
other's prompts in the server's cache)::

    python benchmarks/bench_reliability.py one-slot --model qwen1.5b --samples 16 --metric faithfulness

Prints per mode: cells measured, the requests the run sent (retries among them), prompt
tokens the server read and tokens it generated (its ``/metrics``), and wall time.
"""

MODES = {"endpoint check on (the default)": [], "endpoint check off (--no-probe)": ["--no-probe"]}
SERVER_NAME = "bench-one-slot"


def server_counters(root: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as response:
        lines = response.read().decode().splitlines()
    return {
        name.removeprefix("llamacpp:"): float(value)
        for name, value in (line.split(" ", 1) for line in lines if line.startswith("llamacpp:"))
    }


def run_mode(flags: list[str], data: Path, args: argparse.Namespace) -> dict[str, Any]:
    judge = [sys.executable, str(HERE / "real_judge" / "judge.py")]
    threads = str(args.server_threads)
    start = [*judge, "start", "--name", SERVER_NAME, "--model", args.model, "--threads", threads,
             "--threads-batch", threads, "--", "--metrics"]  # fmt: skip
    url = subprocess.run(start, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    root = url.removesuffix("/v1")
    try:
        with Scratch() as scratch:
            before = server_counters(root)
            env = {**child_env(), "RAGEVAL_CACHE_DIR": str(scratch / "cache")}
            cmd = [sys.executable, "-m", "rageval", "evaluate", str(data), "-m", args.metric,
                   "--llm", args.model, "--base-url", url, "-o", str(scratch / "run"), "-q",
                   *flags]  # fmt: skip
            load = load_average()
            started = time.perf_counter()
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=args.wall_limit)  # fmt: skip
                code: int | str = proc.returncode
            except subprocess.TimeoutExpired:
                code = f"stopped at {args.wall_limit:.0f} s"
            wall = time.perf_counter() - started
            after = server_counters(root)
            summary_path = scratch / "run" / "summary.json"
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    finally:
        subprocess.run([*judge, "stop", "--name", SERVER_NAME], check=False)
    metric = summary.get("metrics", {}).get(args.metric, {})
    usage = summary.get("usage", {})
    return {
        "exit": code,
        "measured": metric.get("n_measured", 0),
        "not_measured": metric.get("n_not_measured"),
        "failures": metric.get("failures", []),
        "requests": usage.get("requests"),
        "retries": usage.get("retries"),
        "server_prompt_tokens": after["prompt_tokens_total"] - before["prompt_tokens_total"],
        "server_generated": after["tokens_predicted_total"] - before["tokens_predicted_total"],
        "wall_s": wall,
        "load": load,
    }


def cmd_one_slot(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_ONE_SLOT.splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "qwen1.5b"), default="qwen1.5b")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metric", default="faithfulness")
    parser.add_argument("--server-threads", type=int, default=2)
    parser.add_argument(
        "--wall-limit", type=float, default=1800.0, help="seconds a mode may run (then stopped)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    data = write_jsonl(
        WORK / f"samples-{args.samples}-seed{args.seed}.jsonl", args.samples, args.seed
    )
    results = {}
    for name, flags in MODES.items():
        results[name] = run_mode(flags, data, args)
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, "runs": results}))
    header = ["run", "cells measured", "requests sent", "of them retries", "prompt tokens read",
              "tokens generated", "wall s", "exit", "load"]  # fmt: skip
    rows = [
        [
            name,
            f"{r['measured']} / {args.samples}",
            str(r["requests"]),
            str(r["retries"]),
            f"{r['server_prompt_tokens']:,.0f}",
            f"{r['server_generated']:,.0f}",
            f"{r['wall_s']:.0f}",
            str(r["exit"]),
            f"{r['load']:.1f}",
        ]
        for name, r in results.items()
    ]
    print(f"`{' '.join(sys.argv)}`\n")
    print(markdown_table(header, rows))
    return 0


# ---------------------------------------------------------------------- faults

_DOC_FAULTS = """The conversation judge metrics against the random-within-schema judge with 30 % faults, at
more conversations than the test uses, to see each metric's share of measured cells through
the noise of 40 (issue 25: at least 95 % with faults).

The rows, the judge and the fault mix are the test's
(``tests/reliability/test_schema_only_judge_conversations.py``: three answering turns with
contexts and a tool call, ``RandomJudge(seed=8)``, ``FaultPlan(RATE, FAULTS, seed)``), read
from the tests so the two cannot drift apart. Prints one line per metric: cells measured, and
the causes of the others by kind.

    python benchmarks/bench_reliability.py faults --conversations 200 --seed 3
"""


def cmd_faults(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_FAULTS.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3, help="the fault plan's seed")
    parser.add_argument("--rate", type=float, default=0.3, help="share of requests faulted")
    parser.add_argument(
        "--cut-tokens",
        type=int,
        default=None,
        help="the truncated fault's reply reports this many completion tokens, below its "
        "max_tokens (a proxy's or a dropped stream's cut; issue 41); default: all of them",
    )
    args = parser.parse_args(argv)
    # the test's rows and fault mix, read from the tests (only this check needs them)
    tests = ROOT / "tests"
    sys.path[:0] = [str(tests), str(tests / "reliability")]
    from test_schema_only_judge_conversations import METRICS, conversations

    from helpers import FAULTS
    from rageval._client import _retry
    from rageval.judge import Judge
    from rageval.runner import evaluate
    from rageval.testing import FakeOpenAI, Fault, FaultPlan, RandomJudge

    # millisecond backoffs, as the tests' fast_backoff: the delays are not what is measured
    _retry.BACKOFF_BASE, _retry.BACKOFF_CAP = 0.002, 0.02
    n = args.conversations
    faults = [
        Fault.truncated(completion_tokens=args.cut_tokens) if f.kind == "truncated" else f
        for f in FAULTS
    ]
    plan = FaultPlan(args.rate, faults, seed=args.seed)
    with FakeOpenAI(RandomJudge(seed=8), faults=plan) as server:
        judge = Judge("m", base_url=server.base_url, api_key="sk-test", cache=False)
        result = evaluate(
            conversations(n), METRICS, llm=judge, embeddings="local", progress=False, probe=False
        )
    total = 0
    for metric in METRICS:
        cells = [result.sample(i).cells[metric] for i in range(n)]
        # "undefined" is the metric's answer, not a failed call: knowledge_retention when the
        # judge reads no user message as telling anything about the user (shown among causes)
        measured = sum(c.status == "ok" or c.cause_kind == "undefined" for c in cells)
        causes = Counter(c.cause_kind for c in cells if c.status != "ok")
        total += measured
        print(f"{metric:40} {measured:5} / {n} ({measured / n:.1%})  {dict(causes)}")
    cells_all = n * len(METRICS)
    print(f"{'all':40} {total:5} / {cells_all} ({total / cells_all:.1%}); "
          f"faults injected: {len(plan.injected)}")  # fmt: skip
    return 0


COMMANDS = {
    "garbage": (cmd_garbage, _DOC_GARBAGE),
    "lock": (cmd_lock, _DOC_LOCK),
    "resume": (cmd_resume, _DOC_RESUME),
    "conversations-resume": (cmd_conversations_resume, _DOC_CONVERSATIONS_RESUME),
    "one-slot": (cmd_one_slot, _DOC_ONE_SLOT),
    "faults": (cmd_faults, _DOC_FAULTS),
}


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(COMMANDS, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
