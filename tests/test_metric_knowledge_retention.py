"""knowledge_retention (issue 25, item 3; DeepEval's KnowledgeRetentionMetric): the facts
each user message states, then each later assistant turn ruled on every fact stated before
it; the share of judged turns that lose none, hand-computed from scripted replies."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import chat_count, judge_for, keyed, make_judge, prompts_with, route, user_text
from rageval.metrics import KnowledgeRetention
from rageval.metrics.evidence import JudgedItem, StatedFact
from rageval.metrics.knowledge_retention import knowledge_retention_score
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi, how can I help?"},
    {"role": "user", "content": "I'm Ana and I am vegetarian."},
    {"role": "assistant", "content": "Nice to meet you, Ana."},
    {"role": "user", "content": "Suggest a dinner for two."},
    {"role": "assistant", "content": "Try a beef steak."},
    {"role": "user", "content": "I'm also allergic to nuts."},
    {"role": "assistant", "content": "Then a lentil curry without nuts."},
]
FACTS = {
    "Hello!": [],
    "I'm Ana and I am vegetarian.": ["The user is called Ana.", "The user is vegetarian."],
    "Suggest a dinner for two.": [],
    "I'm also allergic to nuts.": ["The user is allergic to nuts."],
}
# turn 1 comes before any fact: not judged; turn 3 keeps both facts, turn 5 loses
# "vegetarian", turn 7 keeps all three: 2 of 3 judged turns keep the knowledge
RETAINED = {
    "Nice to meet you, Ana.": (True, True),
    "Try a beef steak.": (True, False),
    "Then a lentil curry without nuts.": (True, True, True),
}


def facts_of(req: RecordedRequest) -> Reply:
    message = user_text(req).split("<user_message>\n")[1].split("\n</user_message>")[0]
    return Reply.json({"about_user": bool(FACTS[message]), "facts": FACTS[message]})


def retained(req: RecordedRequest) -> Reply:
    reply = user_text(req).split("<assistant_reply>\n")[1].split("\n</assistant_reply>")[0]
    return keyed("f", "retained", *RETAINED[reply])


def scripted(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("facts", "assistant_reply"), retained), (("conversation", "user_message"), facts_of)
    )


def test_the_score_is_the_share_of_turns_that_keep_the_knowledge() -> None:
    assert knowledge_retention_score([True, False, True]) == 2 / 3
    assert knowledge_retention_score([]) is None


async def test_each_later_turn_is_ruled_on_the_facts_stated_before_it(
    fake_openai: FakeOpenAI,
) -> None:
    scripted(fake_openai)
    result = await KnowledgeRetention(llm=judge_for(fake_openai)).single_turn_ascore(
        {"id": "c0", "turns": TURNS}
    )
    assert result.status == "ok" and result.value == 2 / 3
    assert result.reason == "2 of 3 judged assistant turn(s) keep every earlier fact"
    assert result.evidence["kind"] == "retention"
    assert result.evidence["facts"] == [
        StatedFact(turn=2, fact="The user is called Ana."),
        StatedFact(turn=2, fact="The user is vegetarian."),
        StatedFact(turn=6, fact="The user is allergic to nuts."),
    ]
    turns = result.evidence["turns"]
    assert [(t["turn"], t["value"]) for t in turns] == [(3, 1.0), (5, 0.0), (7, 1.0)]
    assert turns[1]["reason"] == "loses 1 fact(s)"
    assert turns[1]["facts"]["verdicts"][1] == JudgedItem(
        id="f2", text="The user is vegetarian.", verdict=False, reason="because 2"
    )
    # 4 user messages + 3 judged turns
    assert chat_count(fake_openai) == 7
    # a message's facts are read with the conversation before it
    (nuts,) = [
        p for p in prompts_with(fake_openai, "conversation", "user_message") if "allergic" in p
    ]
    assert "Try a beef steak." in nuts.split("<user_message>")[0]
    # the last turn is ruled on the facts of both earlier messages, and only on those
    (last,) = [p for p in prompts_with(fake_openai, "facts") if "lentil" in p]
    assert "[f3] The user is allergic to nuts." in last and "[f4]" not in last
    (beef,) = [p for p in prompts_with(fake_openai, "facts") if "steak" in p]
    assert "allergic" not in beef and "Suggest a dinner for two." in beef


async def test_a_list_under_about_user_false_states_no_fact(fake_openai: FakeOpenAI) -> None:
    """A judge that decides a message tells nothing about the user but lists "facts" anyway
    (a small model's answer to the question, not the user's words) states none: here the
    greeting's and the request's lists are ignored, so turn 1 is still not judged and turns
    3, 5, 7 are ruled on the same three facts -- 2 of 3, as with empty lists."""
    invented = {
        "Hello!": ["Hello is a greeting."],
        "Suggest a dinner for two.": ["Dinner is a meal."],
    }

    def facts_or_invented(req: RecordedRequest) -> Reply:
        message = user_text(req).split("<user_message>\n")[1].split("\n</user_message>")[0]
        if message in invented:
            return Reply.json({"about_user": False, "facts": invented[message]})
        return facts_of(req)

    fake_openai.handler = route(
        (("facts", "assistant_reply"), retained),
        (("conversation", "user_message"), facts_or_invented),
    )
    result = await KnowledgeRetention(llm=judge_for(fake_openai)).single_turn_ascore(
        {"id": "c0", "turns": TURNS}
    )
    assert result.status == "ok" and result.value == 2 / 3
    assert [f["fact"] for f in result.evidence["facts"]] == [
        "The user is called Ana.",
        "The user is vegetarian.",
        "The user is allergic to nuts.",
    ]
    assert not [p for p in prompts_with(fake_openai, "facts") if "meal" in p or "greeting" in p]


async def test_no_fact_stated_is_not_measured(fake_openai: FakeOpenAI) -> None:
    scripted(fake_openai)
    result = await KnowledgeRetention(llm=judge_for(fake_openai)).single_turn_ascore(
        {"id": "c0", "turns": TURNS[:2]}
    )
    assert result.status == "not_measured"
    assert result.cause == "the user stated no fact before an assistant reply: nothing to retain"
    assert chat_count(fake_openai) == 1


def test_it_is_opt_in_and_runs_by_name(fake_openai: FakeOpenAI) -> None:
    scripted(fake_openai)
    rows = [{"id": "c0", "turns": TURNS}]
    result = evaluate(rows, ["knowledge_retention"], llm=make_judge(fake_openai), progress=False)
    assert result["knowledge_retention"] == [pytest.approx(2 / 3)]
    assert not KnowledgeRetention.in_default_run
