"""response_groundedness: two templates rate 0/1/2 how far the contexts back the response."""

from __future__ import annotations

import pytest

from helpers import chat_count, judge_for, prompts_with, route
from rageval.metrics import ResponseGroundedness
from rageval.metrics.response_groundedness import prompts
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, Reply

SAMPLE = SingleTurnSample(
    response="Albert Einstein was born in 1879.",
    retrieved_contexts=[
        "Albert Einstein was born March 14, 1879.",
        "Albert Einstein was born at Ulm, in Württemberg, Germany.",
    ],
)
# both templates show the same data (contexts, response); their instructions differ
T1 = ("contexts", "response", "Is every claim in the response")
T2 = ("contexts", "response", "You are fact-checking the response")


def rating(value: int) -> Reply:
    return Reply.json({"rating": value})


async def test_seed_example_prints_one(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(2)), (T2, rating(2)))
    scorer = ResponseGroundedness(llm=judge_for(fake_openai))
    score = await scorer.single_turn_ascore(SAMPLE)
    assert str(score) == "1.0"  # (2/2 + 2/2) / 2
    assert chat_count(fake_openai) == 2


async def test_ratings_are_halved_and_averaged(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(1)), (T2, rating(0)))
    result = await ResponseGroundedness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # (1/2 + 0/2) / 2 = 0.25
    assert result.value == pytest.approx(0.25)
    assert result.evidence["ratings"] == {"template_1": 1, "template_2": 0}
    (first,) = prompts_with(fake_openai, *T1)
    (second,) = prompts_with(fake_openai, *T2)
    assert f"<response>\n{SAMPLE.response}\n</response>" in first
    assert f"<response>\n{SAMPLE.response}\n</response>" in second


async def test_one_template_never_valid_uses_the_other(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(5)), (T2, rating(1)))
    result = await ResponseGroundedness(
        llm=judge_for(fake_openai), max_retries=1
    ).single_turn_ascore(SAMPLE)
    # template 1 is off the scale twice and dropped (never read as 0): 1/2 = 0.5
    assert result.value == pytest.approx(0.5)
    assert result.evidence["ratings"] == {"template_1": None, "template_2": 1}


@pytest.mark.parametrize(
    "update",
    [{"response": ""}, {"retrieved_contexts": []}, {"retrieved_contexts": ["   "]}],
)
async def test_empty_response_or_contexts_score_zero_without_a_call(
    fake_openai: FakeOpenAI, update: dict[str, object]
) -> None:
    result = await ResponseGroundedness(llm=judge_for(fake_openai)).single_turn_ascore(
        SAMPLE.model_copy(update=update)
    )
    assert result.status == "ok"
    assert result.value == 0.0
    assert chat_count(fake_openai) == 0


def test_templates_share_the_data_then_differ_and_need_no_question() -> None:
    first, second = prompts("R.", ["C1"])
    a, b = first[-1]["content"], second[-1]["content"]
    data = "<contexts>\n[c1] C1\n</contexts>\n<response>\nR.\n</response>\n\n"
    assert a.startswith(data) and b.startswith(data)
    assert a != b
    assert "<question>" not in a + b


def test_max_retries_default_and_validation() -> None:
    assert ResponseGroundedness().params() == {
        "max_retries": 5,
        "mode": "ratings",
        "checker": None,
        "per_context": False,
        "value": "expected",
    }
    with pytest.raises(ValueError, match="max_retries"):
        ResponseGroundedness(max_retries=-3)
