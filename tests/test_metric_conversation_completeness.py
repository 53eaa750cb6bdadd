"""conversation_completeness (issue 25, item 3; DeepEval's ConversationCompletenessMetric):
the user's intentions listed by the judge, each ruled satisfied or not; the share satisfied,
hand-computed from scripted replies."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import chat_count, judge_for, keyed, make_judge, prompts_with, route
from rageval.metrics import ConversationCompleteness
from rageval.metrics.evidence import JudgedItem
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, Reply

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Reset my password and update my billing address, please."},
    {"role": "assistant", "tool_calls": [{"name": "reset_password", "arguments": {}}]},
    {"role": "tool", "name": "reset_password", "content": "done"},
    {"role": "assistant", "content": "Your password is reset."},
    {"role": "user", "content": "When is my next invoice due?"},
    {"role": "assistant", "content": "On the 1st of next month."},
]
INTENTIONS = [
    "Reset the password.",
    "Update the billing address.",
    "Learn when the next invoice is due.",
]
# the billing address was never updated: 2 of 3 intentions satisfied
SATISFIED = (True, False, True)


def scripted(fake_openai: FakeOpenAI, intentions: list[str]) -> None:
    fake_openai.handler = route(
        (("conversation", "intentions"), keyed("i", "satisfied", *SATISFIED)),
        (("conversation",), Reply.json({"intentions": intentions})),
    )


async def test_the_share_of_intentions_satisfied(fake_openai: FakeOpenAI) -> None:
    scripted(fake_openai, INTENTIONS)
    result = await ConversationCompleteness(llm=judge_for(fake_openai)).single_turn_ascore(
        {"id": "c0", "turns": TURNS}
    )
    assert result.status == "ok" and result.value == 2 / 3
    assert result.reason == "2 of 3 user intention(s) satisfied"
    # typed evidence: the verdict table the report draws as faithfulness's
    assert result.evidence["kind"] == "verdicts" and result.evidence["items"] == "user intentions"
    assert result.evidence["verdicts"][1] == JudgedItem(
        id="i2", text="Update the billing address.", verdict=False, reason="because 2"
    )
    assert chat_count(fake_openai) == 2
    (listed,) = prompts_with(fake_openai, "conversation", "intentions")
    # the verdicts are given with the whole conversation, tool calls and results included
    assert "[calls reset_password({})]" in listed and "tool reset_password: done" in listed
    assert "[i3] Learn when the next invoice is due." in listed


async def test_no_intention_is_not_measured(fake_openai: FakeOpenAI) -> None:
    scripted(fake_openai, [" "])
    result = await ConversationCompleteness(llm=judge_for(fake_openai)).single_turn_ascore(
        {"id": "c0", "turns": TURNS}
    )
    assert result.status == "not_measured"
    assert result.cause == "the judge found no intention of the user to satisfy"
    assert chat_count(fake_openai) == 1


def test_a_run_averages_the_conversations(fake_openai: FakeOpenAI) -> None:
    scripted(fake_openai, INTENTIONS)
    rows = [{"id": "c0", "turns": TURNS}, {"id": "c1", "turns": TURNS[3:]}]
    result = evaluate(
        rows, ["conversation_completeness"], llm=make_judge(fake_openai), progress=False
    )
    assert result["conversation_completeness"] == [pytest.approx(2 / 3)] * 2
    assert result.summary()["conversation_completeness"].mean == pytest.approx(2 / 3)
