"""Minimal valid instances of JSON schemas, as pydantic v2 emits them.

Used by the fake server's default handler so that a structured request gets a reply that
validates against the schema the client sent, without anyone writing that reply by hand.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["schema_instance", "strict_schema_problem", "truncated_reply"]

_STRING_FORMATS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "email": "a@example.com",
    "uri": "http://localhost/",
    "url": "http://localhost/",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


class _Cycle(Exception):
    """A required reference leads back to itself; a union branch must break the cycle."""


def schema_instance(schema: dict[str, Any]) -> Any:
    """Return a small value that validates against ``schema``.

    Objects get only their required properties, arrays ``minItems`` items, numbers the lowest
    allowed value, strings the shortest allowed text (``pattern`` is not honoured). Unions take
    the first branch that can be built, so ``Optional[X]`` yields an ``X``, not ``None``.
    ``$ref`` is resolved against the root schema (``#/$defs/...`` or any JSON pointer).
    """
    return _Builder(schema).build(schema, 0)


class _Builder:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.expanding: list[str] = []

    def resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = self.root
        for part in ref[1:].split("/"):
            if part:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        if not isinstance(node, dict):
            raise ValueError(f"$ref {ref!r} does not point at a schema")
        return node

    def build(self, schema: dict[str, Any] | bool, index: int) -> Any:
        # `index` tells sibling array items apart so that uniqueItems can be met.
        if isinstance(schema, bool):
            return None
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            values = schema["enum"]
            return values[index % len(values)]
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in self.expanding:
                raise _Cycle(ref)
            self.expanding.append(ref)
            try:
                return self.build(self.resolve(ref), index)
            finally:
                self.expanding.pop()
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.first_buildable(schema[key], index)
        if "allOf" in schema:
            parts = [self.build(sub, index) for sub in schema["allOf"]]
            if all(isinstance(p, dict) for p in parts):
                merged: dict[str, Any] = {}
                for part in parts:
                    merged.update(part)
                return merged
            return parts[0]
        kind = schema.get("type")
        if isinstance(kind, list):
            options = [k for k in kind if k != "null"] or ["null"]
            kind = options[0]
        if kind is None:
            kind = "object" if "properties" in schema else None
        if kind == "object":
            props = schema.get("properties", {})
            return {name: self.build(props.get(name, {}), 0) for name in schema.get("required", [])}
        if kind == "array":
            return self.array(schema, index)
        if kind == "string":
            return self.string(schema, index)
        if kind in ("number", "integer"):
            return self.number(schema, kind == "integer", index)
        if kind == "boolean":
            return index % 2 == 1
        return None

    def first_buildable(self, options: list[dict[str, Any]], index: int) -> Any:
        non_null = [o for o in options if o.get("type") != "null"]
        for option in non_null:
            try:
                return self.build(option, index)
            except _Cycle:
                continue
        if len(non_null) < len(options):
            return None
        raise _Cycle("no branch of the union can be built without recursion")

    def array(self, schema: dict[str, Any], index: int) -> list[Any]:
        prefix = schema.get("prefixItems", [])
        count = max(int(schema.get("minItems", 0)), len(prefix))
        items = schema.get("items", {})
        out = []
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else items
            out.append(self.build(sub, i))
        return out

    def string(self, schema: dict[str, Any], index: int) -> str:
        fmt = schema.get("format")
        if fmt in _STRING_FORMATS:
            return _STRING_FORMATS[fmt]
        min_len = int(schema.get("minLength", 0))
        text = "" if index == 0 else str(index)
        if len(text) < min_len:
            text = text + "x" * (min_len - len(text))
        return text

    def number(self, schema: dict[str, Any], integer: bool, index: int) -> int | float:
        low, high = schema.get("minimum"), schema.get("maximum")
        low_open, high_open = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if integer:
            if low_open is not None:
                low = (
                    math.floor(low_open) + 1 if low is None else max(low, math.floor(low_open) + 1)
                )
            if high_open is not None:
                high = (
                    math.ceil(high_open) - 1
                    if high is None
                    else min(high, math.ceil(high_open) - 1)
                )
            low_open = high_open = None
        value = _pick(low, high, low_open, high_open, 1 if integer else 0.5, index)
        multiple = schema.get("multipleOf")
        if multiple:
            value = math.ceil(value / multiple) * multiple
        return int(value) if integer else float(value)


def _pick(
    low: float | None,
    high: float | None,
    low_open: float | None,
    high_open: float | None,
    step: float,
    index: int,
) -> float:
    """The lowest allowed value (0 when unbounded below), moved up by ``index`` steps if allowed."""
    floor = low if low is not None else low_open
    ceiling = high if high is not None else high_open

    def allowed(v: float) -> bool:
        return (
            (low is None or v >= low)
            and (low_open is None or v > low_open)
            and (high is None or v <= high)
            and (high_open is None or v < high_open)
        )

    if floor is None:
        if allowed(0.0):
            base = 0.0
        else:
            base = high if high is not None and allowed(high) else (ceiling or 0.0) - step
    elif allowed(floor):
        base = floor
    elif ceiling is not None:
        base = (floor + ceiling) / 2
    else:
        base = floor + step
    moved = base + index * step
    return moved if allowed(moved) else base


def strict_schema_problem(schema: dict[str, Any]) -> str | None:
    """Why OpenAI would reject ``schema`` for ``strict: true`` structured output, or None.

    Checks the structural rules the real API enforces: the root is an object, and every object
    lists all of its properties in ``required`` and sets ``additionalProperties: false``
    (pydantic's ``model_json_schema()`` does neither by itself).
    """
    root = schema
    if "$ref" in schema:
        root = _Builder(schema).resolve(schema["$ref"])
    if root.get("type") != "object":
        return "the root schema must be an object, not anyOf or another type"
    return _strict_walk(schema, "root")


def _strict_walk(node: Any, where: str) -> str | None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            problem = _strict_walk(item, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if not isinstance(node, dict):
        return None
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return f"at {where}: 'additionalProperties' is required to be supplied and to be false"
        missing = sorted(set(node.get("properties", {})) - set(node.get("required", [])))
        if missing:
            return f"at {where}: 'required' must list every property; missing {missing}"
    for key in ("properties", "$defs", "definitions"):
        for name, sub in node.get(key, {}).items():
            problem = _strict_walk(sub, f"{where}.{key}.{name}")
            if problem:
                return problem
    for key in ("items", "prefixItems", "anyOf", "oneOf", "allOf"):
        if key in node:
            problem = _strict_walk(node[key], f"{where}.{key}")
            if problem:
                return problem
    return None


def truncated_reply(schema: dict[str, Any] | None) -> str:
    """The first half of a valid reply to `schema` (a plain JSON object without one): what a
    reply cut off by its token budget looks like."""
    full = json.dumps(schema_instance(schema) if schema else {"answer": "ok"})
    return full[: max(1, len(full) // 2)]
