"""Structured-output modes: how a JSON reply is requested, read back and validated.

Three modes, tried in this order when a judge is in ``mode="auto"``:

``json_schema``
    ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, llama.cpp, LM Studio...).
``tools``
    One function whose parameters are the schema, forced with ``tool_choice``.
``json``
    The schema appended to the system message; the first JSON object of the reply is used, even
    inside a fenced code block or after a ``<think>`` block.

Strictness: OpenAI's strict mode requires every object to list all its properties as required
and to forbid additional properties, and rejects some keywords. The pydantic schema is
transformed that way (``default`` dropped, ``$ref`` with siblings inlined) and sent with
``strict: true`` when that is possible; when the schema uses something strict mode cannot
express (free-form dicts, ``allOf``, ``uniqueItems``...), the untouched schema is sent with
``strict: false``. Either way the reply is validated against the pydantic model itself.

Probing: the first call for an (endpoint, model) tries the modes in order; a 400/422 moves on to
the next, and the first mode that gets an answer is remembered for the process (and in the
request cache directory). A remembered mode that starts being refused is tried first and the
others follow in order.

A reply cut at its token limit that ends in a loop (:func:`loops`) is not asked again with a
larger budget: at temperature 0 that only buys a longer loop.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Literal, get_args

from rageval._client._limiter import Slots
from rageval._client._transport import PreEncoded, encode_body

__all__ = [
    "MODES",
    "Mode",
    "Shape",
    "build_request",
    "error_text",
    "known_mode",
    "known_n_support",
    "parse_json_object",
    "probe_lock",
    "reask_messages",
    "remember_mode",
    "remember_n_support",
    "reply_text",
    "shape_of",
    "strict_schema",
]

Mode = Literal["json_schema", "tools", "json"]
#: the modes in the order they are tried
MODES: tuple[Mode, ...] = get_args(Mode)

_STRICT_UNSUPPORTED = frozenset(
    {
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
    }
)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Shape:
    """A response model as the modes need it."""

    name: str
    schema: dict[str, Any]
    strict: dict[str, Any] | None  # the strict-mode form, or None if there is none

    @cached_property  # once per response model (shapes are cached), not once per request
    def schema_json(self) -> str:
        # keys in the model's order, not sorted: in json mode the judge reads this text, and
        # it should meet "reason" before the verdict and "s2" before "s10"
        return json.dumps(self.schema, separators=(",", ":"))

    @cached_property
    def encoded_extras(self) -> dict[str, dict[str, Any]]:
        """build_request's extra arguments by mode, made on first use."""
        return {}

    @cached_property
    def extra_bodies(self) -> dict[str, bytes]:
        """The JSON of build_request's extra arguments by mode, made on first use."""
        return {}


@lru_cache(maxsize=4096)  # metrics build a response model per number of items asked about
def shape_of(response_model: type[Any]) -> Shape:
    schema = _untitled(response_model.model_json_schema())
    name = _NAME_CHARS.sub("_", response_model.__name__)[:64] or "reply"
    return Shape(name=name, schema=schema, strict=strict_schema(schema))


