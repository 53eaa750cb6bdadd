"""A conversation run killed with kill -9 and resumed ends with the uninterrupted run's cells.

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

    python benchmarks/bench_conversations_resume.py --conversations 1000 --latency-ms 20
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from _harness import WORK, JudgeServer, Scratch, load_average, markdown_table
from bench_resume import Cli, _lines
from rageval.metrics.base import registered_metrics, scores_conversations
from rageval.results import EvaluationResult, load_run
from synthetic_data import write_jsonl

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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


if __name__ == "__main__":
    sys.exit(main())
