"""rageval vs ragas 0.4.3 on the same synthetic samples, against the same fake judge.

Each (metric set, tool) run is a fresh driver process (so CPU and peak RSS are that run's
alone) against one judge server process with the injected latency; the server's counters are
reset before and read after each run. The two tools alternate which goes first.

    python benchmarks/bench_vs_ragas.py --samples 200 --latency-ms 0 --sets each all
    python benchmarks/bench_vs_ragas.py --samples 100 --latency-ms 300 --sets all
    python benchmarks/bench_vs_ragas.py --judge random --fault-rate 0.3 --tools rageval

``--judge random`` is a judge that answers at random within each request's JSON schema and
ignores the prompt's prose; ``--fault-rate`` injects transport and content faults (see
``judge_server.py``).

Writes the raw rows as JSON (``--json``) and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _harness import (
    EIGHT,
    RAGAS_PYTHON,
    WORK,
    JudgeServer,
    Row,
    Scratch,
    fmt,
    load_average,
    markdown_table,
    ragas_cmd,
    rageval_cmd,
    run_driver,
)
from synthetic_data import write_jsonl


def run_one(tool: str, server: JudgeServer, data: Path, metrics: list[str], samples: int) -> Row:
    server.reset()
    load = load_average()
    with Scratch() as scratch:
        if tool == "ragas":
            cmd = ragas_cmd(server.base_url, str(data), metrics)
        else:
            cmd = rageval_cmd(
                server.base_url, str(data), metrics, scratch / "cache", run_dir=scratch / "run"
            )
        result = run_driver(cmd)
    stats = server.stats()
    scores = result["scores"]
    if tool == "ragas":
        stats["ragas_stderr_lines"] = result["stderr_lines"]
    else:  # NaN or infinity among the values, or anywhere in results.jsonl / summary.json
        stats["non_finite"] = result["non_finite"]
    return Row(
        tool,
        "+".join(metrics) if len(metrics) < 8 else "all eight",
        samples,
        server.latency_ms,
        result["wall_s"],
        result["cpu_s"],
        result["maxrss_mb"],
        stats,
        scores,
        load,
    )


def median_row(rows: list[Row]) -> Row:
    ordered = sorted(rows, key=lambda r: r.wall_s)
    return ordered[len(ordered) // 2]


def table(pairs: list[tuple[str, dict[str, Row]]], latency_ms: float) -> str:
    header = [
        "metrics",
        "tool",
        "samples/s",
        "wall s",
        "req/sample",
        "prompt tok/sample",
        "+schema tok/sample",
        "completion tok/sample",
        "client CPU ms/req",
        "CPU ms/HTTP req",
        "peak RSS MB",
        "no value",
        "measured %",
        "speed vs ragas",
    ]
    if latency_ms:
        header += ["latency limit s", "wall / limit"]
    body = []
    for name, by_tool in pairs:
        base = by_tool.get("ragas")
        for tool in ("rageval", "ragas"):
            r = by_tool.get(tool)
            if r is None:
                continue
            ratio = r.samples_per_s / base.samples_per_s if base is not None else None
            row = [
                name,
                tool,
                fmt(r.samples_per_s),
                fmt(r.wall_s, 2),
                fmt(r.per_sample("chat_requests"), 2),
                fmt(r.per_sample("prompt_tokens"), 0),
                fmt(r.per_sample("schema_tokens"), 0),
                fmt(r.per_sample("completion_tokens"), 0),
                fmt(r.cpu_ms_per_request, 2),
                fmt(r.cpu_ms_per_http_request, 2),
                fmt(r.maxrss_mb, 0),
                str(r.unmeasured),
                f"{100 * r.measured_share:.1f}",
                f"{ratio:.2f}×" if tool == "rageval" and ratio else "",
            ]
            if latency_ms:
                row += [fmt(r.latency_limit_s, 2), fmt(r.wall_s / r.latency_limit_s, 3)]
            body.append(row)
    return markdown_table(header, body)


def render_saved(paths: list[Path]) -> int:
    grouped: dict[tuple[float, str], dict[str, list[Row]]] = {}
    for path in paths:
        for obj in json.loads(path.read_text()):
            row = Row(**obj)
            grouped.setdefault((row.latency_ms, row.metrics), {}).setdefault(row.tool, [])
            grouped[(row.latency_ms, row.metrics)][row.tool].append(row)
    for latency in sorted({k[0] for k in grouped}):
        pairs = [
            (name, {t: median_row(rs) for t, rs in by_tool.items()})
            for (lat, name), by_tool in grouped.items()
            if lat == latency
        ]
        print(f"\n### judge latency {latency:g} ms\n")
        print(table(pairs, latency))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["each", "all"],
        help="'each' (every metric alone), 'all' (the eight together), or names",
    )
    parser.add_argument("--tools", nargs="+", default=["rageval", "ragas"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--judge", choices=("synthetic", "random", "garbage"), default="synthetic")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="only print the tables of rows saved earlier with --json",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        return render_saved(args.from_json)

    if "ragas" in args.tools and not RAGAS_PYTHON.exists():
        sys.exit(f"no ragas venv at {RAGAS_PYTHON}: see benchmarks/README.md")
    data = write_jsonl(
        WORK / f"samples-{args.samples}-seed{args.seed}.jsonl", args.samples, args.seed
    )
    sets: list[list[str]] = []
    for spec in args.sets:
        if spec == "each":
            sets += [[m] for m in EIGHT]
        elif spec == "all":
            sets.append(list(EIGHT))
        else:
            sets.append(spec.split("+"))

    pairs: list[tuple[str, dict[str, Row]]] = []
    raw: list[dict[str, Any]] = []
    with JudgeServer(args.latency_ms, judge=args.judge, fault_rate=args.fault_rate) as server:
        for metrics in sets:
            name = "+".join(metrics) if len(metrics) < 8 else "all eight"
            runs: dict[str, list[Row]] = {t: [] for t in args.tools}
            for rep in range(args.repeat):
                order = args.tools if rep % 2 == 0 else list(reversed(args.tools))
                for tool in order:
                    row = run_one(tool, server, data, metrics, args.samples)
                    runs[tool].append(row)
                    raw.append(row.to_json())
                    print(
                        f"{name:>24} {tool:>8}: {row.samples_per_s:8.1f} samples/s, "
                        f"wall {row.wall_s:7.2f} s, {row.requests} requests, "
                        f"cpu {fmt(row.cpu_ms_per_request, 2)} ms/req, load {row.load:.1f}, "
                        f"measured {100 * row.measured_share:.1f}%, "
                        f"non-finite {row.server.get('non_finite', '-')}",
                        file=sys.stderr,
                        flush=True,
                    )
            pairs.append((name, {t: median_row(rs) for t, rs in runs.items() if rs}))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(raw, indent=1))
    print(f"judge: {args.judge}, fault rate {args.fault_rate:g}\n")
    print(table(pairs, args.latency_ms))
    loads = [r["load"] for r in raw]
    print(
        f"\n1-min load average during the runs: median {statistics.median(loads):.1f}, "
        f"max {max(loads):.1f} (2 cores)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
