"""The table "metric × dataset × agreement with people", for any judge, in one command.

For each public human-labelled dataset (rageval.calibration.datasets) it runs
`rageval.calibrate` on its rows (a seeded sample of `--limit` rows) with the metrics the
dataset validates, and prints one row per (dataset, metric): Cohen's κ, balanced accuracy,
AUROC (binary labels) or Spearman/Pearson (continuous), each with its bootstrap 95% CI, and
the run's requests, tokens and cost. Each dataset's run directory (with calibration.json and
report.html) is kept under `--out`.

    # a real judge (any OpenAI-compatible endpoint; the key from OPENAI_API_KEY)
    python benchmarks/bench_calibration.py --data-root /path/to/data --llm gpt-4o-mini
    # the project's test server and its synthetic judge (numbers mean nothing: a plumbing run)
    python benchmarks/bench_calibration.py --data-root /work/shared/data --fake

The data is never copied: `--data-root` holds each dataset in its upstream layout (see
rageval/calibration/datasets.py and the SOURCE.md files that came with it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: what others measured on the same data, for context (from each dataset's SOURCE.md)
PUBLISHED = {
    "nq301": "GPT-4-eval acc 0.847, κ 0.693; BEM acc 0.806, κ 0.615 (n = 1,489)",
    "evouna-nq": "substring-match floor: accuracy 0.839",
    "evouna-tq": "substring-match floor: accuracy 0.914",
    "memerag": "LLM judges: balanced accuracy ≈ 0.60 (plain prompt) – 0.71 (guidelines + CoT); "
    "unigram-coverage AUROC floor 0.619",
    "memerag-ext": "unigram-coverage AUROC floor 0.768",
    "begin": "unigram-coverage AUROC floor 0.936 (a sanity check, not a hard benchmark)",
    "stsb": "all-MiniLM-L6-v2 cosine Spearman 0.8203 (MTEB, 1,379 test pairs)",
    "sick": "all-MiniLM-L6-v2 cosine Spearman 0.7758 (MTEB SICK-R: all 9,927 pairs)",
}
_COLUMNS = ("cohen_kappa", "balanced_accuracy", "auroc", "spearman")


@contextlib.contextmanager
def _fake_endpoint() -> Iterator[str]:
    from rageval.testing import FakeOpenAI
    from synthetic_judge import handle  # next to this script

    with FakeOpenAI(handle, keep_records=False) as server:
        yield server.base_url


def _cell(stat: dict[str, Any] | None) -> str:
    if stat is None or stat["value"] is None:
        return "–"
    ci = "" if stat["low"] is None else f" [{stat['low']:.2f}, {stat['high']:.2f}]"
    return f"{stat['value']:.3f}{ci}"


def main() -> None:
    from rageval import Judge, calibrate
    from rageval.calibration.datasets import DATASETS, load_dataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, required=True)
    judge = parser.add_mutually_exclusive_group(required=True)
    judge.add_argument("--llm", metavar="MODEL", help="judge model on --base-url")
    judge.add_argument("--fake", action="store_true", help="the synthetic test judge")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: OpenAI)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--limit", type=int, default=200, help="rows per dataset (seeded)")
    parser.add_argument("--all-metrics", action="store_true", help="every metric a set names")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-cache", action="store_true", help="send every request again")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/.work/calibration"))
    parser.add_argument("--json", type=Path, help="write every agreement here")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if args.fake:
            base_url = stack.enter_context(_fake_endpoint())
            model, key = "synthetic-judge", "sk-fake"
        else:
            base_url, model, key = args.base_url, args.llm, os.environ.get("OPENAI_API_KEY")
        print(f"judge: {model} at {base_url or 'https://api.openai.com/v1'}")
        print(f"{args.limit} rows per dataset (seeded sample), bootstrap 95% CIs\n")
        header = (
            "| dataset | metric | labels | n | Cohen's κ | balanced acc. | AUROC | Spearman | "
            "run requests | run tokens | run cost | wall |"
        )
        print(header)
        print("|" + "---|" * (header.count("|") - 1))
        for name in args.datasets:
            dataset = load_dataset(name, args.data_root).sample(args.limit)
            metrics = list(dataset.metrics) if args.all_metrics else list(dataset.metrics[:1])
            run_dir = args.out / name
            if run_dir.exists():
                shutil.rmtree(run_dir)
            llm = Judge(
                model,
                base_url=base_url,
                api_key=key,
                max_concurrency=args.concurrency,
                cache=not args.no_cache,
            )
            started = time.perf_counter()
            report = calibrate(
                dataset.rows, dataset.labels(metrics), llm, run_dir=run_dir, progress=False
            )
            wall = time.perf_counter() - started
            cost = report.usage.cost_usd
            for a in report.agreements:
                stats = a.model_dump()["statistics"]
                row = {
                    "dataset": name,
                    "metric": a.metric,
                    "kind": a.kind,
                    "n": a.n_pairs,
                    "not_scored": a.n_without_judge,
                    "statistics": stats,
                    "usage": a.usage.to_dict(),
                    "run_requests": report.usage.requests,
                    "run_tokens": report.usage.total_tokens,
                    "run_cost_usd": cost,
                    "wall_s": wall,
                    "published": PUBLISHED[name],
                }
                rows.append(row)
                print(
                    f"| {name} | {a.metric} | {a.kind} | {a.n_pairs} | "
                    + " | ".join(_cell(stats.get(c)) for c in _COLUMNS)
                    + f" | {report.usage.requests:,} | {report.usage.total_tokens:,} | "
                    + ("unknown" if cost is None else f"${cost:.4f}")
                    + f" | {wall:.1f} s |",
                    flush=True,
                )
        print("\npublished reference numbers on the same data (see each SOURCE.md):")
        for name in args.datasets:
            print(f"- {name}: {PUBLISHED[name]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
