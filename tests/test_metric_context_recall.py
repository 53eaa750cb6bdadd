"""context_recall: share of the reference's statements attributable to the retrieved contexts."""

from __future__ import annotations

import pytest

from metric_helpers import attempt, chat_count, judge_for, prompts_with, route
from rageval.metrics import ContextRecall
from rageval.metrics.context_recall import context_recall_score
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = Sample(
    user_input="Tell me about the Great Wall.",
    retrieved_contexts=[
        "The Great Wall of China is over 21,000 km long.",
        "Construction began in the 7th century BC.",
    ],
    reference="The Great Wall is over 21,000 km long, was begun in the 7th century BC, "
    "is visible from low orbit and is a UNESCO site.",
)
STATEMENTS = [
    "The Great Wall is over 21,000 km long.",
    "The Great Wall was begun in the 7th century BC.",
    "The Great Wall is visible from low orbit.",
    "The Great Wall is a UNESCO World Heritage Site.",
]
VERDICT_TAGS = ("contexts", "statements")
EXTRACT_TAGS = ("answer",)  # the single-text extraction prompt tags its text <answer>


def verdicts(*attributed: bool, order: list[int] | None = None) -> Reply:
    ids = order or list(range(1, len(attributed) + 1))
    return Reply.json(
        {"verdicts": [{"id": i, "reason": "r", "attributed": attributed[i - 1]} for i in ids]}
    )


def test_score_is_attributed_over_total() -> None:
    assert context_recall_score([True, True, False, True]) == 0.75
    assert context_recall_score([]) is None


async def test_three_of_four_statements_attributed(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (VERDICT_TAGS, verdicts(True, True, False, True)),
        (EXTRACT_TAGS, Reply.json({"statements": STATEMENTS})),
    )
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # 3 attributed of 4 reference statements → 3/4 = 0.75
    assert result.value == pytest.approx(0.75)
    assert [s["attributed"] for s in result.evidence["statements"]] == [True, True, False, True]
    assert [s["text"] for s in result.evidence["statements"]] == STATEMENTS
    # the reference alone is extracted (the response is not needed), then one verdict request
    assert chat_count(fake_openai) == 2
    (extraction,) = prompts_with(fake_openai, *EXTRACT_TAGS)
    assert SAMPLE.text("reference") in extraction
    (verdict_prompt,) = prompts_with(fake_openai, *VERDICT_TAGS)
    assert "[4] The Great Wall is a UNESCO World Heritage Site." in verdict_prompt
    assert "[2] Construction began in the 7th century BC." in verdict_prompt


async def test_reference_without_statements_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((EXTRACT_TAGS, Reply.json({"statements": []})))
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured"
    assert chat_count(fake_openai) == 1


async def test_blank_reference_is_not_measured_without_a_request(fake_openai: FakeOpenAI) -> None:
    sample = SAMPLE.model_copy(update={"reference": "\n"})
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "not_measured"
    assert chat_count(fake_openai) == 0


async def test_no_context_scores_zero_without_verdicts(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((EXTRACT_TAGS, Reply.json({"statements": STATEMENTS})))
    sample = SAMPLE.model_copy(update={"retrieved_contexts": []})
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    # 0 of 4 statements can be attributed to nothing
    assert result.value == 0.0
    assert chat_count(fake_openai) == 1  # the extraction only


async def test_duplicate_id_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def reply(req: RecordedRequest) -> Reply:
        if attempt(req) == 1:
            return verdicts(True, True, True, True, order=[1, 2, 2, 3, 4])
        return verdicts(True, False, False, False)

    fake_openai.handler = route(
        (VERDICT_TAGS, reply), (EXTRACT_TAGS, Reply.json({"statements": STATEMENTS}))
    )
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.25)  # 1 of 4 after the re-ask
    assert len(prompts_with(fake_openai, *VERDICT_TAGS)) == 2
