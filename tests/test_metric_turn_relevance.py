"""turn_answer_relevancy and turn_context_relevance (issue 25, item 3): each assistant turn
scored as the single-turn metric scores its sample, the conversation's value the mean over
scored turns; hand-computed with scripted replies and chosen 2-d embeddings."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import chat_count, embeddings_for, judge_for, user_text
from rageval.metrics import TurnAnswerRelevancy, TurnContextRelevance
from rageval.metrics.evidence import PerTurnEvidence, QuestionsEvidence, TurnNotScored
from rageval.samples import Conversation, transcript
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Who wrote Dune?"},
    {
        "role": "assistant",
        "content": "Frank Herbert wrote Dune.",
        "retrieved_contexts": ["Dune is a novel by Frank Herbert."],
    },
    {"role": "user", "content": "When?"},
    {
        "role": "assistant",
        "tool_calls": [{"name": "search", "arguments": {"q": "Dune year"}}],
        "retrieved_contexts": ["Dune appeared in 1965."],
    },
    {"role": "tool", "name": "search", "content": "1965"},
    {"role": "assistant", "content": "It came out in 1965."},
]
CONVERSATION = {"id": "c0", "turns": TURNS}
HISTORY_5 = transcript(Conversation.model_validate(CONVERSATION).turns[:5])
QA, QB = "Who is the author of Dune?", "What did Frank Herbert do?"
QC, QD = "What year did Dune come out?", "When was it published?"
VECTORS = {
    "Who wrote Dune?": (1.0, 0.0),
    QA: (1.0, 0.0),
    QB: (0.0, 1.0),
    HISTORY_5: (0.0, 1.0),
    QC: (3.0, 4.0),
    QD: (0.0, 1.0),
}


def generated(req: RecordedRequest) -> Reply:
    """Turn 1's response → QA, QB; turn 5's → QC, QD (the n choices of one request)."""
    answer = user_text(req)
    first = "Frank Herbert" in answer
    return Reply.choices(
        *(Reply.json({"question": q, "noncommittal": 0}) for q in ((QA, QB) if first else (QC, QD)))
    )


async def test_turn_answer_relevancy_by_hand(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = generated
    fake_openai.embedder = lambda text: VECTORS[text]
    metric = TurnAnswerRelevancy(
        llm=judge_for(fake_openai), embeddings=embeddings_for(fake_openai), strictness=2
    )
    result = await metric.single_turn_ascore(CONVERSATION)
    # turn 1 (its question the user's message alone, (1, 0)):
    #   cos(QA) = 1, cos(QB) = 0 → (1 + 0) / 2 = 0.5
    # turn 5 (its question the conversation so far, (0, 1)):
    #   cos(QC = (3, 4)) = 4/5 = 0.8, cos(QD) = 1 → (0.8 + 1) / 2 = 0.9
    # conversation: (0.5 + 0.9) / 2 = 0.7; turn 3 only calls a tool: not scored
    assert result.status == "ok", result.cause
    assert result.value == pytest.approx(0.7)
    assert [(t["turn"], t["value"]) for t in result.evidence["turns"]] == [
        (1, 0.5),
        (5, pytest.approx(0.9)),
    ]
    assert isinstance(result.evidence, PerTurnEvidence)
    turn_5 = result.evidence.turns[1].evidence
    assert isinstance(turn_5, QuestionsEvidence)
    assert [q.question for q in turn_5.questions] == [QC, QD]
    assert result.evidence.not_scored == [
        TurnNotScored(turn=3, why="no response text (the turn only calls tools)")
    ]
    assert chat_count(fake_openai) == 2 and len(fake_openai.embedding_requests) == 2


def rated(req: RecordedRequest) -> Reply:
    """Turn 1's contexts: 2 and 2; turn 3's: 1 from the first template, 0 from the second
    (the templates show the same data and differ in their instructions)."""
    text = user_text(req)
    if "Frank Herbert." in text:
        return Reply.json({"rating": 2})
    return Reply.json({"rating": 1 if "How relevant are the retrieved contexts" in text else 0})


async def test_turn_context_relevance_by_hand(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = rated
    result = await TurnContextRelevance(llm=judge_for(fake_openai)).single_turn_ascore(CONVERSATION)
    # turn 1: (2/2 + 2/2) / 2 = 1.0; turn 3 (it retrieved, then called a tool): (1/2 + 0/2) / 2
    # = 0.25; conversation: (1.0 + 0.25) / 2 = 0.625; turn 5 retrieved nothing: not scored
    assert result.status == "ok", result.cause
    assert result.value == pytest.approx(0.625)
    assert [(t["turn"], t["value"]) for t in result.evidence["turns"]] == [(1, 1.0), (3, 0.25)]
    assert result.evidence["not_scored"] == [
        TurnNotScored(turn=5, why="no retrieved_contexts (the turn retrieved nothing)")
    ]
    assert chat_count(fake_openai) == 4
    # turn 3's contexts are rated against the conversation so far
    history = transcript(Conversation.model_validate(CONVERSATION).turns[:3])
    assert any(
        history in user_text(r) and "1965" in user_text(r) for r in fake_openai.chat_requests
    )
