"""Evaluate synthetic samples with rageval, the way its users do; print one JSON line.

Started by the benchmark scripts in a fresh process per run, so that ``getrusage`` CPU and peak
RSS belong to this one evaluation::

    python benchmarks/rageval_driver.py --base-url http://127.0.0.1:PORT/v1 \\
        --data samples.jsonl --metrics faithfulness --cache-dir DIR --run-dir DIR

The measured section is ``evaluate()`` alone (imports and reading the JSONL are outside it).
With ``--data`` given as ``@N`` the samples are generated on the fly and streamed (scale runs).
With no ``--base-url`` no judge is configured (offline metrics only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_data import iter_samples


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _data(spec: str) -> list[dict[str, Any]] | Iterator[dict[str, Any]] | str:
    if spec.startswith("@"):
        return iter_samples(int(spec[1:]))
    if spec.startswith("path:"):
        return spec[len("path:") :]
    return [json.loads(line) for line in Path(spec).read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default=None)
    parser.add_argument(
        "--data",
        required=True,
        help="a JSONL file (read before timing), path:FILE (rageval reads it), or @N (generated)",
    )
    parser.add_argument("--metrics", nargs="+", required=True)
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--embedding-model", default="text-embedding-3-small")
    parser.add_argument("--embeddings", default="openai", choices=("openai", "local"))
    parser.add_argument(
        "--concurrency",
        type=int,
        default=16,
        help="requests at once; 0: the judge's own default (with --probe: the server's slots)",
    )
    parser.add_argument(
        "--probe", action="store_true", help="check the endpoints first, as the CLI does"
    )
    parser.add_argument(
        "--metric-params",
        type=json.loads,
        default=None,
        help='constructor arguments by metric, JSON: {"faithfulness": {"reasons": false}}',
    )
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--no-cache", action="store_true", help="request cache off (diagnosis)")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    args = parser.parse_args(argv)

    from rageval.embeddings import embedding_factory
    from rageval.judge import Judge
    from rageval.metrics import create_metric
    from rageval.runner import evaluate
    from rageval.testing import install_network_guard

    install_network_guard()
    # ragas' driver imports the openai SDK (through langchain) before its timed section; do the
    # same here, where rageval would import it lazily at the first request
    import openai  # noqa: F401

    judge = None
    if args.base_url:
        judge = Judge(
            args.model,
            base_url=args.base_url,
            api_key="sk-bench",
            cache=False if args.no_cache else args.cache_dir,
            **({"max_concurrency": args.concurrency} if args.concurrency else {}),
        )
    if args.embeddings == "openai" and args.base_url:
        embeddings = embedding_factory(
            "openai",
            model=args.embedding_model,
            base_url=args.base_url,
            api_key="sk-bench",
            cache=False if args.no_cache else args.cache_dir,
        )
    else:
        embeddings = embedding_factory("local")
    params = args.metric_params or {}
    metrics = [create_metric(name, params.get(name)) for name in args.metrics]
    data = _data(args.data)

    profiler = None
    if args.profile is not None:
        import cProfile

        profiler = cProfile.Profile()
    cpu0, wall0, mono0 = _cpu(), time.perf_counter(), time.monotonic()
    if profiler is not None:
        profiler.enable()
    result = evaluate(
        data,
        metrics=metrics,
        llm=judge,
        embeddings=embeddings,
        run_dir=args.run_dir,
        resume=args.resume,
        progress=False,
        probe=args.probe,
    )
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - wall0
    cpu = _cpu() - cpu0
    if profiler is not None:
        profiler.dump_stats(str(args.profile))

    non_finite_seen: list[int] = []
    scores = {
        name: {
            "mean": s.mean,
            "measured": s.n_measured,
            "not_measured": s.n_not_measured,
            "skipped": s.n_skipped,
            "causes": s.causes,
        }
        for name, s in result.summary().items()
    }
    usage = result.usage
    non_finite = sum(
        1 for name in result.metrics for v in result[name] if v is not None and not math.isfinite(v)
    )
    if args.run_dir is not None:  # and anywhere in what the run wrote, evidence included

        def seen(_: str) -> None:
            non_finite_seen.append(1)

        log = (args.run_dir / "results.jsonl").read_text(encoding="utf-8")
        for line in log.splitlines():
            json.loads(line, parse_constant=seen)
        json.loads((args.run_dir / "summary.json").read_text(encoding="utf-8"), parse_constant=seen)
        non_finite += len(non_finite_seen)
    print(
        json.dumps(
            {
                "tool": "rageval",
                "samples": len(result),
                "wall_s": wall,
                "cpu_s": cpu,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                # CLOCK_MONOTONIC is shared by processes: lines up with the server's timeline
                "monotonic_start": mono0,
                "monotonic_end": mono0 + wall,
                "scores": scores,
                "non_finite": non_finite,
                "usage": {
                    "requests": usage.requests,
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "retries": usage.retries,
                    "cache_hits": usage.cache_hits,
                },
            },
            default=str,
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
