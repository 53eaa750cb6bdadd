"""The synthetic judge answers rageval's real metric prompts with replies that pass the metrics'
own validation, in every structured-output mode, and answers ragas-shaped prompts with the
JSON ragas' parser expects."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pydantic import BaseModel

from rageval import Sample
from rageval._client._transport import encode_body
from rageval.judge._modes import Mode, build_request, shape_of
from rageval.metrics.authoring import VerdictQuestion, rating_model
from rageval.testing import RecordedRequest, Reply
from rageval.testing.server import CHAT_PATH
from synthetic_judge import classify, handle, sentences, supported


def _module(name: str) -> Any:
    # rageval.metrics exports metric instances under the module names, so import by path
    return importlib.import_module(f"rageval.metrics.{name}")


_statements = _module("_statements")
answer_accuracy = _module("answer_accuracy")
answer_correctness = _module("answer_correctness")
answer_relevancy = _module("answer_relevancy")
context_precision = _module("context_precision")
context_recall = _module("context_recall")
context_relevance = _module("context_relevance")
faithfulness = _module("faithfulness")
response_groundedness = _module("response_groundedness")

QUESTION = "When was the town of Varlen founded?"
ANSWERING = (
    "The town of Varlen was founded in 1620. The Odra river runs through the town of Varlen. "
    "Local records describe it in some detail."
)
INCOMPLETE = "About 12,000 people live in the town of Varlen. Visitors often remark on this."
DISTRACTOR = "The town of Mostek was founded in 1544. Its main industry is glassmaking."
CONTEXTS = [INCOMPLETE, ANSWERING, DISTRACTOR]
RESPONSE = (
    "The town of Varlen was founded in 1620. The Odra river runs through the town of Varlen. "
    "It appears on a commemorative stamp."
)
REFERENCE = "The town of Varlen was founded in 1620."
MODES: tuple[Mode, ...] = ("json_schema", "tools", "json")


def ask(messages: list[dict[str, str]], model: type[BaseModel], mode: Mode) -> tuple[Any, str]:
    """The parsed reply of the synthetic judge to a rageval prompt sent in `mode`, and its kind."""
    sent, extra = build_request(mode, messages, shape_of(model))
    body = json.loads(encode_body({"model": "m", "messages": sent, **extra}))  # as sent on the wire
    req = RecordedRequest(CHAT_PATH, {}, body, 0.0)
    reply = handle(req)
    assert isinstance(reply, Reply)
    raw = reply.value if reply.kind == "json" else json.loads(reply.value)
    return model.model_validate(raw), classify(req)


def first_request(
    question: VerdictQuestion, items: list[str]
) -> tuple[list[dict[str, str]], type[BaseModel]]:
    """The messages and response model of the metric's (first) verdict request about `items`."""
    request = question.requests(items)[0]
    return request.messages, request.model


def ruled(reply: Any, prefix: str, field: str, count: int) -> list[bool]:
    return [getattr(getattr(reply, f"{prefix}{i}"), field) for i in range(1, count + 1)]


@pytest.mark.parametrize("mode", MODES)
def test_faithfulness_rules_on_every_statement_and_follows_the_contexts(mode: Mode) -> None:
    statements = [*sentences(RESPONSE), "Varlen has a famous opera house."]
    messages, model = first_request(faithfulness.Faithfulness().question(CONTEXTS), statements)
    reply, kind = ask(messages, model, mode)
    assert ruled(reply, "s", "supported", 4) == [True, True, False, False]
    assert kind == ("rageval-json:reply" if mode == "json" else "rageval:SupportedVerdicts")


@pytest.mark.parametrize("mode", MODES)
def test_answer_correctness_rules_on_both_sides(mode: Mode) -> None:
    answer = sentences(RESPONSE)
    reference = f"{REFERENCE} The town of Varlen has a stone bridge."
    sample = Sample(user_input=QUESTION, reference=reference)
    messages, model = first_request(answer_correctness.AnswerCorrectness().question(sample), answer)
    reply, _ = ask(messages, model, mode)
    assert ruled(reply, "s", "supported", 3) == [True, False, False]
    claims = reply.reference_statements
    assert [c.statement for c in claims] == sentences(reference)
    assert [c.covered for c in claims] == [True, False]


def test_context_precision_marks_only_the_answering_context_useful() -> None:
    sample = Sample(user_input=QUESTION, reference=REFERENCE)
    question = context_precision.ContextPrecision().question(sample)
    messages, model = first_request(question, CONTEXTS)
    reply, _ = ask(messages, model, "json_schema")
    assert ruled(reply, "c", "useful", 3) == [False, True, False]


def test_context_recall_rules_on_the_sentences_not_the_contexts() -> None:
    reference = [REFERENCE, "The town of Varlen hosts a salt market."]
    sample = Sample(user_input=QUESTION, reference=" ".join(reference))
    question = context_recall.ContextRecall().question(sample, CONTEXTS)
    messages, model = first_request(question, reference)
    reply, _ = ask(messages, model, "tools")
    assert ruled(reply, "r", "attributed", 2) == [True, False]


@pytest.mark.parametrize(
    ("prompts", "scale"),
    [
        (answer_accuracy.prompts(QUESTION, RESPONSE, REFERENCE), answer_accuracy.SCALE),
        (context_relevance.prompts(QUESTION, CONTEXTS), context_relevance.SCALE),
        (response_groundedness.prompts(RESPONSE, CONTEXTS), response_groundedness.SCALE),
    ],
)
def test_ratings_stay_on_the_scale_the_prompt_states(
    prompts: list[list[dict[str, str]]], scale: tuple[int, ...]
) -> None:
    for messages in prompts:
        for mode in MODES:
            reply, _ = ask(messages, rating_model(scale), mode)
            assert reply.rating in scale


