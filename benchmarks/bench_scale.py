"""How time and memory grow with the number of rows: 1k, 10k, 100k samples.

Two workloads, each in a fresh rageval process reading a JSONL file itself
(``evaluate("samples.jsonl", ...)``), with a run directory (the run log on disk):

* ``offline``: metrics that need no model at all (token_f1, rouge_l);
* ``judge``: faithfulness (2 judge requests per sample) against a 0 ms fake judge.

Reported per size: wall, samples/s, CPU, peak RSS of the evaluating process, and the growth
of each from the previous size. The judge server forgets recorded requests every few
seconds so that its own memory stays flat on long runs.

    python benchmarks/bench_scale.py --sizes 1000 10000 100000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _harness import WORK, JudgeServer, Scratch, fmt, markdown_table, rageval_cmd, run_driver
from synthetic_data import write_jsonl

WORKLOADS = {
    "offline": ["token_f1", "rouge_l"],
    "judge": ["faithfulness"],
}


def run(workload: str, n: int, server: JudgeServer | None) -> dict[str, Any]:
    data = WORK / f"samples-{n}-seed0.jsonl"
    if not data.exists():
        write_jsonl(data, n)
    with Scratch() as scratch:
        if server is not None:
            server.reset()
        result = run_driver(
            rageval_cmd(
                server.base_url if server else None,
                f"path:{data}",
                WORKLOADS[workload],
                scratch / "cache",
                run_dir=scratch / "run",
            )
        )
        result["run_dir_mb"] = (
            sum(p.stat().st_size for p in (scratch / "run").rglob("*") if p.is_file()) / 2**20
        )
    result["server"] = server.stats() if server is not None else None
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument(
        "--workloads", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS)
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    raw: list[dict[str, Any]] = []
    rows = []
    with JudgeServer(0, forget_every=5) as server:
        for workload in args.workloads:
            previous: dict[str, Any] | None = None
            for n in args.sizes:
                result = run(workload, n, server if workload == "judge" else None)
                result.update(workload=workload, n=n)
                raw.append(result)
                growth = ""
                if previous is not None:
                    growth = (
                        f"time ×{result['wall_s'] / previous['wall_s']:.1f}, "
                        f"RSS ×{result['maxrss_mb'] / previous['maxrss_mb']:.2f}"
                    )
                requests = result["server"]["chat_requests"] if result["server"] else 0
                rows.append(
                    [
                        workload,
                        f"{n:,}",
                        fmt(result["wall_s"], 1),
                        fmt(n / result["wall_s"], 0),
                        fmt(result["cpu_s"], 1),
                        fmt(result["maxrss_mb"], 0),
                        fmt(result["run_dir_mb"], 0),
                        f"{requests:,}",
                        growth,
                    ]
                )
                print(f"{workload} {n}: {rows[-1]}", file=sys.stderr, flush=True)
                previous = result
    if args.json is not None:
        args.json.write_text(json.dumps(raw, indent=1, default=str))
    print(
        markdown_table(
            [
                "workload",
                "samples",
                "wall s",
                "samples/s",
                "CPU s",
                "peak RSS MB",
                "run dir MB",
                "judge requests",
                "growth vs previous size",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
