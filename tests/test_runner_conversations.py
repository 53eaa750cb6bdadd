"""Conversations through a run (issue 25): evaluate() with the tool-call metrics writes the run
directory, resumes, reports and gives one DataFrame row per conversation; a single-turn
metric asked of a conversation is refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from browser_helpers import Opened
from helpers import embedded_payload, make_judge
from rageval.log import FORMAT_VERSION, SampleLine
from rageval.results import load_run
from rageval.runner import evaluate
from rageval.samples import Conversation, InvalidDataError
from rageval.testing import FakeOpenAI

METRICS = ["tool_call_accuracy", "tool_call_f1"]


def conversations(n: int) -> list[dict[str, Any]]:
    """Conversation i calls weather(city=Paris, unit=C) and, for odd i, news(topic=i); the
    reference asks for weather(city=Paris, unit=C) alone, so even i are exact (accuracy 1,
    F1 1) and odd i have one call too many: units made 3 + 2 = 5, reference 3, shared 3,
    P = 3/5, R = 1, F1 = 2(3/5)/(3/5 + 1) = 3/4."""
    rows = []
    for i in range(n):
        calls = [{"name": "weather", "arguments": {"unit": "C", "city": "Paris"}}]
        if i % 2:
            calls.append({"name": "news", "arguments": {"topic": i}})
        rows.append(
            {
                "id": f"c{i}",
                "turns": [
                    {"role": "user", "content": f"Weather in Paris? ({i})"},
                    {"role": "assistant", "tool_calls": calls},
                    {"role": "tool", "content": "18C"},
                    {"role": "assistant", "content": "18C.", "retrieved_contexts": ["doc"]},
                ],
                "reference_tool_calls": [
                    {"name": "weather", "arguments": {"city": "Paris", "unit": "C"}}
                ],
            }
        )
    return rows


def test_evaluate_conversations_end_to_end(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = evaluate(conversations(6), METRICS, run_dir=run, progress=False)
    assert result["tool_call_accuracy"] == [1.0, 0.0] * 3
    assert result["tool_call_f1"] == pytest.approx([1.0, 0.75] * 3)
    # the run log keeps each conversation as it was read, and reads it back as one
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert all(line["format_version"] == FORMAT_VERSION for line in lines)
    line = next(line for line in lines if line["id"] == "c1")
    assert line["inputs"]["turns"][1]["tool_calls"][1] == {
        "name": "news",
        "arguments": {"topic": 1},
    }
    assert "user_input" not in line["inputs"]
    back = SampleLine.model_validate(line).sample()
    assert isinstance(back, Conversation) and back == result.samples[1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["tool_call_accuracy"]["mean"] == 0.5
    assert summary["metrics"]["tool_call_f1"]["mean"] == pytest.approx(0.875)
    # one DataFrame row per conversation, its turns as plain data
    frame = result.to_pandas()
    assert list(frame["id"]) == [f"c{i}" for i in range(6)]
    assert frame.loc[1, "turns"][1]["tool_calls"][1]["name"] == "news"
    assert "user_input" not in frame.columns
    # the report shows each conversation's turns and the metric's evidence
    payload = embedded_payload((run / "report.html").read_text())
    assert payload["samples"][1]["inputs"]["turns"][0]["content"] == "Weather in Paris? (1)"
    evidence = payload["samples"][1]["metrics"]["tool_call_accuracy"]["evidence"]
    assert evidence["unexpected"] == ['news({"topic": 1})']
    # and a run read back from disk is the same
    again = load_run(run)
    assert again["tool_call_f1"] == result["tool_call_f1"] and again.samples == result.samples


def test_a_conversation_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    data = conversations(6)
    first = evaluate(data, METRICS, run_dir=run, progress=False)
    log = run / "results.jsonl"
    kept = log.read_bytes().splitlines(keepends=True)[:3]
    log.write_bytes(b"".join(kept))
    (run / "summary.json").unlink()
    resumed = evaluate(None, run_dir=run, resume=True, progress=False)  # the data's copy
    assert resumed.complete
    assert resumed["tool_call_f1"] == first["tool_call_f1"]
    assert resumed["tool_call_accuracy"] == first["tool_call_accuracy"]
    after = log.read_bytes().splitlines(keepends=True)
    assert after[:3] == kept and len(after) == 6  # the finished lines kept, the rest added


def test_a_single_turn_metric_refuses_a_conversation_before_any_request(
    server: FakeOpenAI,
) -> None:
    data = [{"id": "s0", "user_input": "q", "response": "a", "retrieved_contexts": ["c"]}]
    data += conversations(2)
    with pytest.raises(InvalidDataError) as caught:
        evaluate(data, ["faithfulness"], llm=make_judge(server), progress=False)
    assert server.chat_requests == []
    text = str(caught.value)
    assert "row 1, id 'c0', field 'turns', metric 'faithfulness': this row is a conversation" in (
        text
    )
    assert "row 2, id 'c1'" in text and "row 0" not in text
    # skipped instead, with on_invalid="skip": the single-turn row is scored, the others not
    result = evaluate(
        data, ["faithfulness"], llm=make_judge(server), on_invalid="skip", progress=False
    )
    assert result.statuses("faithfulness") == ["ok", "skipped", "skipped"]
    skipped = result.sample(1).cells["faithfulness"]
    assert skipped.cause_kind == "missing_field"  # the single-turn fields the metric reads
    assert skipped.cause is not None and "this row is a conversation" in skipped.cause


def test_a_tool_call_metric_refuses_a_single_turn_row() -> None:
    data = [{"id": "s0", "user_input": "q", "response": "a"}, *conversations(1)]
    with pytest.raises(InvalidDataError, match=r"row 0, id 's0', field 'turns', metric "):
        evaluate(data, ["tool_call_f1"], progress=False)


def test_the_default_selection_of_conversation_data_is_the_conversation_metrics() -> None:
    result = evaluate(conversations(2), progress=False)
    # the judge metrics among them too, as for single-turn data: without a judge their cells
    # are skipped with the hint to configure one
    judged = [
        "agent_goal_accuracy_without_reference",
        "conversation_completeness",
        "turn_answer_relevancy",
        "turn_context_relevance",
        "turn_faithfulness",
    ]
    assert sorted(result.metrics) == sorted(["tool_call_accuracy", "tool_call_f1", *judged])
    assert all(result.statuses(m) == ["skipped", "skipped"] for m in judged)
    # the single-turn metrics are not "left out" of conversation data, nor the tool-call
    # metrics of single-turn data: each kind of row has its own default selection; a
    # conversation metric is, when no row has its fields (knowledge_retention is opt-in:
    # not chosen, so not left out)
    assert result.metrics_left_out == {
        "agent_goal_accuracy": "no row has 'reference_goal'",
        "topic_adherence": "no row has 'reference_topics'",
    }
    single = evaluate([{"response": "Paris.", "reference": "Paris"}], progress=False)
    assert "tool_call_f1" not in single.metrics_left_out and "token_f1" in single.metrics


def test_the_report_opens_a_conversation_as_a_thread(browser: Browser, tmp_path: Path) -> None:
    run = tmp_path / "run"
    evaluate(conversations(2), METRICS, run_dir=run, progress=False)
    view = Opened(browser, run / "report.html")
    page = view.page
    # the table shows each conversation by its first user message
    assert page.locator("#samples-table td.question").all_inner_texts() == [
        "Weather in Paris? (0)",
        "Weather in Paris? (1)",
    ]
    page.locator('#samples-table tr[data-i="1"] td[data-m="0"]').click()
    detail = page.locator("dialog#detail")
    turns = detail.locator("ol.turns > li")
    assert turns.count() == 4
    assert "Turn 1 · assistant" in (turns.nth(1).text_content() or "")
    assert 'news({"topic":1})' in (turns.nth(1).text_content() or "")
    assert "doc" in (turns.nth(3).text_content() or "")  # the contexts retrieved for the turn
    reference = detail.locator('[data-field="reference_tool_calls"]').inner_text()
    assert 'weather({"city":"Paris","unit":"C"})' in reference
    view.close()  # no console error
