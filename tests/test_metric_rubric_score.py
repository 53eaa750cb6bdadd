"""rubric_score end to end: the judge's level 1..5 mapped to (s − 1)/4, off-scale replies re-asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import attempt, chat_count, judge_for, route, user_text
from rageval.metrics import RubricScore, create_metric
from rageval.metrics.evidence import RubricEvidence
from rageval.metrics.rubric_score import DEFAULT_RUBRIC, parse_rubric, rubric_value
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

RUBRIC = {f"score{n}_description": f"level {n} text" for n in range(1, 6)}
SAMPLE = SingleTurnSample(
    user_input="What is the boiling point of water at sea level?",
    response="100 °C.",
    reference="Water boils at 100 degrees Celsius at sea level.",
)


def grade(score: Any, feedback: str = "fits") -> Reply:
    return Reply.json({"feedback": feedback, "score": score})


def test_value_is_linear_in_the_level() -> None:
    assert [rubric_value(s) for s in range(1, 6)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError):
        rubric_value(0)


async def test_score_4_gives_0_75_with_raw_score_and_feedback(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("response",), grade(4, "Correct, but no unit spelled out.")))
    result = await RubricScore(llm=judge_for(fake_openai), rubrics=RUBRIC).single_turn_ascore(
        SAMPLE
    )
    assert result.value == 0.75  # (4 − 1) / 4
    assert result.evidence == RubricEvidence(
        raw_score=4,
        feedback="Correct, but no unit spelled out.",
        level_description="level 4 text",
        # the written score: the test server returns no log-probabilities
        scoring="sampled",
        scoring_why="the endpoint returned no log-probabilities",
    )
    assert result.reason == "Correct, but no unit spelled out."
    prompt = user_text(fake_openai.chat_requests[0])
    for n in range(1, 6):
        assert f"{n}: level {n} text" in prompt


async def test_score_7_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def seven_then_two(req: RecordedRequest) -> Reply:
        return grade(7) if attempt(req) == 1 else grade(2)

    fake_openai.handler = route((("response",), seven_then_two))
    result = await RubricScore(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert chat_count(fake_openai) == 2
    reask = fake_openai.chat_requests[1]
    assert "score: Input should be 1, 2, 3, 4 or 5 (got 7)" in str(reask.messages[-1]["content"])
    assert result.value == 0.25  # (2 − 1) / 4; the 7 never counts
    assert result.evidence["raw_score"] == 2
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None and schema["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]


async def test_fractional_score_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def half_then_five(req: RecordedRequest) -> Reply:
        return grade(3.5) if attempt(req) == 1 else grade(5)

    fake_openai.handler = route((("response",), half_then_five))
    result = await RubricScore(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert chat_count(fake_openai) == 2
    assert result.value == 1.0


async def test_never_on_scale_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("response",), grade(0)))
    result = await RubricScore(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured"
    assert str(result.cause).startswith("judge call failed")


async def test_present_fields_are_shown_and_absent_ones_left_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("response",), grade(3)))
    metric = RubricScore(llm=judge_for(fake_openai))
    await metric.single_turn_ascore(
        SingleTurnSample(response="100 °C.", retrieved_contexts=["Water boils at 100 °C."])
    )
    await metric.single_turn_ascore(SAMPLE)
    only_response, full = (user_text(r) for r in fake_openai.chat_requests)
    assert "<contexts>\n[1] Water boils at 100 °C.\n</contexts>" in only_response
    assert "<question>" not in only_response and "<reference>" not in only_response
    assert f"<question>\n{SAMPLE.user_input}\n</question>" in full
    assert f"<reference>\n{SAMPLE.reference}\n</reference>" in full
    assert "<response>\n100 °C.\n</response>" in full
    assert "<contexts>" not in full


async def test_default_rubric_is_used(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("response",), grade(5)))
    result = await RubricScore(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == 1.0
    assert result.evidence["level_description"] == DEFAULT_RUBRIC["score5_description"]
    assert DEFAULT_RUBRIC["score1_description"] in user_text(fake_openai.chat_requests[0])


def test_rubric_keys() -> None:
    short = {f"score{n}": f"d{n}" for n in range(1, 6)}
    assert parse_rubric(short) == {n: f"d{n}" for n in range(1, 6)}
    assert parse_rubric(RUBRIC)[3] == "level 3 text"
    with pytest.raises(ValueError, match=r"missing \[5\]"):
        parse_rubric({f"score{n}": "x" for n in range(1, 5)})
    with pytest.raises(ValueError, match="given twice"):
        parse_rubric({**short, "score2_description": "again"})
    with pytest.raises(ValueError, match="unknown rubric key"):
        parse_rubric({**short, "score6": "too high"})
    with pytest.raises(ValueError, match="non-empty description"):
        parse_rubric({**short, "score3": " "})


def test_params_round_trip() -> None:
    metric = create_metric("rubric_score", RubricScore(rubrics=RUBRIC).params())
    assert isinstance(metric, RubricScore)
    assert metric.rubric == parse_rubric(RUBRIC)
    assert RubricScore.required_fields == ("response",)


def test_the_raw_level_is_a_column_of_to_pandas(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    # ragas users compare raw 1..5 (on main to_pandas() had only (s-1)/4)
    from rageval import evaluate
    from rageval.results import load_run

    fake_openai.handler = lambda req: grade(4 if "100 °C." in user_text(req) else 2)
    rows = [{"response": "100 °C.", "id": "a"}, {"response": "", "id": "b"}]
    result = evaluate(
        rows, [RubricScore()], llm=judge_for(fake_openai), run_dir=tmp_path / "r", progress=False
    )
    for reread in (result, load_run(tmp_path / "r")):
        frame = reread.to_pandas()
        assert list(frame["rubric_score"]) == [0.75, 0.25]
        assert list(frame["rubric_score_raw"]) == [4, 2]
    assert set(frame.columns) >= {"rubric_score_status", "rubric_score_cause_kind"}
