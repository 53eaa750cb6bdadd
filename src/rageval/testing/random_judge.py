"""Judges for testing a client's reply handling: one that answers at random within the schema,
and one that always answers garbage. Both are ``FakeOpenAI`` handlers::

    FakeOpenAI(RandomJudge(seed=7))          # or: python -m rageval.testing.serve --judge random
    FakeOpenAI(GarbageJudge())               #     python -m rageval.testing.serve --judge garbage

:class:`RandomJudge` behaves like a constrained-decoding server (OpenAI strict structured
outputs, vLLM guided decoding, Ollama ``format``, llama.cpp grammars) in front of a model that
pays no attention to the prose of the prompt: every reply is valid under the JSON schema of the
request and nothing more. A client whose rules are all in the schema scores every item with
it; a client that relies on the prompt's prose (a fixed number of list items, ids tied to the
items it numbered, the scale of a rating) does not.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections import Counter
from typing import Any

from rageval.testing._wire import text_of
from rageval.testing.records import RecordedRequest, Reply

__all__ = ["GarbageJudge", "RandomJudge", "random_instance"]

_SCHEMA_MARK = "JSON Schema:\n"
_WORDS = [
    "river",
    "city",
    "paper",
    "engine",
    "north",
    "blue",
    "quiet",
    "seven",
    "market",
    "garden",
    "signal",
    "winter",
    "orange",
    "stone",
    "letter",
    "bridge",
    "forest",
    "copper",
    "silver",
    "harbor",
    "lantern",
    "meadow",
    "rocket",
    "violin",
    "window",
    "yellow",
]
_STRING_FORMATS = {
    "date-time": "2001-02-03T04:05:06Z",
    "date": "2001-02-03",
    "time": "04:05:06",
    "email": "judge@example.com",
    "uri": "http://localhost/x",
    "uuid": "12345678-1234-5678-1234-567812345678",
}
# ragas 0.4.3's nv_* metrics send plain-text templates with no schema; their scales are in
# the prose, the one place this judge reads it (a schema-only judge has nothing else to go by)
_NV_SCALES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("Say 4, if User Answer", (0, 2, 4)),
    ("I will rate the User Answer", (0, 2, 4)),
    ("the Relevance score is", (0, 1, 2)),
    ("the Groundedness score is", (0, 1, 2)),
)
_GARBAGE = (
    "I think this answer looks reasonable overall.",
    "Sure! Here is my evaluation: mostly good, some parts unclear.",
    "The statement seems plausible but I cannot be certain.",
    "{'verdict': maybe, 'reason': unclear",
    "Rating: four out of five stars",
    "```\nnot json at all\n```",
)


def random_instance(schema: dict[str, Any], rng: random.Random) -> Any:
    """A random value valid under ``schema`` (the subset pydantic emits: objects, arrays,
    enums, ``$ref``, ``anyOf``/``oneOf``, bounds, string formats).

    Objects get every property (required or not), arrays a random length from 1 to 5 within
    any ``minItems``/``maxItems``, enums a random member, booleans either value, strings a few
    random words, numbers a random value within any bounds — without bounds, an integer from 0
    to 10 and a number from [0, 1) with three decimals.
    """
    return _Draw(schema, rng).value(schema, 0)


class _Draw:
    def __init__(self, root: dict[str, Any], rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def resolve(self, ref: str) -> dict[str, Any]:
        node: Any = self.root
        for part in ref.lstrip("#").split("/"):
            if part:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node if isinstance(node, dict) else {}

    def value(self, node: Any, depth: int) -> Any:
        if not isinstance(node, dict) or depth > 32:
            return None
        rng = self.rng
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return rng.choice(node["enum"])
        if "$ref" in node:
            return self.value({**self.resolve(node["$ref"]), **_without(node, "$ref")}, depth + 1)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and node[key]:
                return self.value(rng.choice(node[key]), depth + 1)
        if isinstance(node.get("allOf"), list) and node["allOf"]:
            merged: dict[str, Any] = {}
            for part in node["allOf"]:
                merged.update(self.resolve(part["$ref"]) if "$ref" in part else part)
            return self.value(merged, depth + 1)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind) if kind else None
        if kind is None and "properties" in node:
            kind = "object"
        if kind == "object":
            props = node.get("properties") or {}
            return {name: self.value(sub, depth + 1) for name, sub in props.items()}
        if kind == "array":
            return self.array(node, depth)
        if kind == "string":
            return self.string(node)
        if kind == "integer":
            return self.integer(node)
        if kind == "number":
            return self.number(node)
        if kind == "boolean":
            return rng.random() < 0.5
        return None

    def array(self, node: dict[str, Any], depth: int) -> list[Any]:
        prefix = node.get("prefixItems") or []
        low = max(1, int(node.get("minItems", 1)), len(prefix))
        high = max(low, min(int(node.get("maxItems", 5)), 5))
        count = self.rng.randint(low, high)
        items = node.get("items", {})
        return [
            self.value(prefix[i] if i < len(prefix) else items, depth + 1) for i in range(count)
        ]

    def string(self, node: dict[str, Any]) -> str:
        fmt = node.get("format")
        if fmt in _STRING_FORMATS:
            return _STRING_FORMATS[fmt]
        text = " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, 8)))
        low, high = int(node.get("minLength", 0)), node.get("maxLength")
        if len(text) < low:
            text += "x" * (low - len(text))
        return text if high is None else text[: int(high)]

    def integer(self, node: dict[str, Any]) -> int:
        low, high = _bounds(node)
        low_i = math.ceil(low) if low is not None else None
        high_i = math.floor(high) if high is not None else None
        if "exclusiveMinimum" in node and low_i is not None and low_i <= node["exclusiveMinimum"]:
            low_i += 1
        if "exclusiveMaximum" in node and high_i is not None and high_i >= node["exclusiveMaximum"]:
            high_i -= 1
        if low_i is None:
            low_i = 0 if high_i is None or high_i >= 0 else high_i - 10
        if high_i is None:
            high_i = low_i + 10
        return self.rng.randint(low_i, max(low_i, high_i))

    def number(self, node: dict[str, Any]) -> float:
        low, high = _bounds(node)
        if low is None and high is None:
            return round(self.rng.random(), 3)
        low = low if low is not None else high - 10  # type: ignore[operator]
        high = high if high is not None else low + 10
        return self.rng.uniform(low, high)


def _without(node: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != key}


def _bounds(node: dict[str, Any]) -> tuple[float | None, float | None]:
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    return low, high


def schema_in_prompt(req: RecordedRequest) -> dict[str, Any] | None:
    """The JSON schema written into the prompt (json mode): after ``JSON Schema:`` in any
    message, as rageval writes it in the system message and ragas 0.4 in its prompt."""
    for message in req.messages:
        text = text_of(message.get("content")) if isinstance(message, dict) else ""
        start = text.find(_SCHEMA_MARK)
        if start < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start + len(_SCHEMA_MARK))
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


class RandomJudge:
    """Answers every chat request with random replies valid under its JSON schema, ignoring
    the prompt's prose (see the module docstring and :func:`random_instance`).

    The schema is read from ``response_format``, from the forced tool, or — in json mode —
    from the prompt text (rageval's and ragas 0.4.3's formats). A request with ``n`` > 1 gets
    ``n`` different choices. The draw is seeded by ``seed`` and the request itself, so the
    same request gets the same reply (as from a model at temperature 0); an identical request
    repeated at a temperature above 0 gets a new draw each time. With ``honour_max_tokens`` a
    reply longer than the request's ``max_tokens`` (at 4 characters per token) is cut there
    and ends with ``finish_reason: "length"``, as a real model's would. A request with no
    schema is answered with a random scale value for ragas' ``nv_*`` templates, else with a
    few random words.
    """

    def __init__(self, seed: int = 0, *, honour_max_tokens: bool = True) -> None:
        self.seed = seed
        self.honour_max_tokens = honour_max_tokens
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        rng = self._rng(req)
        schema = req.schema if req.schema is not None else schema_in_prompt(req)
        n = req.body.get("n")
        count = n if isinstance(n, int) and n > 1 else 1
        replies = [self._one(req, schema, rng) for _ in range(count)]
        return replies[0] if count == 1 else Reply.choices(*replies)

    def _rng(self, req: RecordedRequest) -> random.Random:
        key = json.dumps([req.messages, req.schema, req.body.get("n")], sort_keys=True, default=str)
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        temperature = req.body.get("temperature")
        repeat = 0
        if isinstance(temperature, (int, float)) and temperature > 0:
            with self._lock:
                repeat = self._seen[digest]
                self._seen[digest] += 1
        return random.Random(f"{self.seed}:{digest}:{repeat}")

    def _one(
        self, req: RecordedRequest, schema: dict[str, Any] | None, rng: random.Random
    ) -> Reply:
        if schema is None:
            text = text_of(req.messages[-1].get("content")) if req.messages else ""
            scale = next((s for mark, s in _NV_SCALES if mark in text), None)
            return Reply.text(str(rng.choice(scale)) if scale else " ".join(rng.sample(_WORDS, 4)))
        value = random_instance(schema, rng)
        if req.schema is None:  # json mode: the object is the message's text
            return self._cut(req, Reply.text(json.dumps(value)))
        return self._cut(req, Reply.json(value))

    def _cut(self, req: RecordedRequest, reply: Reply) -> Reply:
        budget = req.body.get("max_tokens")
        if not self.honour_max_tokens or not isinstance(budget, int):
            return reply
        text = reply.value if isinstance(reply.value, str) else json.dumps(reply.value)
        if len(text) <= 4 * budget:
            return reply
        cut = text[: 4 * budget]
        if reply.kind == "json" and req.mode == "tools":
            return Reply.tool_arguments(cut, finish_reason="length")
        return Reply.text(cut, finish_reason="length")


class GarbageJudge:
    """Answers every chat request with prose that is not JSON (cycling through a few lines),
    in every structured-output mode: a model that ignores the format it was asked for."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        with self._lock:
            text = _GARBAGE[self._next % len(_GARBAGE)]
            self._next += 1
        return Reply.text(text)
