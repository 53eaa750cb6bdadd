"""The test server's judges for reply handling: RandomJudge (random replies valid under each
request's schema, ignoring the prompt's prose) and GarbageJudge (never JSON); and the server
options they rely on (n different choices, a context window, a server that ignores n,
Fault.garbage), through the real openai SDK."""

from __future__ import annotations

import json
import random
from typing import Annotated, Literal

import jsonschema
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import BaseModel, ConfigDict, Field

from helpers import server_in_child
from rageval.judge._modes import shape_of
from rageval.testing import (
    FAKE_API_KEY,
    FakeOpenAI,
    Fault,
    GarbageJudge,
    RandomJudge,
    Reply,
    random_instance,
)

ASK: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Give exactly 3 verdicts, one per id 1..3, ratings 0/2/4."}
]


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str
    ok: bool


class Reply_(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rating: Literal[0, 2, 4]
    s1: Item
    s2: Item
    items: list[Item]
    score: Annotated[float, Field(ge=0.25, le=0.5)]
    count: Annotated[int, Field(ge=3, le=4)]
    free: int
    note: str | None


def sdk(server: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=FAKE_API_KEY, max_retries=0)


def response_format(model: type[BaseModel]) -> ResponseFormatJSONSchema:
    schema = shape_of(model).schema
    return {"type": "json_schema", "json_schema": {"name": "R", "schema": schema}}


def test_random_instances_are_valid_and_vary() -> None:
    schema = Reply_.model_json_schema()
    rng = random.Random(1)
    drawn = [random_instance(schema, rng) for _ in range(200)]
    for value in drawn:
        jsonschema.validate(value, schema)
        Reply_.model_validate(value)
        assert len(value["items"]) >= 1  # arrays are never empty
    assert {v["rating"] for v in drawn} == {0, 2, 4}
    assert {v["s1"]["ok"] for v in drawn} == {True, False}
    assert {len(v["items"]) for v in drawn} == {1, 2, 3, 4, 5}
    assert {v["count"] for v in drawn} == {3, 4}
    assert {v["note"] is None for v in drawn} == {True, False}
    assert min(v["free"] for v in drawn) >= 0 and max(v["free"] for v in drawn) <= 10


@pytest.mark.parametrize("mode", ["json_schema", "tools", "json"])
def test_random_judge_answers_within_the_schema_in_every_mode(mode: str) -> None:
    schema = shape_of(Reply_).schema
    with FakeOpenAI(RandomJudge(seed=4)) as server, sdk(server) as client:
        chat = client.chat.completions
        if mode == "json_schema":
            completion = chat.create(
                model="m", messages=ASK, response_format=response_format(Reply_)
            )
        elif mode == "tools":
            completion = chat.create(
                model="m",
                messages=ASK,
                tools=[{"type": "function", "function": {"name": "r", "parameters": schema}}],
                tool_choice={"type": "function", "function": {"name": "r"}},
            )
        else:  # the schema in the prompt, as rageval's json mode and ragas write it
            in_prompt = f"JSON Schema:\n{json.dumps(schema)}"
            completion = chat.create(
                model="m", messages=[{"role": "system", "content": in_prompt}, *ASK]
            )
    message = completion.choices[0].message
    text = message.content
    if mode == "tools":
        assert message.tool_calls is not None
        (call,) = message.tool_calls
        assert call.type == "function"
        text = call.function.arguments
    assert text is not None
    Reply_.model_validate_json(text)


def test_same_request_same_reply_and_n_different_choices() -> None:
    with FakeOpenAI(RandomJudge(seed=9)) as server, sdk(server) as client:
        fmt = response_format(Reply_)
        one = client.chat.completions.create(model="m", messages=ASK, response_format=fmt)
        again = client.chat.completions.create(model="m", messages=ASK, response_format=fmt)
        assert one.choices[0].message.content == again.choices[0].message.content  # seeded
        three = client.chat.completions.create(
            model="m", messages=ASK, response_format=fmt, n=3, temperature=0.3
        )
        texts = [c.message.content for c in three.choices]
        assert len(set(texts)) == 3
        # at a temperature above 0 an identical request is a new draw
        repeat = client.chat.completions.create(
            model="m", messages=ASK, response_format=fmt, n=3, temperature=0.3
        )
        assert [c.message.content for c in repeat.choices] != texts
    with FakeOpenAI(RandomJudge(seed=10)) as server, sdk(server) as client:
        other = client.chat.completions.create(model="m", messages=ASK, response_format=fmt)
        assert other.choices[0].message.content != one.choices[0].message.content


def test_random_judge_cuts_a_reply_longer_than_max_tokens() -> None:
    with FakeOpenAI(RandomJudge()) as server, sdk(server) as client:
        completion = client.chat.completions.create(
            model="m", messages=ASK, response_format=response_format(Reply_), max_tokens=5
        )
    choice = completion.choices[0]
    assert choice.finish_reason == "length" and len(choice.message.content or "") == 20


def test_random_judge_without_a_schema_rates_ragas_plain_templates() -> None:
    text = "...\n### Context: c\nAnalyzing Context and Question, the Relevance score is "
    with FakeOpenAI(RandomJudge(seed=2)) as server, sdk(server) as client:
        ratings = {
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"{text}{i}"}]
            )
            .choices[0]
            .message.content
            for i in range(30)
        }
    assert ratings == {"0", "1", "2"}


