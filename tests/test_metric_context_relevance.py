"""context_relevance: two templates rate the contexts 0/1/2 against the question."""

from __future__ import annotations

import pytest

from helpers import attempt, chat_count, judge_for, prompts_with, route
from rageval.metrics import ContextRelevance
from rageval.metrics.context_relevance import prompts
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = SingleTurnSample(
    user_input="When and Where Albert Einstein was born?",
    retrieved_contexts=[
        "Albert Einstein was born March 14, 1879.",
        "Albert Einstein was born at Ulm, in Württemberg, Germany.",
    ],
)
# both templates show the same data (contexts, question); their instructions differ
T1 = ("contexts", "question", "How relevant are the retrieved contexts")
T2 = ("contexts", "question", "A search system returned these contexts")


def rating(value: int) -> Reply:
    return Reply.json({"rating": value})


async def test_seed_example_prints_one(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(2)), (T2, rating(2)))
    scorer = ContextRelevance(llm=judge_for(fake_openai))
    score = await scorer.single_turn_ascore(SAMPLE)
    assert str(score) == "1.0"  # (2/2 + 2/2) / 2
    assert chat_count(fake_openai) == 2


async def test_ratings_are_halved_and_averaged(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(2)), (T2, rating(1)))
    result = await ContextRelevance(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # (2/2 + 1/2) / 2 = 0.75
    assert result.value == pytest.approx(0.75)
    assert result.evidence["ratings"] == {"template_1": 2, "template_2": 1}
    (first,) = prompts_with(fake_openai, *T1)
    (second,) = prompts_with(fake_openai, *T2)
    assert "[c2] Albert Einstein was born at Ulm, in Württemberg, Germany." in first
    assert "[c1] Albert Einstein was born March 14, 1879." in second


async def test_one_template_never_valid_uses_the_other(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(0)), (T2, rating(4)))
    result = await ContextRelevance(llm=judge_for(fake_openai), max_retries=1).single_turn_ascore(
        SAMPLE
    )
    # template 2 answers 4 (off the 0/1/2 scale) twice and is dropped: 0/2 = 0 from template 1
    assert result.status == "ok"
    assert result.value == 0.0
    assert result.evidence["ratings"] == {"template_1": 0, "template_2": None}
    assert len(prompts_with(fake_openai, *T2)) == 2


async def test_both_templates_invalid_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(3)), (T2, rating(-1)))
    result = await ContextRelevance(llm=judge_for(fake_openai), max_retries=0).single_turn_ascore(
        SAMPLE
    )
    assert result.status == "not_measured"
    assert chat_count(fake_openai) == 2


@pytest.mark.parametrize(
    "update",
    [
        {"retrieved_contexts": []},
        {"retrieved_contexts": ["", " \t"]},
    ],
)
async def test_empty_contexts_score_zero_without_a_call(
    fake_openai: FakeOpenAI, update: dict[str, object]
) -> None:
    result = await ContextRelevance(llm=judge_for(fake_openai)).single_turn_ascore(
        SAMPLE.model_copy(update=update)
    )
    assert result.status == "ok"
    assert result.value == 0.0
    assert chat_count(fake_openai) == 0


async def test_blank_question_is_not_measured_without_a_call(fake_openai: FakeOpenAI) -> None:
    # one rule for a blank question: the metrics that measure relevance *to the question*
    # have nothing to measure. (On main this metric scored 0, answer_relevancy not measured.)
    result = await ContextRelevance(llm=judge_for(fake_openai)).single_turn_ascore(
        SAMPLE.model_copy(update={"user_input": "  "})
    )
    assert result.status == "not_measured" and result.cause_kind == "undefined"
    assert chat_count(fake_openai) == 0


async def test_json_true_is_not_a_rating_of_1(fake_openai: FakeOpenAI) -> None:
    # (on main `true` validated as the rating 1 and scored 0.5)
    def true_then_2(req: RecordedRequest) -> Reply:
        return Reply.json({"rating": True}) if attempt(req) == 1 else Reply.json({"rating": 2})

    fake_openai.handler = true_then_2
    result = await ContextRelevance(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == 1.0
    assert chat_count(fake_openai) == 4


def test_templates_share_the_data_then_differ_in_their_instructions() -> None:
    """The data first and the same in both (the contexts first, as every request that shows
    them), so that a server's prompt cache serves the second request the data the first one
    read."""
    first, second = prompts("Q?", ["C1"])
    a, b = first[-1]["content"], second[-1]["content"]
    data = "<contexts>\n[c1] C1\n</contexts>\n<question>\nQ?\n</question>\n\n"
    assert a.startswith(data) and b.startswith(data)
    assert a != b
    assert first[0] == second[0]  # the same system message


def test_max_retries_default_and_validation() -> None:
    assert ContextRelevance().params() == {"max_retries": 5, "value": "expected"}
    with pytest.raises(ValueError, match="max_retries"):
        ContextRelevance(max_retries=-1)
