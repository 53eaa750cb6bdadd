"""answer_relevance (three dimensions, seed 002): the metric, the seed's grade()/agrade() evaluator
API with our Judge or raw openai clients, and customised evaluators."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from pydantic import BaseModel

from helpers import attempt, chat_count, judge_for, route, user_text
from rageval.metrics import (
    AnswerRelevance,
    ContextEvaluation,
    RelevanceScore,
    create_metric,
)
from rageval.metrics.answer_relevance import DEFAULT_PROMPT, overall_score
from rageval.metrics.evidence import FreeformEvidence
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

QUESTION = "What are the benefits of meditation?"
ANSWER = "Meditation reduces stress and improves focus."
CONTEXT = ["Studies link meditation to lower cortisol."]


def dims(topical: Any = 0.9, complete: Any = 0.7, concise: Any = 0.8, **extra: Any) -> Reply:
    return Reply.json(
        {
            "topical_match": topical,
            "completeness": complete,
            "conciseness": concise,
            "reasoning": "on topic, misses sleep benefits",
            **extra,
        }
    )


def sdk_client(server: FakeOpenAI, cls: Any = openai.AsyncOpenAI) -> Any:
    return cls(base_url=server.base_url, api_key="sk-test")


def test_overall_is_the_mean() -> None:
    assert overall_score([0.9, 0.7, 0.8]) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        overall_score([])


async def test_metric_mean_of_three_dimensions(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("question", "answer"), dims(0.9, 0.7, 0.8)))
    metric = AnswerRelevance(llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(
        SingleTurnSample(user_input=QUESTION, response=ANSWER, retrieved_contexts=CONTEXT)
    )
    # (0.9 + 0.7 + 0.8) / 3 = 0.8
    assert result.value == pytest.approx(0.8)
    assert result.evidence == FreeformEvidence.of(
        {
            "topical_match": 0.9,
            "completeness": 0.7,
            "conciseness": 0.8,
            "reasoning": "on topic, misses sleep benefits",
            # the written values: the test server returns no log-probabilities
            "scoring": "sampled",
            "scoring_why": "the endpoint returned no log-probabilities",
        }
    )
    assert result.reason == "mean of topical_match 0.9, completeness 0.7, conciseness 0.8"
    (request,) = fake_openai.chat_requests
    prompt = user_text(request)
    assert prompt.startswith(DEFAULT_PROMPT)
    assert "<context>" not in prompt  # relevance is judged without the contexts
    # the judge is never asked for the overall score: we compute it
    assert request.schema is not None
    assert "overall_score" not in request.schema["properties"]
    # the reasoning first, then each dimension as an enum of tenths, nothing else allowed
    assert list(request.schema["properties"]) == [
        "reasoning",
        "topical_match",
        "completeness",
        "conciseness",
    ]
    assert request.schema["additionalProperties"] is False
    tenths = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    for name in ("topical_match", "completeness", "conciseness"):
        assert request.schema["properties"][name]["enum"] == tenths


async def test_rating_outside_0_1_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def high_then_ok(req: RecordedRequest) -> Reply:
        return dims(9, 0.7, 0.8) if attempt(req) == 1 else dims(0.6, 0.6, 0.9)

    fake_openai.handler = route((("question", "answer"), high_then_ok))
    result = await AnswerRelevance(llm=judge_for(fake_openai)).ascore(
        user_input=QUESTION, response=ANSWER
    )
    assert chat_count(fake_openai) == 2
    assert "topical_match: Value error, must be a number from 0 to 1 (got 9)" in str(
        fake_openai.chat_requests[1].messages[-1]["content"]
    )
    assert result.value == pytest.approx(0.7)  # (0.6 + 0.6 + 0.9) / 3


async def test_empty_inputs(fake_openai: FakeOpenAI) -> None:
    metric = AnswerRelevance(llm=judge_for(fake_openai))
    empty = await metric.ascore(user_input=QUESTION, response="")
    assert empty.status == "ok" and empty.value == 0.0
    no_question = await metric.ascore(user_input=" ", response=ANSWER)
    assert no_question.status == "not_measured"
    assert fake_openai.requests == []
    with pytest.raises(ValueError, match="answer is empty"):
        await AnswerRelevance.agrade(question=QUESTION, answer=" ", client=judge_for(fake_openai))


def test_seed_grade_with_a_sync_openai_client(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("question", "answer"), dims(0.9, 0.7, 0.8)))
    client = sdk_client(fake_openai, openai.OpenAI)
    result = AnswerRelevance.grade(
        question=QUESTION, answer=ANSWER, context=CONTEXT, client=client, model="judge-x"
    )
    assert isinstance(result, RelevanceScore)
    assert result.overall_score == pytest.approx(0.8)  # (0.9 + 0.7 + 0.8) / 3
    assert (result.topical_match, result.completeness, result.conciseness) == (0.9, 0.7, 0.8)
    assert result.reasoning == "on topic, misses sleep benefits"
    assert fake_openai.chat_requests[0].model == "judge-x"


def test_seed_grade_with_positional_arguments(fake_openai: FakeOpenAI) -> None:
    """rag_evals documents grade(question, answer, context, client) by position too."""
    fake_openai.handler = route((("question", "answer"), dims(0.9, 0.7, 0.8)))
    client = sdk_client(fake_openai, openai.OpenAI)
    by_position = AnswerRelevance.grade(QUESTION, ANSWER, CONTEXT, client)
    by_keyword = AnswerRelevance().grade(
        question=QUESTION, answer=ANSWER, context=CONTEXT, client=client
    )
    assert isinstance(by_position, RelevanceScore)
    assert by_position == by_keyword
    assert by_position.overall_score == pytest.approx(0.8)


async def test_agrade_with_async_client_and_default_model(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.handler = route((("question", "answer"), dims(1.0, 0.5, 0.0)))
    result = await AnswerRelevance.agrade(
        question=QUESTION, answer=ANSWER, client=sdk_client(fake_openai)
    )
    assert isinstance(result, RelevanceScore)
    assert result.overall_score == pytest.approx(0.5)  # (1.0 + 0.5 + 0.0) / 3
    assert fake_openai.chat_requests[0].model == "gpt-4o-mini"
    monkeypatch.setenv("RAGEVAL_LLM", "env-model")
    await AnswerRelevance.agrade(
        question="Why meditate?", answer=ANSWER, client=sdk_client(fake_openai)
    )
    assert fake_openai.chat_requests[1].model == "env-model"


async def test_agrade_with_our_judge_or_the_instance_llm(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("question", "answer"), dims(0.9, 0.7, 0.8)))
    judge = judge_for(fake_openai)
    by_client = await AnswerRelevance.agrade(question=QUESTION, answer=ANSWER, client=judge)
    by_llm = await AnswerRelevance(llm=judge).agrade(question=QUESTION, answer="Less stress.")
    assert isinstance(by_client, RelevanceScore) and isinstance(by_llm, RelevanceScore)
    assert by_client.overall_score == by_llm.overall_score == pytest.approx(0.8)
    with pytest.raises(ValueError, match="model="):
        await AnswerRelevance.agrade(question=QUESTION, answer=ANSWER, client=judge, model="m")
    with pytest.raises(Exception, match="needs a judge"):
        await AnswerRelevance.agrade(question=QUESTION, answer=ANSWER)


async def test_custom_prompt_replaces_instructions_and_sees_context(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = route((("question", "answer", "context"), dims(0.3, 0.6, 0.9)))
    custom = ContextEvaluation(
        prompt="Judge strictly against our style guide.", response_model=RelevanceScore
    )
    result = await custom.agrade(
        question=QUESTION, answer=ANSWER, context=CONTEXT, client=judge_for(fake_openai)
    )
    assert isinstance(result, RelevanceScore)
    assert result.overall_score == pytest.approx(0.6)  # (0.3+0.6+0.9)/3
    prompt = user_text(fake_openai.chat_requests[0])
    assert prompt.startswith("Judge strictly against our style guide.")
    assert DEFAULT_PROMPT not in prompt
    assert "<context>\n[1] Studies link meditation to lower cortisol.\n</context>" in prompt


class Tone(BaseModel):
    politeness: float
    clarity: float
    reason: str  # a name MetricResult.ok() itself uses: must still land in the evidence
    flagged: bool


async def test_custom_response_model_without_overall_score(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (
            ("question",),
            Reply.json({"politeness": 1.0, "clarity": 0.5, "reason": "ok", "flagged": False}),
        )
    )
    metric = ContextEvaluation(
        prompt="Rate the tone.", response_model=Tone, llm=judge_for(fake_openai)
    )
    result = await metric.ascore(user_input=QUESTION, response=ANSWER)
    # score fields are the float ones: (1.0 + 0.5) / 2 = 0.75
    assert result.value == pytest.approx(0.75)
    assert result.evidence == FreeformEvidence.of(
        {
            "politeness": 1.0,
            "clarity": 0.5,
            "reason": "ok",
            "flagged": False,
            "scoring": "sampled",
            "scoring_why": "the endpoint returned no log-probabilities",
        }
    )
    graded = await metric.agrade(question=QUESTION, answer=ANSWER)
    assert isinstance(graded, Tone)


def test_response_model_needs_a_float_field() -> None:
    class NoScores(BaseModel):
        overall_score: float
        reasoning: str

    with pytest.raises(ValueError, match="no float score field"):
        ContextEvaluation(prompt="x", response_model=NoScores)
    with pytest.raises(TypeError):
        ContextEvaluation(prompt="x", response_model=dict)  # type: ignore[arg-type]  # the wrong type on purpose
    with pytest.raises(ValueError, match="prompt"):
        ContextEvaluation(prompt="  ")


def test_params_round_trip() -> None:
    default = create_metric("answer_relevance", AnswerRelevance().params())
    assert isinstance(default, AnswerRelevance)
    assert default.prompt is None and default.response_model is RelevanceScore
    custom = create_metric(
        "answer_relevance", ContextEvaluation(prompt="Rate the tone.", response_model=Tone).params()
    )
    assert isinstance(custom, AnswerRelevance)
    assert custom.prompt == "Rate the tone." and custom.response_model is Tone


def test_seed_names_from_the_top_level_package() -> None:
    import rageval
    from rageval.metrics import answer_relevance

    assert rageval.AnswerRelevance is AnswerRelevance
    assert rageval.ContextEvaluation is AnswerRelevance
    assert rageval.RelevanceScore is RelevanceScore
    assert answer_relevance.AnswerRelevance is AnswerRelevance  # the module
    assert answer_relevance.name == "answer_relevance" and answer_relevance.prompt is None
    assert list(RelevanceScore.model_fields) == [
        "overall_score",
        "topical_match",
        "completeness",
        "conciseness",
        "reasoning",
    ]


# ------------------------------------------------- a customised evaluator's own name (issue 13)


def test_a_customised_evaluator_reports_under_its_own_name() -> None:
    assert AnswerRelevance().name == ContextEvaluation().name == "answer_relevance"
    assert ContextEvaluation(prompt="Rate the tone.").name == "custom_relevance"
    assert ContextEvaluation(response_model=Tone).name == "custom_relevance"
    tone = ContextEvaluation(prompt="Rate the tone.", response_model=Tone, name="tone")
    assert tone.name == "tone" and type(tone).name == "answer_relevance"
    # recorded when given; without it the default follows from prompt and model
    assert tone.params()["name"] == "tone"
    assert "name" not in ContextEvaluation(prompt="Rate the tone.").params()
    assert "name" not in AnswerRelevance().params()

    class Politeness(AnswerRelevance):  # a subclass's own class name stays its default
        name = "politeness"

    assert Politeness(prompt="Rate the politeness.").name == "politeness"
    for bad in ("", "two words", "1st", 3):
        with pytest.raises(ValueError, match="name must be an identifier"):
            ContextEvaluation(prompt="x", name=bad)


def test_a_customised_evaluator_runs_next_to_the_builtin_one_and_is_recreated_from_the_log(
    fake_openai: FakeOpenAI, tmp_path: Any
) -> None:
    from rageval import evaluate
    from rageval.log import read_manifest

    custom_prompt = "Judge strictly against our style guide."
    fake_openai.handler = lambda req: (
        dims(0.3, 0.6, 0.9) if custom_prompt in user_text(req) else dims(0.9, 0.7, 0.8)
    )
    builtin = AnswerRelevance()
    custom = ContextEvaluation(prompt=custom_prompt, response_model=RelevanceScore, name="style")
    rows = [{"question": QUESTION, "answer": ANSWER}]
    result = evaluate(
        rows, metrics=[builtin, custom], llm=judge_for(fake_openai), run_dir=tmp_path / "run"
    )
    assert result["answer_relevance"] == [pytest.approx(0.8)]  # (0.9 + 0.7 + 0.8) / 3
    assert result["style"] == [pytest.approx(0.6)]  # (0.3 + 0.6 + 0.9) / 3
    assert result.usage_by_metric["style"].requests == 1

    specs = {s.name: s for s in read_manifest(tmp_path / "run").metrics}
    assert specs["answer_relevance"].registered_name is None  # written only when it differs
    assert specs["style"].registered_name == "answer_relevance"
    again = create_metric(specs["style"].registered_name or "", specs["style"].params)
    assert isinstance(again, AnswerRelevance)
    assert (again.name, again.prompt, again.response_model) == (
        "style",
        custom_prompt,
        RelevanceScore,
    )
    assert again.params() == custom.params()
    manifest_text = (tmp_path / "run" / "manifest.json").read_text()
    assert manifest_text.count("registered_name") == 1


def test_two_customised_evaluators_need_names_of_their_own() -> None:
    from rageval import evaluate
    from rageval.runner import RunConfigError

    one, two = ContextEvaluation(prompt="Rate the tone."), ContextEvaluation(prompt="Rate style.")
    with pytest.raises(RunConfigError, match=r"custom_relevance.*name="):
        evaluate([{"question": QUESTION, "answer": ANSWER}], metrics=[one, two])


def test_a_run_resumed_from_its_directory_alone_rebuilds_a_named_evaluator(
    fake_openai: FakeOpenAI, tmp_path: Any
) -> None:
    from rageval import evaluate

    fake_openai.handler = lambda req: dims(0.3, 0.6, 0.9)
    judge = judge_for(fake_openai)
    rows = [{"question": QUESTION, "answer": ANSWER}, {"question": "Why?", "answer": "Because."}]
    custom = ContextEvaluation(prompt="Rate the tone.", response_model=RelevanceScore, name="tone")
    first = evaluate(rows, metrics=[custom], llm=judge, run_dir=tmp_path / "run")
    asked = len(fake_openai.chat_requests)
    # metrics (and everything else but the judge) come back from the manifest
    again = evaluate(rows, llm=judge, run_dir=tmp_path / "run", resume=True)
    assert again["tone"] == first["tone"] == [pytest.approx(0.6)] * 2
    assert len(fake_openai.chat_requests) == asked  # nothing redone
