"""faithfulness end to end through the openai SDK against FakeOpenAI, plus its pure math."""

from __future__ import annotations

import pytest

from metric_helpers import attempt, chat_count, judge_for, prompts_with, route
from rageval.metrics import Faithfulness
from rageval.metrics.faithfulness import faithfulness_score
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = Sample(
    user_input="Who wrote Dune and when?",
    response="Frank Herbert wrote Dune. It came out in 1965. He was Canadian. It won a Hugo.",
    retrieved_contexts=["Dune is a 1965 novel by Frank Herbert.", "Dune won the Hugo Award."],
)
STATEMENTS = [
    "Frank Herbert wrote Dune.",
    "Dune came out in 1965.",
    "Frank Herbert was Canadian.",
    "Dune won a Hugo Award.",
]


def verdicts(*pairs: tuple[int, bool]) -> Reply:
    return Reply.json(
        {"verdicts": [{"id": i, "reason": "because", "supported": s} for i, s in pairs]}
    )


def test_score_is_supported_over_total() -> None:
    assert faithfulness_score([True, True, False, True]) == 0.75
    assert faithfulness_score([False]) == 0.0
    assert faithfulness_score([]) is None


async def test_end_to_end_three_of_four_supported(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("answer",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts((1, True), (2, True), (3, False), (4, True))),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # 3 supported of 4 statements → 3/4
    assert result.status == "ok"
    assert result.value == pytest.approx(0.75)
    assert [s["verdict"] for s in result.evidence["statements"]] == [True, True, False, True]
    assert [s["text"] for s in result.evidence["statements"]] == STATEMENTS
    assert chat_count(fake_openai) == 2  # extraction + one verdict request
    (verdict_prompt,) = prompts_with(fake_openai, "contexts", "statements")
    assert "[3] Frank Herbert was Canadian." in verdict_prompt
    assert "[2] Dune won the Hugo Award." in verdict_prompt


async def test_verdicts_are_mapped_by_id_not_by_order(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("answer",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts((4, False), (2, True), (1, True), (3, True))),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.75)
    assert [s["verdict"] for s in result.evidence["statements"]] == [True, True, True, False]


async def test_empty_response_is_not_measured_without_a_request(fake_openai: FakeOpenAI) -> None:
    sample = SAMPLE.model_copy(update={"response": "   "})
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "not_measured"
    assert result.value is None
    assert "no factual statement" in (result.cause or "")
    assert chat_count(fake_openai) == 0


async def test_response_without_statements_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((("answer",), Reply.json({"statements": []})))
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured"
    assert chat_count(fake_openai) == 1  # the extraction only


@pytest.mark.parametrize(
    "bad",
    [
        verdicts((1, True), (2, True), (4, True)),  # id 3 missing
        verdicts((1, True), (2, True), (2, False), (3, True), (4, True)),  # id 2 twice
        verdicts((1, True), (2, True), (3, True), (4, True), (5, True)),  # unknown id 5
    ],
)
async def test_bad_ids_are_re_asked(fake_openai: FakeOpenAI, bad: Reply) -> None:
    def verdict_reply(req: RecordedRequest) -> Reply:
        return bad if attempt(req) == 1 else verdicts((1, True), (2, False), (3, False), (4, True))

    fake_openai.handler = route(
        (("answer",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdict_reply),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # the corrected reply is used: 2 of 4 supported
    assert result.value == pytest.approx(0.5)
    assert len(prompts_with(fake_openai, "contexts", "statements")) == 2


async def test_ids_never_fixed_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("answer",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts((1, True))),
    )
    judge = judge_for(fake_openai, max_reasks=1)
    result = await Faithfulness(llm=judge).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured"
    assert result.cause and "judge call failed" in result.cause
    assert len(prompts_with(fake_openai, "contexts", "statements")) == 2  # ask + 1 re-ask


async def test_no_context_scores_zero_without_a_verdict_request(fake_openai: FakeOpenAI) -> None:
    # statements are extracted (1 request), but with no context nothing can be supported:
    # 0 supported / 2 statements = 0.0, and no verdict request is sent
    fake_openai.script(Reply.json({"statements": ["A is B.", "C is D."]}))
    metric = Faithfulness(llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(
        Sample(user_input="q", response="A is B and C is D.", retrieved_contexts=["  "])
    )
    assert result.value == 0.0
    assert [s["verdict"] for s in result.evidence["statements"]] == [False, False]
    assert len(fake_openai.chat_requests) == 1
