"""Evaluate synthetic samples with ragas 0.4.3, the way its users do; print one JSON line.

Runs inside the ragas virtual environment (``benchmarks/.work/ragas-venv``), started by
``bench_vs_ragas.py``; it imports nothing from rageval except the stdlib-only network guard,
so that only loopback traffic is possible::

    benchmarks/.work/ragas-venv/bin/python benchmarks/ragas_driver.py \\
        --base-url http://127.0.0.1:PORT/v1 --data samples.jsonl --metrics faithfulness

The measured section is ``evaluate()`` alone (imports and data loading are outside it):
wall time, user+sys CPU of this process (``getrusage``) and its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from _harness import EIGHT  # next to this script (standard library only: fine in ragas' venv)

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

_SRC = Path(__file__).resolve().parents[1] / "src"


def _guard_network() -> None:
    """Only loopback connections (the fake judge); anything else raises at once."""
    sys.path.insert(0, str(_SRC))
    from rageval.testing.netguard import install_network_guard

    install_network_guard()
    sys.path.remove(str(_SRC))


def _metric(name: str) -> Any:
    import ragas.metrics as m

    instances = {
        "answer_relevancy": lambda: m.answer_relevancy,
        "answer_correctness": lambda: m.answer_correctness,
        "faithfulness": lambda: m.faithfulness,
        "context_precision": lambda: m.context_precision,
        "context_recall": lambda: m.context_recall,
        "answer_accuracy": lambda: m.AnswerAccuracy(),
        "context_relevance": lambda: m.ContextRelevance(),
        "response_groundedness": lambda: m.ResponseGroundedness(),
    }
    return instances[name]()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--metrics", nargs="+", choices=EIGHT, required=True)
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--embedding-model", default="text-embedding-3-small")
    parser.add_argument(
        "--max-workers", type=int, default=None, help="RunConfig's (default: ragas' own, 16)"
    )
    parser.add_argument(
        "--timeout", type=int, default=None, help="RunConfig's, s (default: ragas' own, 180)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="reply cap (default: ChatOpenAI's, none)"
    )
    parser.add_argument(
        "--rows-out", type=Path, default=None, help="each metric column's values (NaN: null)"
    )
    args = parser.parse_args(argv)

    _guard_network()
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from ragas import EvaluationDataset, RunConfig, evaluate
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.llms import LangchainLLMWrapper

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    dataset = EvaluationDataset.from_list(
        [{k: v for k, v in row.items() if k != "id"} for row in rows]
    )
    llm = LangchainLLMWrapper(
        ChatOpenAI(
            base_url=args.base_url, api_key="sk-bench", model=args.model, max_tokens=args.max_tokens
        )
    )
    # check_embedding_ctx_length=False: otherwise langchain tokenises with tiktoken, whose BPE
    # file is downloaded from the internet on first use
    embeddings = LangchainEmbeddingsWrapper(
        OpenAIEmbeddings(
            base_url=args.base_url,
            api_key="sk-bench",
            model=args.embedding_model,
            check_embedding_ctx_length=False,
        )
    )
    metrics = [_metric(name) for name in args.metrics]

    cpu0, wall0 = _cpu(), time.perf_counter()
    result = evaluate(
        dataset,
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        # ragas' defaults (16 workers, 180 s timeout, 10 retries) unless set
        run_config=RunConfig(
            **{k: v for k, v in (("max_workers", args.max_workers), ("timeout", args.timeout)) if v}
        ),
        show_progress=False,
    )
    wall = time.perf_counter() - wall0
    cpu = _cpu() - cpu0

    frame = result.to_pandas()
    scores: dict[str, Any] = {}
    columns: dict[str, list[float | None]] = {}
    for column in frame.columns:
        if column in ("user_input", "response", "retrieved_contexts", "reference"):
            continue
        values = [float(v) for v in frame[column].tolist()]
        finite = [v for v in values if not math.isnan(v)]
        scores[column] = {
            "mean": sum(finite) / len(finite) if finite else None,
            "nan": len(values) - len(finite),
        }
        columns[column] = [None if math.isnan(v) else v for v in values]
    if args.rows_out is not None:
        args.rows_out.write_text(json.dumps(columns), encoding="utf-8")
    print(
        json.dumps(
            {
                "tool": "ragas",
                "version": __import__("ragas").__version__,
                "samples": len(rows),
                "wall_s": wall,
                "cpu_s": cpu,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "scores": scores,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
