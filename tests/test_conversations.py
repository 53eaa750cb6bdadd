"""Conversations as samples (issue 25.1): turns with roles, an assistant turn's contexts and
tool calls, references; loaded from JSONL, JSON and Python like Sample, and every problem named
by row, turn and field before any request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rageval.samples import (
    Conversation,
    InvalidDataError,
    Sample,
    ToolCall,
    Turn,
    load_samples,
    sample_of,
)


def conversation(**extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "turns": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "retrieved_contexts": ["Paris is in France."],
                "tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}, "id": "call_1"}],
            },
            {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "18C in Paris.", "reference": "It is 18C."},
        ],
        "reference_tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}],
        "reference_goal": "the user learns the weather in Paris",
        **extra,
    }


def test_a_row_with_turns_is_a_conversation_and_keeps_every_part() -> None:
    loaded = load_samples([conversation(team="x"), {"question": "q", "answer": "a"}])
    assert loaded.problems == []
    conv, single = loaded.samples
    assert isinstance(conv, Conversation) and type(single) is Sample
    assert [t.role for t in conv.turns] == ["user", "assistant", "tool", "assistant"]
    assert conv.turns[1].retrieved_contexts == ["Paris is in France."]
    assert conv.turns[3].reference == "It is 18C."
    assert conv.tool_calls == [ToolCall(name="weather", arguments={"city": "Paris"}, id="call_1")]
    assert conv.reference_goal == "the user learns the weather in Paris"
    assert conv.metadata == {"team": "x"}  # an unknown column goes to metadata, as for Sample
    assert {"turns", "reference_tool_calls", "reference_goal"} <= loaded.given_fields


def test_openai_messages_and_ragas_tool_calls_are_read() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
        ],
        "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}],
    }
    (conv,) = load_samples([row]).samples
    assert isinstance(conv, Conversation)
    assert conv.tool_calls[0].arguments == {"city": "Paris"}
    assert conv.reference_tool_calls == [ToolCall(name="weather", arguments={"city": "Paris"})]


@pytest.mark.parametrize("role", ["system", "developer"])
def test_openai_messages_with_the_assistant_s_instructions_are_read(role: str) -> None:
    # (issue 42: refused, "field 'role': Input should be 'user', 'assistant' or 'tool'")
    row = {
        "messages": [
            {"role": role, "content": "Answer in one sentence."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Sunny."},
        ]
    }
    loaded = load_samples([row])
    assert loaded.problems == []
    (conv,) = loaded.samples
    assert isinstance(conv, Conversation) and conv.opening == "Weather?"
    # the judge reads the instructions with the exchange
    assert conv.turn_sample(2).user_input == f"{role}: Answer in one sentence.\n\nuser: Weather?"
    with pytest.raises(
        ValueError, match=f"only an assistant turn carries tool_calls, not a {role}"
    ):
        Conversation.model_validate({"turns": [{"role": role, "content": "x", "tool_calls": []}]})


def test_jsonl_json_and_objects_load_the_same_conversation(tmp_path: Path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps(conversation()) + "\n")
    as_json = tmp_path / "c.json"
    as_json.write_text(json.dumps({"samples": [conversation()]}))
    from_object = Conversation.model_validate(conversation())
    loaded = [load_samples(d).samples[0] for d in (jsonl, as_json, [conversation()], [from_object])]
    assert all(s == from_object for s in loaded)
    # its JSON form reads back as the same conversation (the run log and the Ray engine)
    assert sample_of(json.loads(from_object.model_dump_json())) == from_object


def test_every_problem_names_row_turn_and_field_before_anything_runs() -> None:
    good = conversation()
    bad_arguments = conversation(id="c2")
    bad_arguments["turns"][1]["tool_calls"][0]["arguments"] = '{"city": "Par'
    wrong_role = conversation(id="c3")
    wrong_role["turns"][0] = {"role": "user", "content": "hi", "tool_calls": []}
    wrong_role["turns"][2]["role"] = "robot"
    mixed = conversation(id="c4", question="a single-turn field")
    bad_reference = conversation(
        id="c5", reference_tool_calls=[{"name": "weather", "arguments": [1]}]
    )
    loaded = load_samples([good, bad_arguments, wrong_role, mixed, bad_reference])
    text = [str(p) for p in loaded.problems]
    assert text[0].startswith(
        "row 1, id 'c2', turn 1, field 'tool_calls[0].arguments': arguments given as text are "
        "not valid JSON"
    ), text
    assert text[1].startswith(
        "row 2, id 'c3', turn 0, field 'tool_calls': only an assistant turn carries tool_calls"
    ), text
    assert text[2].startswith("row 2, id 'c3', turn 2, field 'role': Input should be"), text
    # the user's own column name, as for Sample
    assert text[3].startswith("row 3, id 'c4', field 'question': a conversation row"), text
    assert text[4].startswith(
        "row 4, id 'c5', field 'reference_tool_calls[0].arguments': arguments must be a JSON "
        "object, got a list"
    ), text
    assert len(text) == 5
    with pytest.raises(InvalidDataError, match=r"\(rows and turns counted from 0\)"):
        raise InvalidDataError(loaded.problems)
    # a bad field outside the turns leaves the conversation usable by what does not read it
    assert isinstance(loaded.samples[3], Conversation) and loaded.samples[3].user_input is None
    assert isinstance(loaded.samples[4], Conversation)
    assert loaded.samples[4].reference_tool_calls is None
    # a bad turn leaves no turns: the row cannot be scored at all
    assert loaded.samples[1] is None and loaded.samples[2] is None


def test_jsonl_problems_name_the_line_and_the_turn(tmp_path: Path) -> None:
    row = conversation()
    row["turns"][3]["oops"] = 1
    path = tmp_path / "c.jsonl"
    path.write_text("\n" + json.dumps(row) + "\n")
    (problem,) = load_samples(path).problems
    assert str(problem) == (
        "line 2, id 'c1', turn 3, field 'oops': unknown field of a turn (put it under the "
        "turn's metadata)"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"x": float("nan")}, "a non-finite number at ['x']"),
        ({"x": {1: "a"}}, "a key that is not text (1) at ['x']"),
        ({"x": [object()]}, "a object at ['x'][0], which JSON has no form for"),
    ],
)
def test_arguments_must_be_json(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ToolCall(name="f", arguments=arguments)


def test_a_conversation_needs_turns_and_a_tool_call_a_name() -> None:
    loaded = load_samples(
        [{"turns": []}, {"turns": [{"role": "assistant", "tool_calls": [{"name": " "}]}]}]
    )
    assert [str(p) for p in loaded.problems] == [
        "row 0, field 'turns': a conversation needs at least one turn (got [])",
        "row 1, turn 0, field 'tool_calls[0].name': a tool call needs the tool's name (got ' ')",
    ]


def test_list_fields_of_a_conversation_refuse_a_single_string_and_take_tuples() -> None:
    tuple_turns = conversation()
    tuple_turns["turns"] = tuple(tuple_turns["turns"])
    tuple_turns["turns"][1]["retrieved_contexts"] = ("Paris is sunny.",)
    loaded = load_samples(
        [
            {"turns": "user: hi"},
            {"turns": [{"role": "assistant", "content": "hi", "retrieved_contexts": "one"}]},
            tuple_turns,
        ]
    )
    text = [str(p) for p in loaded.problems]
    assert len(text) == 2, text
    assert text[0].startswith("row 0, field 'turns': must be a list, got a single")
    assert text[1].startswith(
        "row 1, turn 0, field 'retrieved_contexts': must be a list, got a single"
    ), text
    read = loaded.samples[2]
    assert isinstance(read, Conversation)
    assert read.turns[1].retrieved_contexts == ["Paris is sunny."]


def test_turns_serialise_without_absent_fields() -> None:
    turn = Turn(role="assistant", tool_calls=[ToolCall(name="f")])
    assert turn.model_dump() == {
        "role": "assistant",
        "tool_calls": [{"name": "f", "arguments": {}}],
    }


def test_csv_cells_hold_turns_as_json(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    turns = json.dumps([{"role": "user", "content": "hi"}])
    path.write_text(
        'id,turns,reference_tool_calls\nc1,"' + turns.replace('"', '""') + '",[]\nc2,[oops,[]\n'
    )
    loaded = load_samples(path)
    assert isinstance(loaded.samples[0], Conversation)
    assert loaded.samples[0].reference_tool_calls == []
    assert [str(p) for p in loaded.problems] == [
        "line 3, id 'c2', field 'turns': turns in a CSV cell must be a JSON list of objects "
        "(not JSON (Expecting value) nor a Python literal)"
    ]
