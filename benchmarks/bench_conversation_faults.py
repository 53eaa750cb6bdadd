"""The conversation judge metrics against the random-within-schema judge with 30 % faults, at
more conversations than the test uses, to see each metric's share of measured cells through
the noise of 40 (issue 25: at least 95 % with faults).

The rows, the judge and the fault mix are the test's
(``tests/reliability/test_schema_only_judge_conversations.py``: three answering turns with
contexts and a tool call, ``RandomJudge(seed=8)``, ``FaultPlan(RATE, FAULTS, seed)``), read
from the tests so the two cannot drift apart. Prints one line per metric: cells measured, and
the causes of the others by kind.

    python benchmarks/bench_conversation_faults.py --conversations 200 --seed 3
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "reliability")]

from test_schema_only_judge_conversations import METRICS, conversations  # noqa: E402

from helpers import FAULTS  # noqa: E402
from rageval._client import _retry  # noqa: E402
from rageval.judge import Judge  # noqa: E402
from rageval.runner import evaluate  # noqa: E402
from rageval.testing import FakeOpenAI, Fault, FaultPlan, RandomJudge  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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
        causes = collections.Counter(c.cause_kind for c in cells if c.status != "ok")
        total += measured
        print(f"{metric:40} {measured:5} / {n} ({measured / n:.1%})  {dict(causes)}")
    cells_all = n * len(METRICS)
    print(f"{'all':40} {total:5} / {cells_all} ({total / cells_all:.1%}); "
          f"faults injected: {len(plan.injected)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
