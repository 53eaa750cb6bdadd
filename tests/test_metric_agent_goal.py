"""agent_goal_accuracy (with a reference goal) and agent_goal_accuracy_without_reference
(issue 25, item 3): the judge states the conversation's end state (and the user's goal), then
rules whether the end state achieves the desired outcome; scripted replies."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import chat_count, judge_for, make_judge, prompts_with, route
from rageval.metrics import AgentGoalAccuracy, AgentGoalAccuracyWithoutReference
from rageval.metrics.agent_goal import agent_goal_score
from rageval.runner import evaluate
from rageval.samples import InvalidDataError
from rageval.testing import FakeOpenAI, Reply

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Book me a table for two tonight at Luigi's."},
    {
        "role": "assistant",
        "tool_calls": [{"name": "book", "arguments": {"restaurant": "Luigi's", "people": 2}}],
    },
    {"role": "tool", "name": "book", "content": "booked 19:00"},
    {"role": "assistant", "content": "Done: a table for two at Luigi's at 19:00."},
]
GOAL = "A table for two at Luigi's tonight is booked."
INFERRED = "Reserve a table for two at Luigi's this evening."
END = "The assistant booked a table for two at Luigi's at 19:00."
OUTCOME = Reply.json({"user_goal": INFERRED, "end_state": END})


def conversation(**extra: Any) -> dict[str, Any]:
    return {"id": "c0", "turns": TURNS, **extra}


def verdict(achieved: bool) -> Reply:
    return Reply.json({"achieved": achieved, "reason": "compared"})


def test_the_score_is_the_verdict() -> None:
    assert agent_goal_score(True) == 1.0
    assert agent_goal_score(False) == 0.0


async def test_with_a_reference_the_end_state_is_compared_with_it(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("conversation",), OUTCOME), (("desired_outcome", "end_state"), verdict(True))
    )
    result = await AgentGoalAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(
        conversation(reference_goal=GOAL)
    )
    # achieved → 1
    assert result.status == "ok" and result.value == 1.0
    assert result.evidence["desired_outcome"] == GOAL
    assert result.evidence["end_state"] == END and result.evidence["user_goal"] == INFERRED
    assert result.reason == "goal achieved: compared"
    assert chat_count(fake_openai) == 2
    (read,) = prompts_with(fake_openai, "conversation")
    # the judge reads every turn, the tool call and what the tool returned
    assert TURNS[0]["content"] in read and "[calls book(" in read
    assert "tool book: booked 19:00" in read
    (ruled,) = prompts_with(fake_openai, "desired_outcome", "end_state")
    assert GOAL in ruled and END in ruled and INFERRED not in ruled


async def test_without_a_reference_the_inferred_goal_is_the_desired_outcome(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = route(
        (("conversation",), OUTCOME), (("desired_outcome", "end_state"), verdict(False))
    )
    metric = AgentGoalAccuracyWithoutReference(llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(conversation())
    # not achieved → 0
    assert result.status == "ok" and result.value == 0.0
    assert result.evidence["desired_outcome"] == INFERRED
    (ruled,) = prompts_with(fake_openai, "desired_outcome", "end_state")
    assert INFERRED in ruled and END in ruled


def test_a_run_averages_the_verdicts(fake_openai: FakeOpenAI) -> None:
    # c0's end state achieves its goal, c1's does not: mean (1 + 0) / 2 = 0.5
    def handler(req: Any) -> Reply:
        text = req.messages[-1]["content"]
        if "<desired_outcome>" in text:
            return verdict("Luigi's" in text.split("<end_state>")[0])
        return OUTCOME

    fake_openai.handler = handler
    data = [conversation(reference_goal=GOAL), {**conversation(), "id": "c1"}]
    data[1]["reference_goal"] = "A taxi is ordered."
    result = evaluate(data, ["agent_goal_accuracy"], llm=make_judge(fake_openai), progress=False)
    assert result["agent_goal_accuracy"] == [1.0, 0.0]
    assert result.summary()["agent_goal_accuracy"].mean == 0.5


def test_a_missing_reference_goal_is_refused_before_any_request(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(InvalidDataError) as caught:
        evaluate(
            [conversation()], ["agent_goal_accuracy"], llm=make_judge(fake_openai), progress=False
        )
    assert "row 0, id 'c0', field 'reference_goal', metric 'agent_goal_accuracy'" in str(
        caught.value
    )
    assert fake_openai.chat_requests == []


async def test_a_blank_reference_goal_is_not_measured(fake_openai: FakeOpenAI) -> None:
    result = await AgentGoalAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(
        conversation(reference_goal="  ")
    )
    assert result.status == "not_measured"
    assert result.cause == "the reference goal is empty: nothing to reach"
    assert chat_count(fake_openai) == 0


def test_a_silent_assistant_turn_is_refused_naming_the_turn(fake_openai: FakeOpenAI) -> None:
    silent = {"id": "c0", "turns": [*TURNS, {"role": "assistant", "content": None}]}
    with pytest.raises(InvalidDataError) as caught:
        evaluate(
            [silent],
            ["agent_goal_accuracy_without_reference"],
            llm=make_judge(fake_openai),
            progress=False,
        )
    assert "row 0, id 'c0', turn 4, field 'content'" in str(caught.value)
    assert fake_openai.chat_requests == []
