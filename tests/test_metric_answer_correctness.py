"""answer_correctness: F-beta of statement verdicts blended with embedding similarity.

End to end through the openai SDK against FakeOpenAI; the server's embedder returns vectors
chosen here so that every cosine, and so every expected score, is exact hand arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from helpers import (
    attempt,
    chat_count,
    embeddings_for,
    judge_for,
    keyed,
    prompts_with,
    route,
)
from rageval.metrics import AnswerCorrectness, create_metric
from rageval.metrics.answer_correctness import answer_correctness_score, fbeta
from rageval.metrics.evidence import FactualityEvidence
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

REFERENCE = "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London."
SAMPLE = Sample(
    user_input="Who discovered penicillin, and where?",
    response="Alexander Fleming discovered penicillin in 1928, in Paris.",
    reference=REFERENCE,
)
ANSWER_STATEMENTS = [
    "Alexander Fleming discovered penicillin.",
    "The discovery was in 1928.",
    "The discovery was made in Paris.",
]
REFERENCE_STATEMENTS = [
    "Alexander Fleming discovered penicillin in 1928.",
    "The discovery was made at St Mary's Hospital in London.",
    "Fleming shared the 1945 Nobel Prize for it.",
]
# cos(response, reference) = 1·0.6 + 0·0.8 = 0.6
VECTORS = {SAMPLE.response: [1.0, 0.0, 0.0], SAMPLE.reference: [0.6, 0.8, 0.0]}
EXTRACT = ("text",)  # the shared extraction of the response's statements
VERDICTS = ("reference", "answer_statements")  # the one classification request


def embedder(text: str) -> Sequence[float]:
    return VECTORS.get(text, [0.0, 1.0, 0.0])


def statements(answer: list[str]) -> Reply:
    return Reply.json({"statements": answer})


def verdicts(
    supported: list[bool], covered: list[bool], reference: list[str] = REFERENCE_STATEMENTS
) -> Reply:
    claims: list[dict[str, Any]] = [
        {"statement": t, "reason": "r", "covered": c}
        for t, c in zip(reference, covered, strict=True)
    ]
    return keyed("s", "supported", *supported, reference_statements=claims)


# R1 ✓, R2 ✓, R3 ✗ → TP=2, FP=1;  G1 covered, G2 and G3 not → FN=2
TP2_FP1_FN2 = verdicts([True, True, False], [True, False, False])


@pytest.fixture
def server(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.embedder = embedder
    fake_openai.handler = route((VERDICTS, TP2_FP1_FN2), (EXTRACT, statements(ANSWER_STATEMENTS)))
    return fake_openai


def metric(server: FakeOpenAI, **kw: Any) -> AnswerCorrectness:
    return AnswerCorrectness(llm=judge_for(server), embeddings=embeddings_for(server), **kw)


# ------------------------------------------------------------------------- pure math


def test_fbeta_by_hand() -> None:
    assert fbeta(2, 1, 1) == pytest.approx(2 / 3)  # 2 / (2 + 0.5·(1+1))
    # TP=2, FP=0, FN=2: F1 = 4/(4+2); F2 = 5·2/(5·2 + 4·2) = 10/18; F½ = 1.25·2/(2.5 + 0.25·2)
    assert fbeta(2, 0, 2) == pytest.approx(4 / 6)
    assert fbeta(2, 0, 2, beta=2.0) == pytest.approx(10 / 18)
    assert fbeta(2, 0, 2, beta=0.5) == pytest.approx(2.5 / 3)
    assert fbeta(0, 0, 0) == 1.0  # nothing claimed on either side
    assert fbeta(0, 0, 3) == 0.0  # no response statements, 3 reference statements
    assert fbeta(0, 2, 0) == 0.0


def test_weighted_mean_is_normalised() -> None:
    assert answer_correctness_score(2 / 3, 0.6, (0.75, 0.25)) == pytest.approx(0.65)
    assert answer_correctness_score(2 / 3, 0.6, (3.0, 1.0)) == pytest.approx(0.65)
    assert answer_correctness_score(0.5, None, (1.0, 0.0)) == 0.5
    assert answer_correctness_score(None, 0.6, (0.0, 2.0)) == pytest.approx(0.6)


# ------------------------------------------------------------------------ end to end


async def test_default_weights_end_to_end(server: FakeOpenAI) -> None:
    result = await metric(server).single_turn_ascore(SAMPLE)
    # TP=2, FP=1, FN=2 → F1 = 2/(2+0.5·3) = 4/7 = 0.5714;
    # 0.75·0.5714 + 0.25·0.6 = 0.4286 + 0.15 = 0.5786
    assert result.status == "ok"
    assert result.value == pytest.approx(0.75 * 4 / 7 + 0.15, rel=1e-6)
    ev = result.evidence
    assert isinstance(ev, FactualityEvidence)
    assert ev.response_statements is not None and ev.reference_statements is not None
    assert ev["factuality"] == pytest.approx(4 / 7)
    assert ev["similarity"] == pytest.approx(0.6, rel=1e-6)
    assert (ev["tp_ids"], ev["fp_ids"], ev["fn_ids"]) == (["s1", "s2"], ["s3"], ["f2", "f3"])
    assert [s.verdict for s in ev.response_statements.verdicts] == [True, True, False]
    assert [s.text for s in ev.reference_statements.verdicts] == REFERENCE_STATEMENTS
    # the response's statements (shared extraction) + one classification request that also
    # gets the reference's statements; one embedding call
    assert chat_count(server) == 2
    (extraction,) = prompts_with(server, *EXTRACT)
    assert REFERENCE not in extraction  # the extraction sees the response alone
    (classify,) = prompts_with(server, *VERDICTS)
    assert "[s3] The discovery was made in Paris." in classify
    assert REFERENCE in classify
    schema = server.chat_requests[-1].schema
    assert schema is not None
    assert schema["required"] == ["reference_statements", "s1", "s2", "s3"]
    assert schema["additionalProperties"] is False
    assert len(server.embedding_requests) == 1


async def test_seed_weights_and_threshold(server: FakeOpenAI) -> None:
    result = await metric(server, weights=[0.4, 0.6]).single_turn_ascore(SAMPLE)
    # 0.4·0.5714 + 0.6·0.6 = 0.2286 + 0.36 = 0.5886
    assert result.value == pytest.approx(0.4 * 4 / 7 + 0.36, rel=1e-6)
    passed = await metric(server, weights=[0.4, 0.6], threshold=0.58).single_turn_ascore(SAMPLE)
    assert passed.value == 1.0  # 0.5886 ≥ 0.58
    assert passed.evidence["score"] == pytest.approx(0.58857, rel=1e-4)
    failed = await metric(server, weights=[0.4, 0.6], threshold=0.59).single_turn_ascore(SAMPLE)
    assert failed.value == 0.0  # 0.5886 < 0.59


async def test_empty_response_scores_zero_without_any_request(server: FakeOpenAI) -> None:
    # ragas' defect: TP=FP=FN=0 for an empty response gave factuality 1
    result = await metric(server).single_turn_ascore(SAMPLE.model_copy(update={"response": " "}))
    assert result.status == "ok"
    assert result.value == 0.0
    assert result.evidence["factuality"] == 0.0
    assert chat_count(server) == 0
    assert server.embedding_requests == []


async def test_response_without_statements_has_factuality_zero(server: FakeOpenAI) -> None:
    server.handler = route(
        (VERDICTS, verdicts([], [False, False, False])), (EXTRACT, statements([]))
    )
    sample = SAMPLE.model_copy(update={"response": "Good question!"})
    result = await metric(server).single_turn_ascore(sample)
    # TP=0, FP=0, FN=3 → F1 = 0; similarity cos((0,1,0), (0.6,0.8,0)) = 0.8; 0.25·0.8 = 0.2
    assert result.value == pytest.approx(0.2, rel=1e-6)
    assert result.evidence["factuality"] == 0.0
    assert result.evidence["fn_ids"] == ["f1", "f2", "f3"]
    assert chat_count(server) == 2  # the reference's statements are still asked for
    schema = server.chat_requests[-1].schema
    assert schema is not None and schema["required"] == ["reference_statements"]


async def test_reference_without_statements_has_factuality_zero(server: FakeOpenAI) -> None:
    server.handler = route(
        (VERDICTS, verdicts([False, False, False], [], [])),
        (EXTRACT, statements(ANSWER_STATEMENTS)),
    )
    result = await metric(server, weights=[1, 0]).single_turn_ascore(SAMPLE)
    # TP=0, FP=3, FN=0 → F1 = 0
    assert result.value == 0.0
    assert result.evidence["fp_ids"] == ["s1", "s2", "s3"]


async def test_no_claims_on_either_side_is_factuality_one(server: FakeOpenAI) -> None:
    server.handler = route((VERDICTS, verdicts([], [], [])), (EXTRACT, statements([])))
    result = await metric(server).single_turn_ascore(SAMPLE)
    # TP=FP=FN=0 → factuality 1 (documented); 0.75·1 + 0.25·0.6 = 0.9
    assert result.value == pytest.approx(0.9, rel=1e-6)


async def test_zero_similarity_weight_makes_no_embedding_call(server: FakeOpenAI) -> None:
    result = await metric(server, weights=[1.0, 0.0]).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(4 / 7)  # F1 alone
    assert result.evidence["similarity"] is None
    assert server.embedding_requests == []


async def test_zero_factuality_weight_makes_no_judge_call(server: FakeOpenAI) -> None:
    result = await metric(server, weights=[0, 1]).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.6, rel=1e-6)  # the cosine alone
    assert result.evidence["factuality"] is None
    assert chat_count(server) == 0


async def test_blank_reference_is_not_measured(server: FakeOpenAI) -> None:
    result = await metric(server).single_turn_ascore(SAMPLE.model_copy(update={"reference": ""}))
    assert result.status == "not_measured" and result.cause_kind == "undefined"
    assert chat_count(server) == 0


async def test_missing_statement_key_is_re_asked(server: FakeOpenAI) -> None:
    def classify(req: RecordedRequest) -> Reply:
        # the first reply leaves out s3 (a judge ignoring the schema); the re-ask is complete
        if attempt(req) == 1:
            return verdicts([True, True], [True, False, False])
        return TP2_FP1_FN2

    server.handler = route((VERDICTS, classify), (EXTRACT, statements(ANSWER_STATEMENTS)))
    result = await metric(server).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.75 * 4 / 7 + 0.15, rel=1e-6)
    reasks = [r for r in server.chat_requests if attempt(r) == 2]
    assert len(reasks) == 1
    assert "s3" in str(reasks[0].messages[-1]["content"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": [-0.5, 1]}, "non-negative"),
        ({"weights": [0, 0]}, "both be zero"),
        ({"weights": [1]}, "two"),
        ({"weights": "ab"}, "two"),
        ({"weights": [1, float("nan")]}, "non-negative"),
        ({"beta": 0}, "beta"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
    ],
)
def test_invalid_parameters_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnswerCorrectness(**kwargs)


def test_params_recreate_the_metric() -> None:
    m = AnswerCorrectness(weights=[0.4, 0.6], beta=2, threshold=0.5)
    again = create_metric("answer_correctness", m.params())
    assert again.params() == m.params() == {
        "weights": [0.4, 0.6], "beta": 2.0,
        "instructions": None, "examples": [], "reasons": True, "threshold": 0.5,
    }  # fmt: skip
