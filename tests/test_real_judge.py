"""rageval against a real model on llama.cpp's llama-server (CI: SmolLM2-135M-Instruct).

Two things only a real server can show: every schema rageval's judge metrics send is accepted
by llama.cpp's JSON-schema-to-grammar converter (a schema it cannot convert is a 400, which a
judge in ``mode="auto"`` would hide by falling back to another mode), and a real model's
replies, however weak, end every judge metric's cell measured or not measured with a named
cause, never an unhandled error. SmolLM2-135M is far too weak to judge: the values mean
nothing, only that each cell ends well. How to run them: tests/real_judge_helpers.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import EIGHT
from rageval import evaluate
from rageval.errors import CauseKind
from rageval.judge import Judge
from rageval.metrics import Metric, registered_metrics
from rageval.samples import sample_of
from real_judge_helpers import RealJudge, http_json, real_judge

pytestmark = pytest.mark.real_judge

ROW: dict[str, Any] = {
    "user_input": "When was the first Super Bowl played, and who won it?",
    "response": "The first Super Bowl was played on January 15, 1967. The Green Bay Packers won it.",
    "retrieved_contexts": [
        "The First AFL-NFL World Championship Game, later known as Super Bowl I, was played on "
        "January 15, 1967, at the Los Angeles Memorial Coliseum.",
        "The Green Bay Packers defeated the Kansas City Chiefs 35-10 in that game.",
    ],
    "reference": "Super Bowl I was played on January 15, 1967; Green Bay beat Kansas City 35-10.",
    # a second system's answer, for pairwise (a column no field takes lands in the metadata)
    "metadata": {"response_b": "Super Bowl I took place in 1967."},
}
#: the same exchange as a conversation, for the metrics that score conversations
CONVERSATION: dict[str, Any] = {
    "turns": [
        {"role": "user", "content": ROW["user_input"]},
        {
            "role": "assistant",
            "content": ROW["response"],
            "retrieved_contexts": ROW["retrieved_contexts"],
        },
    ],
    "reference_goal": "Learn when the first Super Bowl was played and who won it.",
    "reference_topics": ["American football"],
}
#: why a cell may end without a value against a real (weak) model: the judge's reply, or the
#: input; anything else (metric_error, transport, unknown) is a bug to fix
NAMED_CAUSES: frozenset[CauseKind] = frozenset(
    {"invalid_reply", "truncated", "refusal", "input_too_long", "undefined"}
)


@pytest.fixture(scope="module")
def real() -> RealJudge:
    return real_judge()


def row_for(metric: Metric) -> dict[str, Any]:
    """The row `metric` scores: the conversation, or the single-turn sample."""
    return CONVERSATION if metric.scores_conversations else ROW


def judge_metrics() -> list[Metric]:
    """rageval's own metrics that need a judge, with default settings (a metric another test
    registered is not one of them)."""
    return [
        cls()
        for cls in registered_metrics().values()
        if cls.needs_llm and cls.__module__.startswith("rageval.metrics.")
    ]


def test_every_judge_metric_asks_for_a_schema_llama_cpp_accepts(real: RealJudge) -> None:
    # the response_format of every request each metric plans for the sample (its dry run's),
    # as rageval sends it in json_schema mode, each distinct one once, beside a short message
    # and with a budget of one token: the server builds the grammar from the schema before
    # it generates anything, so a schema its converter rejects is a 400 here
    judge = Judge(real.model, base_url=real.base_url, mode="json_schema", cache=False)
    users: dict[str, set[str]] = {}  # response_format JSON -> the metrics that send it
    for metric in judge_metrics():
        planned = metric.planned_requests(sample_of(row_for(metric)))
        assert planned, f"{metric.name} plans no judge request for a complete sample"
        for request in planned:
            _, extra, _ = judge.request_text(request.messages, request.response_model)
            users.setdefault(extra, set()).add(metric.name)
    refused: dict[str, tuple[int, object]] = {}
    for extra, metrics in users.items():
        body: dict[str, Any] = {
            "model": real.model,
            "messages": [{"role": "user", "content": "Answer."}],
        }
        body.update(json.loads(extra), max_tokens=1, temperature=0)
        status, reply = http_json(f"{real.base_url}/chat/completions", body)
        if status != 200:
            refused[f"{sorted(metrics)}: {extra[:200]}"] = (status, reply)
    assert refused == {}
    assert set(EIGHT) <= set().union(*users.values())  # the benchmarks' eight, at the least


def test_one_sample_per_judge_metric_ends_measured_or_with_a_named_cause(
    real: RealJudge, tmp_path: Path
) -> None:
    metrics = judge_metrics()
    # as many requests at once as the server has slots (more would only queue there, and the
    # wait would count against their timeout, generous on a shared machine); the smallest
    # reply budget 64, not 1024: the calls that size no budget of their own (ratings, a
    # rubric grade) ask for that, and a weak model that rambles on there is cut off early
    # (a cell "truncated") instead of writing a thousand tokens at ~20 tokens/s
    judge = Judge(
        real.model,
        base_url=real.base_url,
        cache=False,
        max_concurrency=real.slots,
        max_tokens=64,
        timeout=120,
    )
    # a run scores rows of one kind: the single-turn metrics, then the conversation ones
    kinds = [[m for m in metrics if m.scores_conversations == c] for c in (False, True)]
    results = {
        m.name: result
        for kind, group in enumerate(kinds)
        for result in [
            evaluate([row_for(group[0])], group, llm=judge, run_dir=tmp_path / f"run{kind}")
        ]
        for m in group
    }
    ended: dict[str, object] = {}
    for metric in metrics:
        (cell,) = results[metric.name].cells(metric.name)
        assert cell is not None, f"{metric.name}: no cell"
        if cell.value is not None:
            ended[metric.name] = cell.value
        elif cell.cause_kind in NAMED_CAUSES:
            ended[metric.name] = cell.cause_kind
        else:
            ended[metric.name] = f"UNNAMED {cell.status} {cell.cause_kind}: {cell.cause}"
    assert not [outcome for outcome in ended.values() if str(outcome).startswith("UNNAMED")], ended
    # the server took every schema: the judge never had to fall back to another mode
    assert judge.structured_mode() == "json_schema"


def test_llama_cpp_log_probabilities_score_verdicts_and_ratings_in_the_same_requests(
    real: RealJudge, tmp_path: Path
) -> None:
    # a rating (answer_accuracy, two templates), per-item verdicts (context_precision, one
    # per context, without reasons) and verdicts inside a list of the reply
    # (answer_correctness' reference statements, its factuality alone) scored by probability
    # and by the sampled values: the same requests, and every cell read from llama.cpp's
    # log-probabilities (its grammar-constrained JSON, its tokens, its top_logprobs)
    metrics = ["answer_accuracy", "context_precision", "answer_correctness"]
    params: dict[str, dict[str, Any]] = {
        "context_precision": {"reasons": False},
        "answer_correctness": {"reasons": False, "weights": [1.0, 0.0]},
    }
    requests: dict[str, int] = {}
    for scoring in ("probabilities", "sampled"):
        judge = Judge(
            real.model,
            base_url=real.base_url,
            cache=False,
            mode="json_schema",
            scoring=scoring,
            max_concurrency=real.slots,
            max_tokens=64,
            timeout=120,
        )
        result = evaluate(
            [ROW], metrics, llm=judge, metric_params=params, run_dir=tmp_path / scoring
        )
        requests[scoring] = judge.usage.total.requests
        cells = {name: result.cells(name)[0] for name in metrics}
        for name, cell in cells.items():
            assert cell is not None and cell.value is not None, (scoring, name, cell)
            assert cell.evidence["scoring"] == scoring, (name, cell.evidence)
        if scoring == "probabilities":
            accuracy, precision = cells["answer_accuracy"], cells["context_precision"]
            assert accuracy is not None and precision is not None
            expected = accuracy.evidence["expected"]
            assert all(e is not None and 0.0 <= e <= 4.0 for e in expected.values()), expected
            # each template's distribution over 0/2/4 is kept, and its expected rating is its mean
            for template, dist in accuracy.evidence["distributions"].items():
                assert set(dist) <= {0, 2, 4} and sum(dist.values()) == pytest.approx(1.0)
                mean = sum(r * p for r, p in dist.items())
                assert mean == pytest.approx(expected[template]), (template, dist)
            ps = [v["probability"] for v in precision.evidence["verdicts"]]
            assert all(p is not None and 0.0 <= p <= 1.0 for p in ps), ps
            correctness = cells["answer_correctness"]
            assert correctness is not None
            # SmolLM2-135M at temperature 0 lists two reference statements here (a list's items)
            covered = [v.probability for v in correctness.evidence["reference_statements"].verdicts]
            supported = [
                v.probability for v in correctness.evidence["response_statements"].verdicts
            ]
            assert covered, correctness.evidence
            assert all(p is not None and 0.0 <= p <= 1.0 for p in covered + supported), (
                covered,
                supported,
            )
    assert requests["probabilities"] == requests["sampled"], requests
