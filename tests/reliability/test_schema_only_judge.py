"""The eight metrics against a judge that answers at random within the schema sent and
ignores the prose (issue 11), with and without 30% of the requests failing: cells are
measured, values are finite and on their scales, and every cell without a value says why."""

from __future__ import annotations

import pytest
from reliability_helpers import check_invariants

from helpers import EIGHT, FAULTS, tagged_rows
from rageval.judge import Judge
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, FaultPlan, RandomJudge

N = 25
RANGES = {
    "answer_relevancy": (-1.0, 1.0),
    "answer_correctness": (-0.25, 1.0),
}


@pytest.mark.parametrize("fault_rate", [0.0, 0.3])
def test_a_schema_only_judge_scores_every_cell(fast_backoff: None, fault_rate: float) -> None:
    plan = FaultPlan(fault_rate, FAULTS, seed=3) if fault_rate else None
    with FakeOpenAI(RandomJudge(seed=8), faults=plan) as server:
        judge = Judge("m", base_url=server.base_url, api_key="sk-test", cache=False)
        result = evaluate(tagged_rows(N), EIGHT, llm=judge, embeddings="local", progress=False)
    check_invariants(result, EIGHT, N)
    measured = sum(s == "ok" for m in EIGHT for s in result.statuses(m))
    if fault_rate == 0:
        # (on main, 1,402 of 1,600 cells were not measured against such a judge)
        assert measured == N * len(EIGHT)
        assert result.usage.requests == 12 * N  # no re-ask: every reply is valid
    else:
        assert plan is not None and len(plan.injected) > 50
        assert measured >= 0.9 * N * len(EIGHT)
    for m in EIGHT:
        low, high = RANGES.get(m, (0.0, 1.0))
        assert all(low <= v <= high for v in result[m] if v is not None), m
