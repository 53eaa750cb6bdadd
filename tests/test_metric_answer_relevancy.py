"""answer_relevancy end to end: scripted questions from the judge, chosen 2-d embeddings, so the
mean cosine is exact arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from metric_helpers import attempt, chat_count, embeddings_for, judge_for, route, user_text
from rageval.metrics import AnswerRelevancy, ResponseRelevancy, create_metric
from rageval.metrics.answer_relevancy import answer_relevancy_score
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

QUESTION = "When was the first Super Bowl?"
RESPONSE = "The first superbowl was held on Jan 15, 1967"
Q1 = "When was the first Super Bowl played?"
Q2 = "What happened on January 15, 1967?"
Q3 = "Which championship game took place in 1967?"
Q3_AWAY = "Who won the 1967 game?"
VECTORS = {
    QUESTION: (1.0, 0.0),
    Q1: (1.0, 0.0),
    Q2: (0.0, 1.0),
    Q3: (3.0, 4.0),
    Q3_AWAY: (-3.0, 4.0),
}


def questions(*qs: str, noncommittal: bool = False) -> Reply:
    return Reply.json({"questions": list(qs), "noncommittal": noncommittal})


@pytest.fixture
def server(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.embedder = lambda text: VECTORS[text]
    return fake_openai


def scorer(server: FakeOpenAI, **kw: Any) -> AnswerRelevancy:
    return AnswerRelevancy(llm=judge_for(server), embeddings=embeddings_for(server), **kw)


def test_pure_score() -> None:
    assert answer_relevancy_score([1.0, 0.0, 0.6], noncommittal=False) == pytest.approx(1.6 / 3)
    assert answer_relevancy_score([1.0, 0.9], noncommittal=True) == 0.0
    with pytest.raises(ValueError):
        answer_relevancy_score([], noncommittal=False)


async def test_seed_api_mean_cosine_by_hand(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1, Q2, Q3)))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    # cos to (1,0): Q1 (1,0) → 1; Q2 (0,1) → 0; Q3 (3,4) → 3/5 = 0.6; mean = 1.6/3 = 0.5333
    assert result.value == pytest.approx(1.6 / 3)
    assert result.evidence["noncommittal"] is False
    assert result.evidence["questions"] == [
        {"question": Q1, "cosine": pytest.approx(1.0)},
        {"question": Q2, "cosine": pytest.approx(0.0)},
        {"question": Q3, "cosine": pytest.approx(0.6)},
    ]
    # one judge request; the question and the three generated ones in ONE embedding call
    assert chat_count(server) == 1
    (embedding,) = server.embedding_requests
    assert sorted(embedding.body["input"]) == sorted([QUESTION, Q1, Q2, Q3])
    # the judge writes questions from the response alone: it never sees the real question
    prompt = user_text(server.chat_requests[0])
    assert RESPONSE in prompt and QUESTION not in prompt
    assert "exactly 3 different questions" in prompt


async def test_cosine_is_not_clipped(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1, Q2, Q3_AWAY)))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    # Q3_AWAY (-3,4) → −3/5 = −0.6, kept negative: (1 + 0 − 0.6) / 3 = 0.1333
    assert result.value == pytest.approx(0.4 / 3)


async def test_noncommittal_scores_0_without_embeddings_or_reask(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1, noncommittal=True)))
    result = await scorer(server).ascore(user_input=QUESTION, response="I'm not sure, sorry.")
    assert result.value == 0.0
    assert result.evidence["noncommittal"] is True
    # one question instead of three does not matter for a noncommittal reply: no re-ask
    assert chat_count(server) == 1
    assert server.embedding_requests == []


async def test_two_questions_when_three_asked_is_re_asked(server: FakeOpenAI) -> None:
    def two_then_three(req: RecordedRequest) -> Reply:
        return questions(Q1, Q2) if attempt(req) == 1 else questions(Q1, Q2, Q3)

    server.handler = route((("answer",), two_then_three))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert chat_count(server) == 2
    reask = server.chat_requests[1]
    assert "give exactly 3 non-empty questions; got 2" in str(reask.messages[-1]["content"])
    assert result.value == pytest.approx(1.6 / 3)  # from the complete second reply


async def test_blank_question_is_re_asked(server: FakeOpenAI) -> None:
    def blank_then_ok(req: RecordedRequest) -> Reply:
        return questions(Q1, " ", Q3) if attempt(req) == 1 else questions(Q1, Q2, Q3)

    server.handler = route((("answer",), blank_then_ok))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert chat_count(server) == 2
    assert result.value == pytest.approx(1.6 / 3)


async def test_never_enough_questions_is_not_measured(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1)))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.status == "not_measured"
    assert str(result.cause).startswith("judge call failed")
    assert chat_count(server) == 3  # the first ask and the judge's 2 re-asks
    assert server.embedding_requests == []


async def test_strictness_sets_the_number_of_questions(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q3)))
    result = await scorer(server, strictness=1).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(0.6)  # the one question's cosine
    assert "exactly one question" in user_text(server.chat_requests[0])


async def test_empty_inputs(server: FakeOpenAI) -> None:
    empty = await scorer(server).ascore(user_input=QUESTION, response="   ")
    assert empty.status == "ok" and empty.value == 0.0
    no_question = await scorer(server).ascore(user_input="", response=RESPONSE)
    assert no_question.status == "not_measured"
    assert server.requests == []  # decided without any request


async def test_response_relevancy_single_turn(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1, Q2, Q3)))
    sample = SingleTurnSample(
        user_input=QUESTION,
        response=RESPONSE,
        retrieved_contexts=["The First AFL-NFL World Championship Game was played in 1967."],
    )
    metric = ResponseRelevancy(llm=judge_for(server), embeddings=embeddings_for(server))
    result = await metric.single_turn_ascore(sample)
    assert result.value == pytest.approx(1.6 / 3)


def test_sync_score(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), questions(Q1, Q2, Q3)))
    assert scorer(server).score(user_input=QUESTION, response=RESPONSE).value == pytest.approx(
        1.6 / 3
    )


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_strictness_validation(bad: Any) -> None:
    with pytest.raises(ValueError, match="strictness"):
        AnswerRelevancy(strictness=bad)


def test_params_round_trip() -> None:
    metric = create_metric("answer_relevancy", AnswerRelevancy(strictness=5).params())
    assert isinstance(metric, AnswerRelevancy) and metric.strictness == 5
    assert AnswerRelevancy.needs_llm and AnswerRelevancy.needs_embeddings


def test_seed_names() -> None:
    import rageval
    from rageval.metrics import answer_relevancy

    assert rageval.ResponseRelevancy is rageval.AnswerRelevancy is AnswerRelevancy
    assert isinstance(answer_relevancy, AnswerRelevancy) and answer_relevancy.strictness == 3
