"""faithfulness end to end through the openai SDK against FakeOpenAI, plus its pure math."""

from __future__ import annotations

import pytest

from helpers import attempt, chat_count, judge_for, keyed, prompts_with, route
from rageval.metrics import Faithfulness
from rageval.metrics.base import MetricResult
from rageval.metrics.evidence import JudgedItem, VerdictEvidence
from rageval.metrics.faithfulness import faithfulness_score
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply

CONTEXTS = ["Dune is a 1965 novel by Frank Herbert.", "Dune won the Hugo Award."]
SAMPLE = Sample(
    user_input="Who wrote Dune and when?",
    response="Frank Herbert wrote Dune. It came out in 1965. He was Canadian. It won a Hugo.",
    retrieved_contexts=CONTEXTS,
)
STATEMENTS = [
    "Frank Herbert wrote Dune.",
    "Dune came out in 1965.",
    "Frank Herbert was Canadian.",
    "Dune won a Hugo Award.",
]


def verdicts(*flags: bool) -> Reply:
    return keyed("s", "supported", *flags)


def verdicts_of(result: MetricResult) -> list[JudgedItem]:
    """The statements' verdicts, typed evidence of what they are and what a true one means."""
    assert isinstance(result.evidence, VerdictEvidence)
    assert result.evidence.items == "statements"
    assert result.evidence.means == "supported by the retrieved contexts"
    return result.evidence.verdicts


def test_score_is_supported_over_total() -> None:
    assert faithfulness_score([True, True, False, True]) == 0.75
    assert faithfulness_score([False]) == 0.0
    assert faithfulness_score([]) is None


async def test_end_to_end_three_of_four_supported(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts(True, True, False, True)),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # 3 supported of 4 statements → 3/4
    assert result.status == "ok"
    assert result.value == pytest.approx(0.75)
    assert [s.verdict for s in verdicts_of(result)] == [True, True, False, True]
    assert [s.text for s in verdicts_of(result)] == STATEMENTS
    assert chat_count(fake_openai) == 2  # extraction + one verdict request
    (verdict_prompt,) = prompts_with(fake_openai, "contexts", "statements")
    assert "[s3] Frank Herbert was Canadian." in verdict_prompt
    assert "[c2] Dune won the Hugo Award." in verdict_prompt


async def test_the_schema_requires_one_key_per_statement(fake_openai: FakeOpenAI) -> None:
    # (on main the verdicts were a free list of {"id": int}: the schema let a judge skip,
    # repeat or invent ids, and "one per id" was only in the prose)
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts(True, True, False, True)),
    )
    await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    verdict_request = fake_openai.chat_requests[-1]
    schema = verdict_request.schema
    assert schema is not None and verdict_request.strict
    assert schema["required"] == ["s1", "s2", "s3", "s4"]
    assert schema["additionalProperties"] is False
    item = schema["$defs"]["SupportedVerdict"]
    assert list(item["properties"]) == ["reason", "supported"]  # the judge reasons first
    assert item["properties"]["supported"]["type"] == "boolean"


async def test_verdicts_are_mapped_by_key_not_by_order(fake_openai: FakeOpenAI) -> None:
    reply = {f"s{i}": {"reason": "r", "supported": i != 4} for i in (4, 2, 1, 3)}
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), Reply.json(reply)),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.75)
    assert [s.verdict for s in verdicts_of(result)] == [True, True, True, False]


async def test_empty_response_is_not_measured_without_a_request(fake_openai: FakeOpenAI) -> None:
    sample = SAMPLE.model_copy(update={"response": "   "})
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "not_measured"
    assert result.value is None
    assert "no factual statement" in (result.cause or "")
    assert chat_count(fake_openai) == 0


REFUSAL = Sample(
    user_input="Who translated Dune into French?",
    response="The passages do not mention a French translation. They only say Dune won a Hugo.",
    retrieved_contexts=CONTEXTS,
)


async def test_a_response_the_judge_extracts_nothing_from_has_its_sentences_verified(
    fake_openai: FakeOpenAI,
) -> None:
    # (before: not measured, "no factual statement", as ragas gives NaN: a refusal such as
    # this one dropped out of the mean; MEMERAG's French refusals, labelled faithful by people)
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": []})),
        (("contexts", "statements"), verdicts(True, False)),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(REFUSAL)
    # the two sentences, unchanged, verified in the verdict request: 1 supported of 2 → 1/2
    assert result.status == "ok"
    assert result.value == pytest.approx(0.5)
    assert isinstance(result.evidence, VerdictEvidence)
    assert result.evidence.items == "sentences"
    assert [v.text for v in result.evidence.verdicts] == [
        "The passages do not mention a French translation.",
        "They only say Dune won a Hugo.",
    ]
    assert result.evidence.fallback == (
        "the response's own sentences are verified: the statement extraction returned no statement"
    )
    assert result.reason == "1 of 2 sentences are supported by the contexts"
    (verdict_prompt,) = prompts_with(fake_openai, "contexts", "statements")
    assert "[s1] The passages do not mention a French translation." in verdict_prompt
    assert chat_count(fake_openai) == 2  # the extraction + the verdicts