def test_garbage_judge_never_answers_json() -> None:
    with FakeOpenAI(GarbageJudge()) as server, sdk(server) as client:
        for _ in range(8):
            completion = client.chat.completions.create(
                model="m", messages=ASK, response_format=response_format(Reply_)
            )
            text = completion.choices[0].message.content or ""
            with pytest.raises(ValueError):
                Reply_.model_validate_json(text)


def test_fault_garbage_and_reply_choices_and_ignore_n() -> None:
    with FakeOpenAI() as server, sdk(server) as client:
        server.script(Fault.garbage("not json"))
        completion = client.chat.completions.create(model="m", messages=ASK)
        assert completion.choices[0].message.content == "not json"
        server.script(Reply.choices(Reply.text("a"), Reply.text("bb"), Reply.text("c")))
        completion = client.chat.completions.create(model="m", messages=ASK, n=2)
        assert [c.message.content for c in completion.choices] == ["a", "bb"]
        assert completion.usage is not None and completion.usage.completion_tokens == 2
    with FakeOpenAI(ignore_n=True) as server, sdk(server) as client:
        completion = client.chat.completions.create(model="m", messages=ASK, n=3)
        assert len(completion.choices) == 1


def test_context_window_answers_400_context_length_exceeded() -> None:
    with FakeOpenAI(context_window=100) as server, sdk(server) as client:
        client.chat.completions.create(model="m", messages=ASK, max_tokens=50)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="m", messages=ASK, max_tokens=90)
    assert info.value.code == "context_length_exceeded"
    assert "maximum context length is 100 tokens" in str(info.value)


@pytest.mark.parametrize("judge", ["random", "garbage"])
def test_the_judges_from_the_command_line(judge: str) -> None:
    with (
        server_in_child("--judge", judge, "--judge-seed", "3") as base_url,
        openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client,
    ):
        completion = client.chat.completions.create(
            model="m", messages=ASK, response_format=response_format(Reply_)
        )
    text = completion.choices[0].message.content or ""
    if judge == "random":
        Reply_.model_validate_json(text)
    else:
        with pytest.raises(ValueError):
            Reply_.model_validate_json(text)


def test_a_fault_rate_alone_draws_from_every_kind_of_fault() -> None:
    """``--fault-rate`` without ``--faults`` injects the standard mix (it was a traceback)."""
    replies = []
    with (
        server_in_child("--judge", "random", "--fault-rate", "1.0", "--fault-seed", "1") as url,
        openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=10) as client,
    ):
        for _ in range(6):
            try:
                completion = client.chat.completions.create(
                    model="m", messages=ASK, response_format=response_format(Reply_)
                )
            except openai.APIError as e:
                replies.append(type(e).__name__)
                continue
            choice = completion.choices[0]
            text = choice.message.content or ""
            try:
                Reply_.model_validate_json(text)
                replies.append("valid" if choice.finish_reason == "stop" else "truncated")
            except ValueError:
                replies.append("invalid")
    assert "valid" not in replies, replies  # every request met a fault
    assert len(set(replies)) >= 2, replies  # drawn from more than one kind
