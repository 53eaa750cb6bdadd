"""topic_adherence (issue 25, item 3; ragas' TopicAdherenceScore): each user question is
ruled on topic or not and answered or refused; precision, recall and F1 of "answered"
against "on topic", hand-computed from scripted verdicts."""

from __future__ import annotations

import csv
import json
from typing import Any

import pytest

from helpers import chat_count, judge_for, keyed, make_judge, prompts_with, route
from rageval.metrics import TopicAdherence
from rageval.metrics.evidence import JudgedItem
from rageval.metrics.topic_adherence import topic_adherence_scores
from rageval.runner import evaluate
from rageval.samples import InvalidDataError, load_samples
from rageval.testing import FakeOpenAI

TOPICS = ["refunds and returns", "shipping"]
QUESTIONS = [
    "What is your refund policy?",
    "Who won the football match yesterday?",
    "Can I return shoes after 40 days?",
    "What is the capital of Peru?",
    "How long does shipping take?",
]
REPLIES = [
    "Refunds are accepted within 30 days.",
    "The home team won 2-1.",
    "Sorry, I cannot help with that.",
    "Lima.",
    "Three to five days.",
]
# on topic:  T F T F T
# answered:  T T F T T
# TP = 2 (q1, q5), FP = 2 (q2, q4), FN = 1 (q3), TN = 0
ON_TOPIC = (True, False, True, False, True)
ANSWERED = (True, True, False, True, True)
PRECISION, RECALL = 2 / 4, 2 / 3
F1 = 2 * PRECISION * RECALL / (PRECISION + RECALL)  # 4/7


def conversation(**extra: Any) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for question, reply in zip(QUESTIONS, REPLIES, strict=True):
        turns += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    return {"id": "c0", "turns": turns, "reference_topics": TOPICS, **extra}


def scripted(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("reference_topics", "user_messages"), keyed("q", "on_topic", *ON_TOPIC)),
        (("exchanges",), keyed("q", "refused", *(not a for a in ANSWERED))),
    )