def _untitled(node: Any) -> Any:
    """The schema without pydantic's ``title`` keywords: they repeat the property and class
    names, and every schema token is a prompt token the user pays for."""
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _untitled(sub) for name, sub in value.items()}
        elif key != "title" or not isinstance(value, str):
            out[key] = _untitled(value)
    return out


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` in OpenAI strict form, or None when strict mode cannot express it."""
    if schema.get("type") != "object":
        return None
    try:
        strict: dict[str, Any] = _strict_node(copy.deepcopy(schema), schema, depth=0)
    except _NotStrict:
        return None
    return strict


class _NotStrict(Exception):
    pass


def _strict_node(node: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > 64:
        raise _NotStrict
    if not isinstance(node, dict):
        return node
    if _STRICT_UNSUPPORTED & node.keys():
        raise _NotStrict
    if "$ref" in node and len(node) > 1:
        # strict mode wants a bare $ref; inline the target so the siblings (description...) stay
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        node = {**_resolve(node["$ref"], root), **siblings}
    node.pop("default", None)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        props = node.get("properties")
        if extra is not False or not props:
            raise _NotStrict  # free-form mappings have no strict form
        node["required"] = list(props)
        node["additionalProperties"] = False
        node["properties"] = {k: _strict_node(v, root, depth + 1) for k, v in props.items()}
    for key in ("items", "additionalItems"):
        if isinstance(node.get(key), dict):
            node[key] = _strict_node(node[key], root, depth + 1)
    for key in ("anyOf", "prefixItems"):
        if isinstance(node.get(key), list):
            node[key] = [_strict_node(v, root, depth + 1) for v in node[key]]
    if isinstance(node.get("$defs"), dict):
        node["$defs"] = {k: _strict_node(v, root, depth + 1) for k, v in node["$defs"].items()}
    return node


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise _NotStrict
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _NotStrict
        target = target[part]
    if not isinstance(target, dict):
        raise _NotStrict
    return copy.deepcopy(target)


def build_request(
    mode: Mode, messages: list[dict[str, Any]], shape: Shape
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages and the extra ``chat.completions.create`` arguments for ``mode``.

    The extra arguments (the schema, the same in every request for a response model) come as
    :class:`PreEncoded` values, so their JSON is made once, not once per request."""
    if not _schema_beside_messages(mode):
        return _schema_in_messages(messages, shape), {}
    return messages, _encoded_extra(mode, shape)


def extra_body(mode: Mode, shape: Shape) -> bytes:
    """The JSON text of the extra arguments :func:`build_request` sends beside the messages in
    ``mode`` (b"" when the schema is in the messages). Made once per response model and mode,
    not once per request: the judge sizes every request's prompt by it."""
    body = shape.extra_bodies.get(mode)
    if body is None:
        extra = _encoded_extra(mode, shape) if _schema_beside_messages(mode) else {}
        body = shape.extra_bodies[mode] = encode_body(extra) if extra else b""
    return body


def _schema_beside_messages(mode: Mode) -> bool:
    return mode != "json" and mode in MODES


def _encoded_extra(mode: Mode, shape: Shape) -> dict[str, Any]:
    extra = shape.encoded_extras.get(mode)
    if extra is None:
        extra = shape.encoded_extras[mode] = _extra(mode, shape)
    return extra


def _extra(mode: Mode, shape: Shape) -> dict[str, Any]:
    schema = shape.strict if shape.strict is not None else shape.schema
    strict = shape.strict is not None
    if mode == "json_schema":
        fmt = {"name": shape.name, "schema": schema, "strict": strict}
        return {"response_format": PreEncoded({"type": "json_schema", "json_schema": fmt})}
    function = {
        "name": shape.name,
        "description": "Record your answer.",
        "parameters": schema,
        "strict": strict,
    }
    return {
        "tools": PreEncoded([{"type": "function", "function": function}]),
        "tool_choice": PreEncoded({"type": "function", "function": {"name": shape.name}}),
    }


def _schema_in_messages(messages: list[dict[str, Any]], shape: Shape) -> list[dict[str, Any]]:
    instruction = (
        "Answer with a single JSON object and nothing else. It must validate against this "
        f"JSON Schema:\n{shape.schema_json}"
    )
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "system":
            message["content"] = f"{message.get('content') or ''}\n\n{instruction}".lstrip()
            break
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def reply_text(message: Mapping[str, Any], mode: Mode) -> str:
    """The text that should hold the JSON object: the forced tool call's arguments, or content.

    ``message`` is ``choices[0].message`` of the decoded reply. A value that is not a string
    (some servers send the arguments as an object) is passed on as its JSON text, so whatever
    the server sent is what gets validated and, if need be, quoted back in a re-ask.
    """
    if mode == "tools":
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if arguments:
                return arguments if isinstance(arguments, str) else json.dumps(arguments)
    content = message.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content) if content else ""


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``; raises ValueError saying what was wrong."""
    text = _THINK.sub("", text).strip()
    if not text:
        raise ValueError("the reply was empty; expected a JSON object")
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise ValueError(f"expected a JSON object, got a JSON {type(value).__name__}")
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ValueError("the reply contains no valid JSON object")


def error_text(exc: Exception, limit: int = 1500) -> str:
    """A compact description of a parse, validation or check error, for the model to read."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        lines = []
        for err in errors(include_url=False)[:10]:
            loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
            line = f"{loc}: {err.get('msg', 'invalid')}"
            given = err.get("input")
            if given is None or isinstance(given, (bool, int, float, str)):
                # the value given tells the judge what to fix, and two replies failing the
                # same way apart from two failing differently (re-asks stop on a repeat)
                shown = json.dumps(given, ensure_ascii=False)
                line += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
            lines.append(line)
        text = "the JSON does not match the schema:\n" + "\n".join(lines)
    else:
        text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reask_messages(bad_reply: str, error: str) -> list[dict[str, str]]:
    return [
        {"role": "assistant", "content": bad_reply},
        {
            "role": "user",
            "content": (
                f"That reply could not be used: {error}\n"
                "Send the complete answer again as one JSON object, with this fixed."
            ),
        },
    ]


# ------------------------------------------------------------- mode memory

_KNOWN: dict[tuple[str, str], Mode] = {}
#: whether an (endpoint, model) returns the ``n`` choices a request asks for
_N_SUPPORT: dict[tuple[str, str], bool] = {}
_PROBE_LOCKS: dict[tuple[str, str, str], Slots] = {}
_MEMORY_LOCK = threading.Lock()


def known_mode(endpoint: str, model: str) -> Mode | None:
    return _KNOWN.get((endpoint, model))


def remember_mode(endpoint: str, model: str, mode: Mode) -> None:
    _KNOWN[(endpoint, model)] = mode


def known_n_support(endpoint: str, model: str) -> bool | None:
    """True/False once a request with ``n`` > 1 was answered (or refused), else None."""
    return _N_SUPPORT.get((endpoint, model))


def remember_n_support(endpoint: str, model: str, supported: bool) -> None:
    _N_SUPPORT[(endpoint, model)] = supported


def probe_lock(endpoint: str, model: str, what: str = "mode") -> Slots:
    """Serialises the first probe of `what` (the structured-output "mode", or "n": whether
    ``n`` > 1 is honoured) per (endpoint, model), so one call probes and others wait."""
    with _MEMORY_LOCK:
        return _PROBE_LOCKS.setdefault((endpoint, model, what), Slots(1))


# ------------------------------------------------------------- replies cut short

# A truncated reply that ends in the same text repeated at least this many times, over at least
# this many characters, is a model stuck in a loop (small local models under a JSON grammar
# repeat list items or whitespace until the budget runs out): at temperature 0 a larger budget
# only buys a longer loop, so it is not asked again.
LOOP_REPEATS = 3
LOOP_MIN_CHARS = 200
LOOP_MAX_PERIOD = 2_000


def loops(text: str) -> bool:
    """Whether `text` ends in one stretch of characters (at most :data:`LOOP_MAX_PERIOD`)
    repeated back to back at least :data:`LOOP_REPEATS` times, over at least
    :data:`LOOP_MIN_CHARS` characters: the end of a reply from a model caught in a loop (where
    the reply was cut, the last stretch need not be whole)."""
    for period in range(1, min(len(text) // LOOP_REPEATS, LOOP_MAX_PERIOD) + 1):
        tail = text[-period:]
        repeats = 1
        while text.endswith(tail * (repeats + 1)):
            repeats += 1
        if repeats >= LOOP_REPEATS and repeats * period >= LOOP_MIN_CHARS:
            return True
    return False
