"""A llama.cpp server with one slot, with and without the run's endpoint check (issue 23, item
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

    python benchmarks/bench_one_slot.py --model qwen1.5b --samples 16 --metric faithfulness

Prints per mode: cells measured, the requests the run sent (retries among them), prompt
tokens the server read and tokens it generated (its ``/metrics``), and wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _harness import HERE, WORK, Scratch, child_env, load_average, markdown_table
from synthetic_data import write_jsonl

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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


if __name__ == "__main__":
    raise SystemExit(main())
