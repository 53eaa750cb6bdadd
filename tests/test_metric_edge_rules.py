"""One rule per situation, applied by every metric (docs/metrics.md, "Edge cases"): each
blank field gives the documented status and value, decided without a judge request."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import embeddings_for, judge_for
from rageval.metrics import create_metric
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply

FULL = {
    "user_input": "Where is the Eiffel Tower?",
    "response": "The Eiffel Tower is in Paris.",
    "retrieved_contexts": ["The Eiffel Tower stands in Paris."],
    "reference": "It is in Paris, France.",
}
JUDGED = [
    "answer_relevancy",
    "answer_relevance",
    "answer_correctness",
    "answer_accuracy",
    "faithfulness",
    "context_precision",
    "context_recall",
    "context_relevance",
    "response_groundedness",
]
OFFLINE = ["semantic_similarity", "token_f1", "rouge_l"]
RULES: list[tuple[str, Any, list[str], tuple[str, float | None]]] = [
    # (field, blank value, metrics, (status, value))
    ("user_input", " ", ["answer_relevancy", "answer_relevance", "context_relevance"],
     ("not_measured", None)),
    ("response", "", ["answer_relevancy", "answer_relevance", "answer_correctness",
                      "answer_accuracy", "response_groundedness", *OFFLINE], ("ok", 0.0)),
    ("response", "", ["faithfulness"], ("not_measured", None)),
    ("reference", "\n", ["answer_correctness", "answer_accuracy", "context_precision",
                         "context_recall", *OFFLINE], ("not_measured", None)),
    ("retrieved_contexts", ["", "  "], ["context_precision", "context_recall",
                                        "context_relevance", "response_groundedness"],
     ("ok", 0.0)),
]  # fmt: skip
CASES = [
    pytest.param(field, blank, metric, want, id=f"blank {field}: {metric}")
    for field, blank, metrics, want in RULES
    for metric in metrics
]


def refuse(req: RecordedRequest) -> Reply | Fault:
    return Fault.status(400, "this rule must be decided without a request")


@pytest.mark.parametrize(("field", "blank", "metric", "want"), CASES)
async def test_each_blank_field_has_one_rule_everywhere(
    fake_openai: FakeOpenAI, field: str, blank: Any, metric: str, want: tuple[str, float | None]
) -> None:
    fake_openai.handler = refuse
    scorer = create_metric(metric)
    scorer.llm, scorer.embeddings = judge_for(fake_openai), embeddings_for(fake_openai)
    result = await scorer.single_turn_ascore(Sample.model_validate({**FULL, field: blank}))
    assert (result.status, result.value) == want, result.cause
    if result.status != "ok":
        assert result.cause_kind == "undefined"
    assert fake_openai.chat_requests == [] and fake_openai.embedding_requests == []


async def test_faithfulness_with_no_context_is_0_after_the_extraction(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(Reply.json({"statements": ["The Eiffel Tower is in Paris."]}))
    scorer = create_metric("faithfulness")
    scorer.llm = judge_for(fake_openai)
    result = await scorer.single_turn_ascore(
        Sample.model_validate({**FULL, "retrieved_contexts": [" "]})
    )
    assert (result.status, result.value) == ("ok", 0.0)
    assert len(fake_openai.chat_requests) == 1  # the statements, no verdicts


@pytest.mark.parametrize("metric", JUDGED)
async def test_a_blank_context_is_never_shown_to_the_judge(
    fake_openai: FakeOpenAI, metric: str
) -> None:
    from rageval.testing import RandomJudge

    fake_openai.handler = RandomJudge(seed=1)
    scorer = create_metric(metric)
    scorer.llm, scorer.embeddings = judge_for(fake_openai), embeddings_for(fake_openai)
    contexts = ["  ", *FULL["retrieved_contexts"], ""]
    result = await scorer.single_turn_ascore(
        Sample.model_validate({**FULL, "retrieved_contexts": contexts})
    )
    assert result.status == "ok", result.cause
    for request in fake_openai.chat_requests:
        text = request.messages[-1]["content"]
        assert "[c2]" not in text and "[2]" not in text, metric