def test_answer_relevancy_writes_a_question_from_the_answer() -> None:
    reply, _ = ask(
        answer_relevancy.prompt(RESPONSE), answer_relevancy.GeneratedQuestion, "json_schema"
    )
    assert reply.question.strip().endswith("?")
    assert reply.noncommittal == 0


def test_statement_extraction_returns_the_sentences_of_the_text() -> None:
    single, _ = ask(_statements.prompt(QUESTION, RESPONSE), _statements.Statements, "json_schema")
    assert single.statements == sentences(RESPONSE)
    assert 2 <= len(single.statements) <= 4


def test_replies_are_deterministic() -> None:
    messages = answer_accuracy.prompts(QUESTION, RESPONSE, REFERENCE)[0]
    first = [ask(messages, rating_model(answer_accuracy.SCALE), "json_schema")[0] for _ in range(3)]
    assert len({r.rating for r in first}) == 1


def test_supported_needs_most_content_words_in_one_unit() -> None:
    assert supported("The town of Varlen was founded in 1620.", [DISTRACTOR, ANSWERING])
    # every word occurs somewhere, but no single context holds the claim
    assert not supported("The town of Varlen was founded in 1544.", [DISTRACTOR, ANSWERING])
    assert not supported("", [ANSWERING])


# ---------------------------------------------------------------- ragas-shaped prompts
class Verdict(BaseModel):
    statement: str
    reason: str
    verdict: int


class NLIStatementOutput(BaseModel):
    statements: list[Verdict]


class Classification(BaseModel):
    statement: str
    reason: str
    attributed: int


class ContextRecallClassifications(BaseModel):
    classifications: list[Classification]


def ragas_shaped(output: type[BaseModel], data: dict[str, Any]) -> RecordedRequest:
    """A prompt laid out the way ragas' PydanticPrompt lays it out: instruction, the output
    model's JSON schema, examples, then the input as JSON."""
    text = (
        "Judge the statements.\n"
        "Please return the output in a JSON format that complies with the following schema as "
        f"specified in JSON Schema:\n{json.dumps(output.model_json_schema())}"
        "Do not use single quotes in your response but double quotes,properly escaped with a "
        "backslash.\n\n--------EXAMPLES-----------\nExample 1\nInput: {}\nOutput: {}\n"
        "-----------------------------\n\nNow perform the same with the following input\n"
        f"input: {json.dumps(data, indent=4)}\nOutput: "
    )
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    return RecordedRequest(CHAT_PATH, {}, body, 0.0)


def test_ragas_nli_prompt_gets_one_verdict_per_statement() -> None:
    statements = [*sentences(RESPONSE)]
    req = ragas_shaped(
        NLIStatementOutput, {"context": "\n".join(CONTEXTS), "statements": statements}
    )
    assert classify(req) == "ragas:NLIStatementOutput"
    reply = handle(req)
    parsed = NLIStatementOutput.model_validate_json(str(reply.value))
    assert [v.statement for v in parsed.statements] == statements
    assert [v.verdict for v in parsed.statements] == [1, 1, 0]


def test_ragas_recall_prompt_classifies_each_reference_sentence() -> None:
    reference = f"{REFERENCE} It hosts a salt market."
    req = ragas_shaped(
        ContextRecallClassifications,
        {"question": QUESTION, "context": "\n".join(CONTEXTS), "answer": reference},
    )
    parsed = ContextRecallClassifications.model_validate_json(str(handle(req).value))
    assert [c.attributed for c in parsed.classifications] == [1, 0]


def test_ragas_plain_rating_templates_get_a_bare_rating() -> None:
    text = "Rate it.\n### Question: q\n### Context: c\nAnalyzing Context and Question, the Relevance score is "
    req = RecordedRequest(
        CHAT_PATH, {}, {"model": "m", "messages": [{"role": "user", "content": text}]}, 0.0
    )
    assert classify(req) == "ragas:nv_context_relevance"
    assert handle(req).value in {"0", "1", "2"}


def test_an_unknown_plain_prompt_is_named_unknown() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    req = RecordedRequest(CHAT_PATH, {}, body, 0.0)
    assert classify(req) == "unknown"
    assert handle(req).value == "ok"


# ---------------------------------------------------------------- through the real stack
async def test_metrics_score_against_the_synthetic_judge_without_reasks() -> None:
    """faithfulness and answer_accuracy, end to end through the openai SDK and the judge
    layer: every reply is accepted first time (2 requests each), and the values follow the
    judge's rules (2 of 3 response statements are in the contexts; ratings on 0/2/4)."""
    from rageval.judge import Judge
    from rageval.metrics import AnswerAccuracy, Faithfulness
    from rageval.testing import FakeOpenAI

    sample = {
        "user_input": QUESTION,
        "response": RESPONSE,
        "retrieved_contexts": CONTEXTS,
        "reference": REFERENCE,
    }
    async with FakeOpenAI(handle) as server:
        judge = Judge("fake-model", base_url=server.base_url, api_key="x", cache=False)
        faith = await Faithfulness(llm=judge).single_turn_ascore(sample)
        accuracy = await AnswerAccuracy(llm=judge).single_turn_ascore(sample)
        kinds = [classify(r) for r in server.chat_requests]
        assert not server.handler_errors
    assert faith.status == "ok" and faith.value == pytest.approx(2 / 3)
    assert accuracy.status == "ok" and accuracy.value in {0.0, 0.25, 0.5, 0.75, 1.0}
    assert kinds.count("rageval:Statements") == 1
    assert kinds.count("rageval:SupportedVerdicts") == 1
    assert kinds.count("rageval:Rating") == 2
    assert len(kinds) == 4  # no re-ask anywhere
