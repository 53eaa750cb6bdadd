"""The Ray engine's bars (issue 15), measured with the command line as users run it.

Ray only runs inside a loopback-only network namespace, so this script refuses to start Ray
anywhere else::

    flock /work/bench.lock .ci/loopback-ns python benchmarks/bench_ray.py --rows 400 --latency-ms 300
    python benchmarks/bench_ray.py --size      # installed size of the extra (starts no Ray)

Parts (``--parts``, default all):

``same``      the same job with ``--engine local`` and ``--engine ray`` (fresh caches): values,
              statuses, every row once, wall times, requests at the judge; and a 2-row job with
              each engine, whose difference is Ray's start-up cost
``kill``      ``--engine ray``, ``kill -9`` of the driver when half the rows are written, then
              ``--resume``: complete, no row twice, requests against an uninterrupted run (with
              the request cache, the default, and with ``--no-cache``)
``rate``      ``--requests-per-minute 600 --ray-actors 2``: the most requests the judge saw in
              any 60-second window, and the rate reached
``two-nodes`` the same job on a two-node cluster on this machine (``.ci/ray-two-nodes``),
              against the local engine's values

The judge is ``judge_server.py`` (the synthetic judge in its own process, counting requests);
the data is ``synthetic_data.py``; four judge metrics, 6 requests a row.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import (
    ROOT,
    JudgeServer,
    Scratch,
    SitePackages,
    child_env,
    load_average,
    markdown_table,
    pinned_versions,
)
from synthetic_data import iter_samples

METRICS = ("faithfulness", "context_recall", "context_precision", "answer_accuracy")
PARTS = ("same", "kill", "rate", "two-nodes")
_NOTICE = re.compile(r"rageval: ray: (connected in|first batch after|done after) ([\d.]+) s")
_SCORED = re.compile(r"scored by (\d+) actors on (\d+) nodes")


@dataclass
class Run:
    engine: str
    wall_s: float
    requests: int
    run_dir: Path
    notices: dict[str, float] = field(default_factory=dict)
    actors: int = 0
    nodes: int = 0


def cli_env(cache_dir: Path) -> dict[str, str]:
    env = child_env()
    env.update(
        OPENAI_API_KEY="sk-rageval-bench",
        RAGEVAL_CACHE_DIR=str(cache_dir),
        RAY_USAGE_STATS_ENABLED="0",
    )
    return env


def evaluate_args(data: Path, judge: JudgeServer, engine: str, extra: Sequence[str]) -> list[str]:
    metrics = [a for m in METRICS for a in ("-m", m)]
    return [sys.executable, "-m", "rageval", "evaluate", str(data), *metrics,
            "--llm", "gpt-4o-mini", "--base-url", judge.base_url, "--engine", engine, "-q",
            *extra]  # fmt: skip


def run_cli(
    data: Path, run_dir: Path, judge: JudgeServer, cache_dir: Path, engine: str,
    extra: Sequence[str] = (),
) -> Run:  # fmt: skip
    judge.reset()
    started = time.monotonic()
    done = subprocess.run([*evaluate_args(data, judge, engine, extra), "-o", str(run_dir)],
                          env=cli_env(cache_dir), capture_output=True, text=True, cwd=ROOT,
                          timeout=3600)  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{engine} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return _with_notices(Run(engine, wall, judge.stats()["chat_requests"], run_dir), done.stderr)


def _with_notices(run: Run, stderr: str) -> Run:
    run.notices = {what: float(s) for what, s in _NOTICE.findall(stderr)}
    scored = _SCORED.findall(stderr)
    if scored:
        run.actors, run.nodes = int(scored[-1][0]), int(scored[-1][1])
    return run


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def compare_runs(a: Path, b: Path) -> tuple[bool, float, bool]:
    """(same statuses everywhere, largest |value difference|, every row exactly once in b)."""
    rows_a = {r["id"]: r for r in read_rows(a)}
    rows_b = read_rows(b)
    ids_b = [r["id"] for r in rows_b]
    once = len(ids_b) == len(set(ids_b)) == len(rows_a) and set(ids_b) == set(rows_a)
    same_status, largest = True, 0.0
    for row in rows_b:
        for metric in METRICS:
            x, y = rows_a[row["id"]]["metrics"][metric], row["metrics"][metric]
            same_status &= x["status"] == y["status"]
            if x["value"] is not None and y["value"] is not None:
                largest = max(largest, abs(x["value"] - y["value"]))
            elif x["value"] != y["value"]:
                same_status = False
    return same_status, largest, once


# ---------------------------------------------------------------------- parts


def part_same(
    data: Path, tiny: Path, judge: JudgeServer, rows: int, work: Path
) -> tuple[list[str], Run]:
    """Local and ray runs of the job (their run directories stay in `work`)."""
    local = run_cli(data, work / "local", judge, work / "cache-local", "local")
    on_ray = run_cli(data, work / "ray", judge, work / "cache-ray", "ray")
    same_status, largest, once = compare_runs(work / "local", work / "ray")
    tiny_local = run_cli(tiny, work / "tiny-local", judge, work / "cache-tl", "local")
    tiny_ray = run_cli(tiny, work / "tiny-ray", judge, work / "cache-tr", "ray")
    startup = tiny_ray.wall_s - tiny_local.wall_s
    limit = 1.3 * local.wall_s + startup
    phases = ("connected in", "first batch after", "done after")
    out = [
        f"{rows} rows x {len(METRICS)} judge metrics ({', '.join(METRICS)}), load before: "
        f"{load_average():.2f}",
        "",
        markdown_table(
            (
                "job",
                "engine",
                "wall s",
                "requests at the judge",
                "actors",
                "Ray: connected / first batch / done (s)",
            ),
            [
                (
                    job,
                    r.engine,
                    f"{r.wall_s:.1f}",
                    str(r.requests),
                    str(r.actors or "-"),
                    " / ".join(f"{r.notices[k]:.1f}" for k in phases if k in r.notices) or "-",
                )
                for job, r in (
                    (f"{rows} rows", local),
                    (f"{rows} rows", on_ray),
                    ("2 rows", tiny_local),
                    ("2 rows", tiny_ray),
                )
            ],
        ),
        "",
        f"- same statuses in every cell: {same_status}; largest |value difference|: {largest:.3g}; "
        f"every row exactly once: {once}; requests: local {local.requests}, ray {on_ray.requests}",
        f"- Ray's start-up cost (2-row job, ray minus local wall): {startup:.1f} s",
        f"- wall: ray {on_ray.wall_s:.1f} s vs bar 1.3 x local + start-up = "
        f"1.3 x {local.wall_s:.1f} + {startup:.1f} = {limit:.1f} s "
        f"({'met' if on_ray.wall_s <= limit else 'NOT met'}; ray / local = "
        f"{on_ray.wall_s / local.wall_s:.2f}, (ray - start-up) / local = "
        f"{(on_ray.wall_s - startup) / local.wall_s:.2f})",
    ]
    return out, on_ray


def _wait_for_lines(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 1800
    while not path.exists() or path.read_bytes().count(b"\n") < count:
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended before the kill: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError("the run made no progress")
        time.sleep(0.05)


def part_kill(
    data: Path, judge: JudgeServer, rows: int, uninterrupted: int, work: Path
) -> list[str]:
    table = []
    for label, extra in (("request cache on (default)", ()), ("--no-cache", ("--no-cache",))):
        case = work / f"kill{len(table)}"
        run_dir, env = case / "run", cli_env(case / "cache")
        judge.reset()
        args = evaluate_args(data, judge, "ray", extra)
        proc = subprocess.Popen([*args, "-o", str(run_dir)], env=env, cwd=ROOT, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        _wait_for_lines(run_dir / "results.jsonl", rows // 2, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        before = len(read_rows(run_dir))
        resumed = subprocess.run([*args, "--resume", str(run_dir)], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=3600)  # fmt: skip
        if resumed.returncode != 0:
            raise RuntimeError(f"resume failed:\n{resumed.stderr[-3000:]}")
        ids = [r["id"] for r in read_rows(run_dir)]
        requests = judge.stats()["chat_requests"]
        table.append((label, f"{before}/{rows}", str(len(set(ids)) == rows),
                      str(len(ids) - len(set(ids))), str(requests),
                      f"{requests / uninterrupted:.3f}"))  # fmt: skip
    return [
        f"kill -9 of the driver once half of {rows} rows are written, then --resume "
        f"(the uninterrupted ray run above: {uninterrupted} requests); load {load_average():.2f}",
        "",
        markdown_table(
            (
                "cache",
                "rows written at the kill",
                "complete",
                "ids twice",
                "requests, both runs",
                "x uninterrupted",
            ),
            table,
        ),
    ]


def max_in_window(starts: Sequence[float], seconds: float) -> int:
    ordered = sorted(starts)
    return max(
        (bisect.bisect_left(ordered, t + seconds) - i for i, t in enumerate(ordered)), default=0
    )


def part_rate(data: Path, judge: JudgeServer, rows: int, rpm: int, work: Path) -> list[str]:
    run = run_cli(data, work / "rate", judge, work / "cache-rate", "ray",
                  ("--requests-per-minute", str(rpm), "--ray-actors", "2"))  # fmt: skip
    starts = [s for s, _, path in judge.timeline() if path.endswith("/chat/completions")]
    span = max(starts) - min(starts)
    return [
        f"--requests-per-minute {rpm} --ray-actors 2, {rows} rows ({len(starts)} requests); "
        f"load {load_average():.2f}",
        "",
        f"- actors that scored: {run.actors}",
        f"- most requests in any 60-second window at the judge: **{max_in_window(starts, 60.0)}** "
        f"(limit {rpm})",
        f"- most in any 10-second window: {max_in_window(starts, 10.0)} "
        f"(an even pace gives {rpm / 6:.0f})",
        f"- rate reached: {60 * (len(starts) - 1) / span:.1f} requests/minute over {span:.0f} s",
    ]


def part_two_nodes(data: Path, rows: int, latency_ms: float, work: Path) -> list[str]:
    env = {**child_env(), "RAGEVAL_CACHE_DIR": str(work / "cache-two"),
           "JUDGE_LATENCY_MS": str(latency_ms), "PYTHON": sys.executable}  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [str(ROOT / ".ci" / "ray-two-nodes"), str(data), str(work / "two-nodes"),
         *(a for m in METRICS for a in ("-m", m)), "--ray-actors", "8"],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=3600,
    )  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"two-node run failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    run = _with_notices(Run("ray", wall, 0, work / "two-nodes"), done.stderr)
    same_status, largest, once = compare_runs(work / "local", work / "two-nodes")
    cluster = [line for line in done.stdout.splitlines() if line.startswith(("cluster", "conn"))]
    return [
        f"`.ci/ray-two-nodes` (two `ray start` nodes of 1 CPU, --ray-actors 8), {rows} rows; "
        f"load {load_average():.2f}",
        "",
        *(f"- {line}" for line in cluster),
        f"- scored by {run.actors} actors on {run.nodes} nodes; wall (both `ray start`s "
        f"included) {wall:.1f} s",
        f"- against the local engine's run above: same statuses {same_status}, largest |value "
        f"difference| {largest:.3g}, every row once {once}",
    ]


# ---------------------------------------------------------------------- installed size


def installed_size() -> list[str]:
    mb = 1e6
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, str(ROOT)], check=True)
        base = SitePackages.measure(venv)
        subprocess.run([*pip, f"{ROOT}[ray]"], check=True)
        with_ray = SitePackages.measure(venv)
        versions = pinned_versions(venv, ("ray", "pyarrow", "pandas", "numpy"))
        timed = (
            "import time; t = time.monotonic(); import ray, ray.data; print(time.monotonic() - t)"
        )
        imports = sorted(
            float(
                subprocess.run(
                    [str(venv / "bin" / "python"), "-c", timed],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(5)
        )
    added = {k: v - base.ours.get(k, 0) for k, v in with_ray.ours.items()}
    largest = sorted(((k, v) for k, v in added.items() if v > 0), key=lambda kv: -kv[1])[:8]
    return [
        "`pip install <rageval>`, then `pip install '<rageval>[ray]'`, in one fresh virtualenv; "
        "sum of file sizes in site-packages without pip/setuptools, MB = 10^6 bytes:",
        "",
        f"- rageval alone: {base.ours_total / mb:.1f} MB; with the ray extra: "
        f"{with_ray.ours_total / mb:.1f} MB; **the extra adds "
        f"{(with_ray.ours_total - base.ours_total) / mb:.1f} MB** "
        f"({(with_ray.ours_bytecode - base.ours_bytecode) / mb:.1f} MB of it bytecode)",
        "- largest additions: " + ", ".join(f"{k} {v / mb:.1f} MB" for k, v in largest),
        f"- resolved (Python {with_ray.python}): {', '.join(versions)}",
        f"- `import ray, ray.data` in that venv: median {imports[2]:.2f} s "
        f"(min {imports[0]:.2f}, max {imports[-1]:.2f}, 5 runs; load {load_average():.2f})",
    ]


# ---------------------------------------------------------------------- main


def _in_loopback_namespace() -> bool:
    return sorted(name for _, name in socket.if_nameindex()) == ["lo"]


def write_data(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for sample in iter_samples(rows):
            fh.write(json.dumps(sample) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--rate-rows", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS[1:],
        default=list(PARTS[1:]),
        help="besides 'same', which always runs (the others compare against it)",
    )
    parser.add_argument("--size", action="store_true", help="only the installed size")
    args = parser.parse_args(argv)
    if args.size:
        print("\n".join(installed_size()))
        return 0
    if not _in_loopback_namespace():
        print("Ray runs only in a loopback-only network namespace: "
              ".ci/loopback-ns python benchmarks/bench_ray.py ...", file=sys.stderr)  # fmt: skip
        return 2
    with Scratch() as work:
        data, tiny, rate_data = work / "data.jsonl", work / "tiny.jsonl", work / "rate.jsonl"
        write_data(data, args.rows)
        write_data(tiny, 2)
        write_data(rate_data, args.rate_rows)
        out: list[str] = []
        with JudgeServer(args.latency_ms) as judge:
            lines, on_ray = part_same(data, tiny, judge, args.rows, work)
            out += ["### Same results, wall time and start-up", "", *lines, ""]
            if "kill" in args.parts:
                out += ["### kill -9 and --resume", "",
                        *part_kill(data, judge, args.rows, on_ray.requests, work), ""]  # fmt: skip
            if "rate" in args.parts:
                out += ["### A global rate limit", "",
                        *part_rate(rate_data, judge, args.rate_rows, args.rpm, work), ""]  # fmt: skip
        if "two-nodes" in args.parts:
            out += ["### Two nodes through --ray-address", "",
                    *part_two_nodes(data, args.rows, args.latency_ms, work), ""]  # fmt: skip
        print("\n".join(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sys.exit(main())
