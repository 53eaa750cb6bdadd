"""semantic_similarity end to end: chosen 2-d vectors served by FakeOpenAI's /v1/embeddings,
so every expected cosine is exact arithmetic."""

from __future__ import annotations

import pytest

from helpers import embeddings_for
from rageval.metrics import SemanticSimilarity, create_metric
from rageval.metrics._statements import SharedStatements
from rageval.metrics.base import ScoringContext
from rageval.metrics.evidence import SimilarityEvidence
from rageval.metrics.semantic_similarity import (
    semantic_similarity_score,
    semantic_similarity_value,
)
from rageval.samples import Sample, SingleTurnSample
from rageval.testing import FakeOpenAI

REFERENCE = "Paris is the capital of France."
CLOSE = "The French capital is Paris."
OPPOSITE = "Bananas are yellow."
VECTORS = {REFERENCE: (3.0, 4.0), CLOSE: (4.0, 3.0), OPPOSITE: (-4.0, -3.0)}


@pytest.fixture
def server(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.embedder = lambda text: VECTORS[text]
    return fake_openai


def test_score_is_the_cosine_or_a_thresholded_verdict() -> None:
    assert semantic_similarity_score(0.83) == 0.83
    assert semantic_similarity_score(0.83, threshold=0.8) == 1.0
    assert semantic_similarity_score(0.8, threshold=0.8) == 1.0  # ≥, not >
    assert semantic_similarity_score(0.79, threshold=0.8) == 0.0


async def test_cosine_by_hand_one_embedding_call(server: FakeOpenAI) -> None:
    metric = SemanticSimilarity(embeddings=embeddings_for(server))
    result = await metric.single_turn_ascore(SingleTurnSample(response=CLOSE, reference=REFERENCE))
    # cos((4,3), (3,4)) = (12 + 12) / (5·5) = 0.96
    assert result.value == pytest.approx(0.96)
    assert isinstance(result.evidence, SimilarityEvidence)
    assert result.evidence.cosine == pytest.approx(0.96) and result.evidence.threshold is None
    (request,) = server.embedding_requests
    assert sorted(request.body["input"]) == sorted([CLOSE, REFERENCE])
    assert server.chat_requests == []


async def test_negative_cosine_is_not_clipped(server: FakeOpenAI) -> None:
    metric = SemanticSimilarity(embeddings=embeddings_for(server))
    result = await metric.ascore(response=OPPOSITE, reference=REFERENCE)
    # cos((-4,-3), (3,4)) = (-12 - 12) / 25 = -0.96
    assert result.value == pytest.approx(-0.96)


async def test_threshold_turns_the_cosine_into_0_or_1(server: FakeOpenAI) -> None:
    emb = embeddings_for(server)
    passed = await SemanticSimilarity(embeddings=emb, threshold=0.95).ascore(
        response=CLOSE, reference=REFERENCE
    )
    assert passed.value == 1.0  # 0.96 ≥ 0.95
    assert passed.evidence["cosine"] == pytest.approx(0.96)
    assert "≥ threshold 0.95" in str(passed.reason)
    failed = await SemanticSimilarity(embeddings=emb, threshold=0.97).ascore(
        response=CLOSE, reference=REFERENCE
    )
    assert failed.value == 0.0  # 0.96 < 0.97
    assert "< threshold 0.97" in str(failed.reason)


async def test_empty_response_scores_0_and_empty_reference_is_not_measured(
    server: FakeOpenAI,
) -> None:
    metric = SemanticSimilarity(embeddings=embeddings_for(server))
    empty = await metric.ascore(response=" \n", reference=REFERENCE)
    assert empty.status == "ok" and empty.value == 0.0
    no_ref = await metric.ascore(response=CLOSE, reference="")
    assert no_ref.status == "not_measured" and "reference is empty" in str(no_ref.cause)
    assert server.embedding_requests == []  # neither embedded anything


async def test_shared_helper_for_answer_correctness(server: FakeOpenAI) -> None:
    ctx = ScoringContext(
        judge=None,
        embeddings=embeddings_for(server),
        statements=SharedStatements(Sample(), None),
    )
    assert await semantic_similarity_value(ctx, CLOSE, REFERENCE) == pytest.approx(0.96)
    assert await semantic_similarity_value(ctx, "", REFERENCE) == 0.0
    assert await semantic_similarity_value(ctx, CLOSE, "  ") == 0.0
    assert len(server.embedding_requests) == 1


def test_sync_api_without_a_judge(server: FakeOpenAI) -> None:
    metric = SemanticSimilarity(embeddings=embeddings_for(server))
    assert not metric.needs_llm and metric.needs_embeddings
    assert metric.score(response=CLOSE, reference=REFERENCE).value == pytest.approx(0.96)


def test_threshold_validation_and_params_round_trip() -> None:
    with pytest.raises(ValueError, match="threshold"):
        SemanticSimilarity(threshold=1.5)
    metric = create_metric("semantic_similarity", SemanticSimilarity(threshold=0.7).params())
    assert isinstance(metric, SemanticSimilarity) and metric.threshold == 0.7


async def test_a_text_the_local_model_cuts_is_named_in_the_evidence() -> None:
    # all-MiniLM-L6-v2 reads 256 tokens; on main a longer text was cut silently
    from rageval.embeddings import embedding_factory

    local = embedding_factory("local")
    long = "The capital of France is Paris. " * 60  # 7 tokens x 60, [CLS] and [SEP]
    tokenizer_count = local.truncated([long])[long]
    assert tokenizer_count == 2 + 7 * 60  # the capital of france is paris .
    metric = SemanticSimilarity(embeddings=local)
    result = await metric.single_turn_ascore(SingleTurnSample(response=long, reference=REFERENCE))
    assert result.status == "ok"
    assert result.evidence["truncated"] == {"response": tokenizer_count}
    assert "first 256 tokens only: response (422 tokens)" in (result.reason or "")
    short = await metric.single_turn_ascore(SingleTurnSample(response=CLOSE, reference=REFERENCE))
    assert "truncated" not in short.evidence
    # a text just within the limit is not reported
    fits = "word " * 254
    assert local.truncated([fits, "x" * 10]) == {}
