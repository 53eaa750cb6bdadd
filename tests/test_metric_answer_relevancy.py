"""answer_relevancy end to end: scripted questions from the judge, chosen 2-d embeddings, so the
mean cosine is exact arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import attempt, embeddings_for, judge_for, route, user_text
from rageval import evaluate
from rageval.metrics import AnswerRelevancy, ResponseRelevancy, create_metric
from rageval.metrics.answer_relevancy import answer_relevancy_score
from rageval.metrics.evidence import QuestionsEvidence
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply

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


def q(text: str, noncommittal: bool = False) -> Reply:
    return Reply.json({"question": text, "noncommittal": int(noncommittal)})


def generations(*replies: Reply) -> Reply:
    """The n different choices of one request (the test server sends them as given)."""
    return Reply.choices(*replies)


@pytest.fixture
def server(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.embedder = lambda text: VECTORS[text]
    return fake_openai


def scorer(server: FakeOpenAI, **kw: Any) -> AnswerRelevancy:
    return AnswerRelevancy(llm=judge_for(server), embeddings=embeddings_for(server), **kw)


def test_pure_score() -> None:
    assert answer_relevancy_score([1.0, 0.0, 0.6], [False] * 3) == pytest.approx(1.6 / 3)
    # noncommittal only when every generation says so
    assert answer_relevancy_score([1.0, 0.9], [True, True]) == 0.0
    assert answer_relevancy_score([1.0, 0.8], [True, False]) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        answer_relevancy_score([], [])


async def test_seed_api_mean_cosine_by_hand(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1), q(Q2), q(Q3))))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    # cos to (1,0): Q1 (1,0) → 1; Q2 (0,1) → 0; Q3 (3,4) → 3/5 = 0.6; mean = 1.6/3 = 0.5333
    assert result.value == pytest.approx(1.6 / 3)
    assert result.evidence["noncommittal"] is False
    assert isinstance(result.evidence, QuestionsEvidence)
    assert [(q.question, q.noncommittal) for q in result.evidence.questions] == [
        (Q1, False),
        (Q2, False),
        (Q3, False),
    ]
    assert [q.cosine for q in result.evidence.questions] == [
        pytest.approx(1.0),
        pytest.approx(0.0),
        pytest.approx(0.6),
    ]
    # ONE judge request for three independent generations (n=3, temperature 0.3); the
    # question and the three generated ones in ONE embedding call
    (request,) = server.chat_requests
    assert (request.body["n"], request.body["temperature"]) == (3, 0.3)
    (embedding,) = server.embedding_requests
    assert sorted(embedding.body["input"]) == sorted([QUESTION, Q1, Q2, Q3])
    # each generation reverse-engineers ONE question from the response alone; the judge never
    # sees the real question. (On main: "3 different questions" in one reply, temperature 0.)
    prompt = user_text(request)
    assert RESPONSE in prompt and QUESTION not in prompt
    assert "different questions" not in prompt
    assert request.schema is not None
    assert list(request.schema["properties"]) == ["question", "noncommittal"]
    # 1/0 as in ragas' prompt: a small real judge flagged committal answers as a boolean
    assert request.schema["properties"]["noncommittal"]["enum"] == [0, 1]


async def test_cosine_is_not_clipped(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1), q(Q2), q(Q3_AWAY))))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    # Q3_AWAY (-3,4) → −3/5 = −0.6, kept negative: (1 + 0 − 0.6) / 3 = 0.1333
    assert result.value == pytest.approx(0.4 / 3)


async def test_a_negative_mean_is_not_clipped_at_0(server: FakeOpenAI) -> None:
    # (the mean above is positive, so it could not catch a clip at 0)
    server.handler = route((("answer",), generations(q(Q3_AWAY), q(Q2), q(Q3_AWAY))))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    # (−0.6 + 0 − 0.6) / 3 = −0.4
    assert result.status == "ok"
    assert result.value == pytest.approx(-0.4)


async def test_noncommittal_only_when_every_generation_says_so(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1, True), q(Q1, True), q(Q1, True))))
    result = await scorer(server).ascore(user_input=QUESTION, response="I'm not sure, sorry.")
    assert result.value == 0.0
    assert result.evidence["noncommittal"] is True
    assert result.evidence["noncommittal_votes"] == 3
    assert server.embedding_requests == []


async def test_one_noncommittal_flag_does_not_zero_the_score(server: FakeOpenAI) -> None:
    # (on main one flag zeroed the score; ragas and the published method need all N to agree)
    server.handler = route((("answer",), generations(q(Q1), q(Q2, True), q(Q3))))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(1.6 / 3)
    assert result.evidence["noncommittal"] is False
    assert result.evidence["noncommittal_votes"] == 1


async def test_a_blank_generated_question_counts_as_cosine_0(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1), q("  "), q(Q3))))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(1.6 / 3)  # (1 + 0 + 0.6) / 3
    (embedding,) = server.embedding_requests
    assert "  " not in embedding.body["input"]


async def test_an_invalid_generation_is_re_asked_on_its_own(server: FakeOpenAI) -> None:
    def reply(req: RecordedRequest) -> Reply:
        if req.body.get("n") == 3:
            return generations(q(Q1), Reply.json({"question": Q2}), q(Q3))
        return q(Q2)  # the re-ask of the second generation, alone

    server.handler = route((("answer",), reply))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(1.6 / 3)
    first, reask = server.chat_requests
    assert first.body["n"] == 3 and "n" not in reask.body and attempt(reask) == 2


async def test_an_endpoint_that_ignores_n_gets_one_request_per_generation() -> None:
    questions = iter([Q1, Q2, Q3, Q1, Q2, Q3])

    def one_each(req: RecordedRequest) -> Reply:
        return q(next(questions))

    with FakeOpenAI(one_each, ignore_n=True) as server:  # one choice, whatever n asks for
        server.embedder = lambda text: VECTORS.get(text, (1.0, 0.0))
        result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
        # the two generations the n=3 request did not return are asked for one by one
        assert result.value == pytest.approx(1.6 / 3)
        assert [r.body.get("n") for r in server.chat_requests] == [3, None, None]
        # remembered: the next sample sends three plain requests
        await scorer(server).ascore(user_input=QUESTION, response="Another answer.")
        assert [r.body.get("n") for r in server.chat_requests[3:]] == [None, None, None]


async def test_an_endpoint_that_rejects_n_gets_one_request_per_generation(
    server: FakeOpenAI,
) -> None:
    def no_n(req: RecordedRequest) -> Reply | Fault:
        if req.body.get("n", 1) > 1:
            return Fault.status(400, "n must be 1 for this model")
        return q(Q1)

    server.handler = no_n
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(1.0)
    assert [r.body.get("n") for r in server.chat_requests] == [3, None, None, None]
    await scorer(server).ascore(user_input=QUESTION, response="Another answer.")
    assert [r.body.get("n") for r in server.chat_requests[4:]] == [None, None, None]


def test_rows_started_together_learn_once_that_n_is_refused() -> None:
    # llama-server with one slot answers 400 to n > 1; rows in flight together used to send
    # one refused n-request each before their generations (4 requests a row instead of 3)
    with FakeOpenAI(route((("answer",), q(Q1))), llama_cpp_slots=1) as server:
        server.embedder = lambda text: VECTORS.get(text, (1.0, 0.0))
        data = [{"user_input": QUESTION, "response": f"{RESPONSE} ({i})"} for i in range(8)]
        result = evaluate(data, ["answer_relevancy"], llm=judge_for(server),
                          embeddings=embeddings_for(server), progress=False)  # fmt: skip
        assert result.statuses("answer_relevancy") == ["ok"] * 8
        sent_n = [r.body.get("n") for r in server.chat_requests]
        assert sent_n.count(3) == 1 and len(sent_n) == 1 + 8 * 3, sent_n


async def test_never_valid_is_not_measured(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), Reply.json({"question": Q1})))
    result = await scorer(server).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.status == "not_measured" and result.cause_kind == "invalid_reply"
    assert str(result.cause).startswith("judge call failed")
    assert server.embedding_requests == []


async def test_strictness_sets_the_number_of_generations(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), q(Q3)))
    result = await scorer(server, strictness=1).ascore(user_input=QUESTION, response=RESPONSE)
    assert result.value == pytest.approx(0.6)  # the one question's cosine
    (request,) = server.chat_requests
    assert "n" not in request.body


async def test_empty_inputs(server: FakeOpenAI) -> None:
    empty = await scorer(server).ascore(user_input=QUESTION, response="   ")
    assert empty.status == "ok" and empty.value == 0.0
    no_question = await scorer(server).ascore(user_input="", response=RESPONSE)
    assert no_question.status == "not_measured"
    assert server.requests == []  # decided without any request


async def test_response_relevancy_single_turn(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1), q(Q2), q(Q3))))
    sample = SingleTurnSample(
        user_input=QUESTION,
        response=RESPONSE,
        retrieved_contexts=["The First AFL-NFL World Championship Game was played in 1967."],
    )
    metric = ResponseRelevancy(llm=judge_for(server), embeddings=embeddings_for(server))
    result = await metric.single_turn_ascore(sample)
    assert result.value == pytest.approx(1.6 / 3)


def test_sync_score(server: FakeOpenAI) -> None:
    server.handler = route((("answer",), generations(q(Q1), q(Q2), q(Q3))))
    assert scorer(server).score(user_input=QUESTION, response=RESPONSE).value == pytest.approx(
        1.6 / 3
    )


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_strictness_validation(bad: Any) -> None:
    with pytest.raises(ValueError, match="strictness"):
        AnswerRelevancy(strictness=bad)


@pytest.mark.parametrize("bad", [-0.1, 2.5, True, "0.3"])
def test_temperature_validation(bad: Any) -> None:
    with pytest.raises(ValueError, match="temperature"):
        AnswerRelevancy(temperature=bad)


def test_params_round_trip() -> None:
    original = AnswerRelevancy(strictness=5, temperature=0.7)
    assert original.params() == {"strictness": 5, "temperature": 0.7}
    metric = create_metric("answer_relevancy", original.params())
    assert isinstance(metric, AnswerRelevancy) and metric.strictness == 5
    assert metric.temperature == 0.7
    assert AnswerRelevancy.needs_llm and AnswerRelevancy.needs_embeddings


def test_seed_names() -> None:
    import rageval
    from rageval.metrics import answer_relevancy

    assert rageval.ResponseRelevancy is rageval.AnswerRelevancy is AnswerRelevancy
    # the module stands for the metric with default settings
    assert (
        answer_relevancy.strictness == 3 and answer_relevancy.params() == AnswerRelevancy().params()
    )


async def test_a_failed_generation_stops_the_others_and_every_request_is_booked() -> None:
    import asyncio

    from pydantic import BaseModel

    from rageval.errors import JudgeCallFailed

    class Question(BaseModel):
        question: str

    async def handler(req: RecordedRequest) -> Reply:
        if attempt(req) == 1 and "n" not in req.body:
            await asyncio.sleep(2.0)  # the generations asked for afresh are slow
        return Reply.json({"wrong": 1})  # and nothing ever validates

    # the n=3 request returns one choice: the first generation fails after its two quick
    # re-asks (the same problem three times ends it) while the other two still wait for their
    # first reply
    with FakeOpenAI(handler, ignore_n=True) as server:
        judge = judge_for(server, max_reasks=2, cache=False)
        with pytest.raises(JudgeCallFailed):
            await judge.ask_n([{"role": "user", "content": "ask"}], Question, 3, temperature=1.0)
        await asyncio.sleep(2.5)  # time for abandoned generations to re-ask, were they left
        # the first generation's two re-asks only (left running, the other two were answered
        # after their wait and re-asked as well)
        assert [attempt(r) for r in server.chat_requests if attempt(r) > 1] == [2, 3]
        assert judge.usage.total.requests >= len(server.chat_requests)  # all sent are booked