async def test_extracted_statements_leave_no_fallback_note(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts(True, True, False, True)),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert isinstance(result.evidence, VerdictEvidence)
    assert result.evidence.fallback is None
    assert "fallback" not in result.evidence.model_dump()


#: an extraction reply cut at its limit while repeating one item (Qwen2.5-Coder-1.5B on a
#: German MEMERAG answer): not asked again, its statements unusable
LOOPING = '{"statements": ["Frank Herbert wrote Dune.", ' + '"Dune came out in 1965.", ' * 40


@pytest.mark.parametrize(
    ("extraction", "kind"),
    [
        (Reply.text(LOOPING, finish_reason="length"), "truncated"),
        (Reply.text("Sure, here are the statements."), "invalid_reply"),
    ],
)
async def test_an_extraction_that_fails_leaves_the_cell_unmeasured_with_its_cause(
    fake_openai: FakeOpenAI, extraction: Reply, kind: str
) -> None:
    # a failing judge call is not replaced by another way of scoring: under a fault the cell
    # says so instead of holding a value the judge's answer would not have given
    fake_openai.handler = route(
        (("text",), extraction),
        (("contexts", "statements"), verdicts(True, True, False, True)),
    )
    judge = judge_for(fake_openai, max_reasks=1)
    result = await Faithfulness(llm=judge).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured" and result.cause_kind == kind
    assert prompts_with(fake_openai, "contexts", "statements") == []  # no verdict request
    extractions = len(fake_openai.chat_requests)
    assert extractions == (1 if kind == "truncated" else 2)  # a loop is not asked again


async def test_an_extraction_the_endpoint_refuses_leaves_the_cell_unmeasured(
    fake_openai: FakeOpenAI,
) -> None:
    # (the endpoint keeps failing: a verdict request would fail too; no fallback)
    fake_openai.handler = lambda _: Fault.status(500)
    judge = judge_for(fake_openai, max_retries=0)
    result = await Faithfulness(llm=judge).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured" and result.cause_kind == "transport"
    assert chat_count(fake_openai) == 1


@pytest.mark.parametrize(
    "bad",
    [
        Reply.json({"s1": {"reason": "r", "supported": True}}),  # s2..s4 missing
        keyed("s", "supported", True, True, True, True, True),  # unknown key s5
        keyed("s", "supported", True, True, True, True, extra=1),  # unknown key
        Reply.json({f"s{i}": {"reason": "r", "supported": 1} for i in range(1, 5)}),  # not bool
    ],
)
async def test_replies_outside_the_schema_are_re_asked(fake_openai: FakeOpenAI, bad: Reply) -> None:
    # (a judge that ignores the schema: our own validation is the authority)
    def verdict_reply(req: RecordedRequest) -> Reply:
        return bad if attempt(req) == 1 else verdicts(True, False, False, True)

    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdict_reply),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # the corrected reply is used: 2 of 4 supported
    assert result.value == pytest.approx(0.5)
    assert len(prompts_with(fake_openai, "contexts", "statements")) == 2


async def test_ids_never_fixed_is_not_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts(True)),
    )
    judge = judge_for(fake_openai, max_reasks=1)
    result = await Faithfulness(llm=judge).single_turn_ascore(SAMPLE)
    assert result.status == "not_measured" and result.cause_kind == "invalid_reply"
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
    assert [s.verdict for s in verdicts_of(result)] == [False, False]
    assert len(fake_openai.chat_requests) == 1


async def test_blank_contexts_are_left_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": STATEMENTS})),
        (("contexts", "statements"), verdicts(True, True, False, True)),
    )
    sample = SAMPLE.model_copy(update={"retrieved_contexts": ["", *CONTEXTS]})
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.value == pytest.approx(0.75)
    (verdict_prompt,) = prompts_with(fake_openai, "contexts", "statements")
    assert "[c1] Dune is a 1965 novel" in verdict_prompt and "[c3]" not in verdict_prompt


async def test_a_200_statement_answer_is_scored(fake_openai: FakeOpenAI) -> None:
    # The reply budget grows with the items asked about. (On main: 1024 tokens, 2048 after a
    # truncation; 200 verdicts do not fit, and the cell was not measured.)
    from rageval.testing import RandomJudge

    many = [f"Fact number {i} holds." for i in range(1, 201)]
    judge = RandomJudge(seed=3)

    def handler(req: RecordedRequest) -> Reply:
        if "<text>" in req.messages[-1]["content"]:
            return Reply.json({"statements": many})
        return judge(req)

    fake_openai.handler = handler
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.status == "ok", result.cause
    assert len(verdicts_of(result)) == 200
    verdict_requests = [r for r in fake_openai.chat_requests if r.schema and "s1" in str(r.schema)]
    assert len(verdict_requests) == 2  # 100 statements per request
    assert all(r.body["max_tokens"] >= 100 * 60 for r in verdict_requests)
    assert all(r.body["max_tokens"] <= 16_384 for r in verdict_requests)
