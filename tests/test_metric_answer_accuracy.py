"""answer_accuracy end to end (two templates, 0/2/4) through the openai SDK against FakeOpenAI."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import attempt, chat_count, judge_for, prompts_with, route
from rageval.metrics import AnswerAccuracy
from rageval.metrics.authoring import mean_rating
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = SingleTurnSample(
    user_input="When was Einstein born?",
    response="Albert Einstein was born in 1879.",
    reference="Albert Einstein was born on 14 March 1879.",
)
# template 1 tags the response <candidate>; template 2 swaps roles and tags it <gold>
T1, T2 = ("reference", "candidate"), ("gold", "proposed")


def rating(value: Any) -> Reply:
    return Reply.json({"rating": value})


def test_mean_rating_uses_valid_ratings_only() -> None:
    assert mean_rating([4, 2], 4) == pytest.approx(0.75)  # (4/4 + 2/4) / 2
    assert mean_rating([None, 2], 4) == pytest.approx(0.5)
    assert mean_rating([None, None], 4) is None


async def test_seed_example_prints_one(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(4)), (T2, rating(4)))
    scorer = AnswerAccuracy(llm=judge_for(fake_openai))
    score = await scorer.single_turn_ascore(SAMPLE)
    assert str(score) == "1.0"  # (4/4 + 4/4) / 2
    assert chat_count(fake_openai) == 2


async def test_mean_of_both_templates_and_roles_swapped(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(4)), (T2, rating(2)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # (4/4 + 2/4) / 2 = 0.75
    assert result.value == pytest.approx(0.75)
    assert result.evidence["ratings"] == {"template_1": 4, "template_2": 2}
    (first,) = prompts_with(fake_openai, *T1)
    (second,) = prompts_with(fake_openai, *T2)
    assert f"<candidate>\n{SAMPLE.response}\n</candidate>" in first
    assert f"<reference>\n{SAMPLE.reference}\n</reference>" in first
    assert f"<gold>\n{SAMPLE.response}\n</gold>" in second
    assert f"<proposed>\n{SAMPLE.reference}\n</proposed>" in second


async def test_float_rating_4_0_is_accepted_as_4(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(4.0)), (T2, rating(4)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == 1.0
    assert result.evidence["ratings"] == {"template_1": 4, "template_2": 4}
    assert chat_count(fake_openai) == 2  # no re-ask


async def test_off_scale_rating_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def three_then_two(req: RecordedRequest) -> Reply:
        return rating(3) if attempt(req) == 1 else rating(2)

    fake_openai.handler = route((T1, three_then_two), (T2, rating(4)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # the re-asked rating 2 counts, never the 3: (2/4 + 4/4) / 2 = 0.75
    assert result.value == pytest.approx(0.75)
    assert len(prompts_with(fake_openai, *T1)) == 2
    reask = next(r for r in fake_openai.chat_requests if attempt(r) == 2)
    # the judge is told what was wrong
    assert "Input should be 0, 2 or 4 (got 3)" in str(reask.messages[-1]["content"])


async def test_the_schema_is_an_enum_of_the_scale(fake_openai: FakeOpenAI) -> None:
    # (on main: {"rating": {"type": "number"}}, so a schema-obeying judge could send 0.805)
    fake_openai.handler = route((T1, rating(4)), (T2, rating(4)))
    await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    for request in fake_openai.chat_requests:
        assert request.schema is not None
        assert request.schema["properties"]["rating"]["enum"] == [0, 2, 4]


async def test_one_template_never_valid_uses_the_other_alone(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(3)), (T2, rating(2)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai), max_retries=1).single_turn_ascore(
        SAMPLE
    )
    # template 1 gives 3 twice (ask + 1 re-ask) and is dropped, not counted as 0: 2/4 = 0.5
    assert result.status == "ok"
    assert result.value == pytest.approx(0.5)
    assert result.evidence["ratings"] == {"template_1": None, "template_2": 2}
    assert "template_1" in result.evidence["failures"]
    assert len(prompts_with(fake_openai, *T1)) == 2


async def test_all_ratings_invalid_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(3)), (T2, rating(5)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai), max_retries=4).single_turn_ascore(
        SAMPLE
    )
    assert result.status == "not_measured"
    assert result.value is None
    assert "no template gave a valid rating" in (result.cause or "")
    assert result.cause_kind == "invalid_reply"
    # the same wrong rating three times in a row ends the re-asks: 1 + 2 requests each, not
    # 1 + max_retries
    assert len(prompts_with(fake_openai, *T1)) == 3
    assert len(prompts_with(fake_openai, *T2)) == 3


async def test_default_max_retries_is_five(fake_openai: FakeOpenAI) -> None:
    def wrong_five_times(req: RecordedRequest) -> Reply:
        return rating([1, 3, 5, 6, 7, 4][attempt(req) - 1])

    fake_openai.handler = route((T1, wrong_five_times), (T2, rating(4)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == 1.0
    assert len(prompts_with(fake_openai, *T1)) == 6  # 1 ask + 5 re-asks
    assert AnswerAccuracy().params() == {
        "instructions": None, "examples": [], "reasons": False, "threshold": None, "max_retries": 5,
        "value": "pass_probability",
    }  # fmt: skip


def test_negative_max_retries_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        AnswerAccuracy(max_retries=-1)


@pytest.mark.parametrize(
    ("update", "status", "value"),
    [({"reference": " "}, "not_measured", None), ({"response": ""}, "ok", 0.0)],
)
async def test_blank_reference_or_response_without_a_request(
    fake_openai: FakeOpenAI, update: dict[str, str], status: str, value: float | None
) -> None:
    # the rules every metric follows (on main both were sent to the judge)
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(
        SAMPLE.model_copy(update=update)
    )
    assert (result.status, result.value) == (status, value)
    assert chat_count(fake_openai) == 0


async def test_accepts_a_plain_dict_sample(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((T1, rating(0)), (T2, rating(2)))
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(
        {"question": "q?", "answer": "a", "ground_truth": "g"}
    )
    assert result.value == pytest.approx(0.25)  # (0/4 + 2/4) / 2
    (first,) = prompts_with(fake_openai, *T1)
    assert "<candidate>\na\n</candidate>" in first