def test_the_counts_and_the_vacuous_cases() -> None:
    scores = topic_adherence_scores(ON_TOPIC, ANSWERED)
    assert (scores.answered_on_topic, scores.answered_off_topic) == (2, 2)
    assert (scores.refused_on_topic, scores.refused_off_topic) == (1, 0)
    assert scores.precision == PRECISION and scores.recall == RECALL
    assert scores.f1 == pytest.approx(4 / 7)
    # every question off topic and refused: nothing answered off topic, nothing on topic missed
    refused_all = topic_adherence_scores([False, False], [False, False])
    assert (refused_all.precision, refused_all.recall, refused_all.f1) == (1.0, 1.0, 1.0)
    # every question on topic and refused: precision vacuous, recall 0
    shy = topic_adherence_scores([True], [False])
    assert (shy.precision, shy.recall, shy.f1) == (1.0, 0.0, 0.0)
    # every question off topic and answered
    chatty = topic_adherence_scores([False], [True])
    assert (chatty.precision, chatty.recall, chatty.f1) == (0.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("mode", "expected"), [("f1", F1), ("precision", PRECISION), ("recall", RECALL)]
)
async def test_the_value_is_the_score_the_mode_names(
    fake_openai: FakeOpenAI, mode: Any, expected: float
) -> None:
    scripted(fake_openai)
    metric = TopicAdherence(mode=mode, llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(conversation())
    assert result.status == "ok" and result.value == pytest.approx(expected)
    evidence = result.evidence
    assert evidence["mode"] == mode
    assert (evidence["precision"], evidence["recall"]) == (PRECISION, RECALL)
    assert evidence["f1"] == pytest.approx(F1)
    assert evidence["kind"] == "topics"
    assert evidence["turns"] == [0, 2, 4, 6, 8]
    assert evidence["on_topic"]["verdicts"][2] == JudgedItem(
        id="q3", text=QUESTIONS[2], verdict=True, reason="because 3"
    )
    # the refusal verdict turned round: answered is "not refused", with its reason
    assert [v.verdict for v in evidence["answered"]["verdicts"]] == list(ANSWERED)
    assert evidence["answered"]["verdicts"][2].reason == "because 3"
    assert chat_count(fake_openai) == 2
    (topics,) = prompts_with(fake_openai, "reference_topics", "user_messages")
    assert "- refunds and returns\n- shipping" in topics
    assert f"[q5] {QUESTIONS[4]}" in topics
    (exchanges,) = prompts_with(fake_openai, "exchanges")
    # each question is shown with the reply it got
    assert f"[q3] user: {QUESTIONS[2]} || assistant: {REPLIES[2]}" in exchanges


async def test_a_question_is_shown_on_one_line_with_the_tools_called_not_their_output(
    fake_openai: FakeOpenAI,
) -> None:
    """What the assistant said and the names of the tools it called; what a tool returned is
    left out (a small real judge misread a whole request when one item held a tool's output
    over several lines)."""
    fake_openai.handler = route(
        (("reference_topics", "user_messages"), keyed("q", "on_topic", True)),
        (("exchanges",), keyed("q", "refused", False)),
    )
    call = {"id": "c1", "name": "track_parcel", "arguments": {"id": "A1"}}
    row = {
        "id": "c0",
        "reference_topics": TOPICS,
        "turns": [
            {"role": "user", "content": "Where is my parcel A1?"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "track_parcel",
             "content": "status: in transit\nlast scan: Leeds depot"},
            {"role": "assistant", "content": "It is in transit,\nlast seen at the Leeds depot."},
        ],
    }  # fmt: skip
    result = await TopicAdherence(llm=judge_for(fake_openai)).single_turn_ascore(row)
    assert result.status == "ok" and result.value == 1.0
    assert result.evidence["answered"]["verdicts"][0].verdict is True
    (shown,) = prompts_with(fake_openai, "exchanges")
    assert (
        "[q1] user: Where is my parcel A1? || assistant: [calls track_parcel] It is in transit, "
        "last seen at the Leeds depot.\n" in shown
    )
    assert "status: in transit" not in shown


async def test_a_question_without_a_reply_is_not_judged(fake_openai: FakeOpenAI) -> None:
    # the conversation ends on a user message: four questions, not five
    fake_openai.handler = route(
        (("reference_topics", "user_messages"), keyed("q", "on_topic", *ON_TOPIC[:4])),
        (("exchanges",), keyed("q", "refused", *(not a for a in ANSWERED[:4]))),
    )
    row = conversation()
    row["turns"] = row["turns"][:-1]
    result = await TopicAdherence(llm=judge_for(fake_openai)).single_turn_ascore(row)
    # TP 1, FP 2, FN 1: P = 1/3, R = 1/2, F1 = 2/5
    assert result.value == pytest.approx(0.4)
    assert len(result.evidence["on_topic"]["verdicts"]) == 4


async def test_blank_topics_are_not_measured(fake_openai: FakeOpenAI) -> None:
    metric = TopicAdherence(llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(conversation(reference_topics=[" "]))
    assert result.status == "not_measured"
    assert result.cause == "no reference topic: nothing to adhere to"
    assert chat_count(fake_openai) == 0


def test_missing_or_malformed_topics_are_refused_before_any_request(
    fake_openai: FakeOpenAI,
) -> None:
    with pytest.raises(InvalidDataError) as caught:
        evaluate(
            [conversation(reference_topics=None)],
            ["topic_adherence"],
            llm=make_judge(fake_openai),
            progress=False,
        )
    assert "row 0, id 'c0', field 'reference_topics', metric 'topic_adherence'" in str(caught.value)
    for bad, message in (
        ("shipping", "field 'reference_topics': must be a list, got a single string"),
        (["a", 3], "field 'reference_topics[1]': Input should be a valid string"),
    ):
        (problem,) = load_samples([conversation(reference_topics=bad)]).problems
        assert str(problem).startswith(f"row 0, id 'c0', {message}")
    assert fake_openai.chat_requests == []


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode is one of 'precision', 'recall', 'f1'"):
        TopicAdherence(mode="accuracy")  # type: ignore[arg-type]


def test_a_run_reads_topics_from_a_csv_cell(fake_openai: FakeOpenAI, tmp_path: Any) -> None:
    scripted(fake_openai)
    row = conversation()
    path = tmp_path / "chats.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "turns", "reference_topics"])
        writer.writerow(["c0", json.dumps(row["turns"]), json.dumps(TOPICS)])
    result = evaluate(str(path), ["topic_adherence"], llm=make_judge(fake_openai), progress=False)
    assert result["topic_adherence"] == [pytest.approx(F1)]
