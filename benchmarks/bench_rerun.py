"""Re-running a finished evaluation: requests sent and time taken.

1. A first run scores ``--samples`` samples with the eight metrics against a 0 ms judge,
   writing its run directory and filling the request cache.
2. The same evaluation again in a new process and a new run directory: every judge and
   embedding request must be answered by the request cache.
3. ``resume`` of the finished run directory: nothing is left to do.
4. Steps 2 and 3 through the command line (``rageval evaluate``), timed as whole processes.

The server's counters show how many requests reached it in each step. With ``--profile FILE``
step 3 runs under cProfile (stats written to FILE) and its Python calls are printed: a count
that does not depend on the machine's load, to compare two versions of the code.

    python benchmarks/bench_rerun.py --samples 1000
    python benchmarks/bench_rerun.py --samples 1000 --profile /tmp/resume.prof
"""

from __future__ import annotations

import argparse
import pstats
import subprocess
import sys
import time

from _harness import (
    EIGHT,
    ROOT,
    WORK,
    JudgeServer,
    Scratch,
    child_env,
    fmt,
    markdown_table,
    rageval_cmd,
    run_driver,
)
from synthetic_data import write_jsonl


def cli_run(args: list[str], cache_dir: str, base_url: str) -> float:
    """Wall time of ``rageval ARGS`` as a whole process (the judge key and the embeddings'
    endpoint come from the environment, as the CLI documents)."""
    env = child_env()
    env.update(RAGEVAL_CACHE_DIR=cache_dir, OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=base_url)
    # `python -m rageval` rather than the console script: it runs this tree's `src` (the
    # script would import whatever rageval is installed)
    cmd = [sys.executable, "-m", "rageval"]
    t = time.perf_counter()
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"rageval {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--profile", default=None, help="cProfile the resume into this file")
    args = parser.parse_args(argv)

    data = write_jsonl(WORK / f"samples-{args.samples}-seed0.jsonl", args.samples)
    rows = []
    with JudgeServer(0) as server, Scratch() as scratch:
        cache = scratch / "cache"
        metrics = list(EIGHT)

        def api(label: str, run_dir: str, resume: bool = False) -> None:
            server.reset()
            t = time.perf_counter()
            result = run_driver(
                rageval_cmd(
                    server.base_url,
                    f"path:{data}",
                    metrics,
                    cache,
                    run_dir=scratch / run_dir,
                    resume=resume,
                    extra=["--profile", args.profile] if resume and args.profile else (),
                )
            )
            process = time.perf_counter() - t
            stats = server.stats()
            rows.append(
                [
                    label,
                    str(stats["chat_requests"]),
                    str(stats["embedding_requests"]),
                    fmt(result["wall_s"], 2),
                    fmt(process, 2),
                    str(result["usage"]["cache_hits"]),
                ]
            )
            print(f"{label}: {rows[-1]}", file=sys.stderr, flush=True)

        api("first run", "run1")
        api("same evaluation, new run dir (cache hits)", "run2")
        api("resume the finished run dir", "run1", resume=True)
        if args.profile:
            calls = pstats.Stats(args.profile).total_calls  # type: ignore[attr-defined]
            print(f"resume of the finished run dir: {calls:,} Python calls", file=sys.stderr)

        cli_common = [
            "evaluate",
            str(data),
            *[a for m in metrics for a in ("-m", m)],
            "--llm",
            "gpt-4o-mini",
            "--base-url",
            server.base_url,
            "--embeddings",
            "openai:text-embedding-3-small",
            "-q",
        ]
        for label, extra in (
            ("CLI: same evaluation, new run dir", ["-o", str(scratch / "cli")]),
            ("CLI: --resume the finished run dir", ["--resume", str(scratch / "run1")]),
        ):
            server.reset()
            wall = cli_run([*cli_common, *extra], str(cache), server.base_url)
            stats = server.stats()
            rows.append(
                [
                    label,
                    str(stats["chat_requests"]),
                    str(stats["embedding_requests"]),
                    "–",
                    fmt(wall, 2),
                    "–",
                ]
            )
            print(f"{label}: {rows[-1]}", file=sys.stderr, flush=True)

    print(
        markdown_table(
            [
                "step",
                "chat requests",
                "embedding requests",
                "evaluate() s",
                "whole process s",
                "cache hits",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
