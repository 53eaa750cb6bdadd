"""Structured-output helpers: strict-schema transform and JSON extraction."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from rageval._client._transport import encode_body
from rageval.judge._modes import (
    MODES,
    Mode,
    _untitled,
    build_request,
    error_text,
    extra_body,
    parse_json_object,
    shape_of,
    strict_schema,
)


class Item(BaseModel):
    id: int = Field(description="item id")
    kind: Literal["a", "b"] = "a"


class Reply(BaseModel):
    items: list[Item]
    best: Item = Field(description="the best one")
    note: str | None = None


class Loose(BaseModel):
    scores: dict[str, float]


def test_strict_schema_requires_everything_and_forbids_extras() -> None:
    strict = strict_schema(Reply.model_json_schema())
    assert strict is not None
    assert strict["required"] == ["items", "best", "note"]
    assert strict["additionalProperties"] is False
    item = strict["$defs"]["Item"]
    assert item["required"] == ["id", "kind"] and item["additionalProperties"] is False
    assert "default" not in item["properties"]["kind"]
    best = strict["properties"]["best"]  # $ref with a description: inlined
    assert "$ref" not in best and best["description"] == "the best one"
    assert best["additionalProperties"] is False
    assert Reply.model_json_schema()["required"] == ["items", "best"]  # original untouched


def test_schemas_strict_mode_cannot_express_are_sent_loose() -> None:
    assert strict_schema(Loose.model_json_schema()) is None
    shape = shape_of(Loose)
    _, extra = build_request("json_schema", [{"role": "user", "content": "x"}], shape)
    fmt = extra["response_format"].value["json_schema"]
    assert fmt["strict"] is False and fmt["schema"] == _untitled(Loose.model_json_schema())


def test_schemas_are_sent_without_pydantic_titles() -> None:
    schema = shape_of(Item).schema
    assert "title" not in schema and all("title" not in p for p in schema["properties"].values())
    assert set(schema["properties"]) == set(Item.model_fields)


def test_json_mode_adds_a_system_message_when_there_is_none() -> None:
    messages, extra = build_request("json", [{"role": "user", "content": "x"}], shape_of(Item))
    assert extra == {}
    assert messages[0]["role"] == "system" and '"id"' in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "x"}


@pytest.mark.parametrize("mode", MODES)
def test_extra_body_is_the_json_of_the_extra_arguments_made_once(mode: Mode) -> None:
    shape = shape_of(Reply)
    _, extra = build_request(mode, [{"role": "user", "content": "x"}], shape)
    body = extra_body(mode, shape)
    assert body == (encode_body(extra) if extra else b"")
    assert (body == b"") == (mode == "json")  # json mode: the schema is in the messages
    assert extra_body(mode, shape) is body


@pytest.mark.parametrize(
    "text",
    [
        '{"id": 1}',
        '  ```json\n{"id": 1}\n```  ',
        'Sure.\n```\n{"id": 1}\n```',
        'The answer is {"id": 1}. Thanks {not json}',
        '<think>maybe {"id": 2}? no.</think>{"id": 1}',
        'noise { broken {"id": 1}',
    ],
)
def test_parse_json_object_finds_the_object(text: str) -> None:
    assert parse_json_object(text) == {"id": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "empty"), ("no braces", "no valid JSON object"), ("[1, 2]", "got a JSON list")],
)
def test_parse_json_object_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_json_object(text)


def test_error_text_lists_validation_errors() -> None:
    with pytest.raises(ValidationError) as info:
        Reply.model_validate({"items": [{"id": "x"}], "best": {"id": 1, "kind": "c"}})
    text = error_text(info.value)
    assert "items.0.id" in text and "best.kind" in text
    assert error_text(ValueError("x" * 5000), limit=100).endswith("...")
