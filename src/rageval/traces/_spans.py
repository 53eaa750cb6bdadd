"""Every span of a trace export read into the same records (:class:`Span`: what an LLM call
was asked and answered, which documents a retriever returned, which tool ran with what),
whatever the format: OTLP JSON with the GenAI semantic conventions or OpenInference's
attributes, or Langfuse's export. :mod:`rageval.traces._turns` makes turns of them."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from rageval.samples import InvalidDataError, RowProblem

Format = Literal["otlp", "openinference", "langfuse"]
View = Literal["turns", "conversations"]
#: what a span did, as far as the turns are concerned; any other span is kept as metadata
SpanKind = Literal["llm", "retriever", "tool", "other"]

__all__ = ["Format", "Message", "Span", "SpanKind", "View", "read_spans"]


@dataclass
class Message:
    """A chat message as an LLM span records it (OpenAI's roles; a system message is read
    and left out of the turns)."""

    role: str
    content: str | None = None
    #: the assistant's tool calls: ``{"name", "arguments", "id"}`` (arguments a JSON object
    #: or its text)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: a tool message: the call it answers
    tool_call_id: str | None = None


@dataclass
class Span:
    """One span (a Langfuse observation), reduced to what the turns are built from."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    kind: SpanKind
    session_id: str | None = None
    input_messages: list[Message] = field(default_factory=list)
    output_messages: list[Message] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    tool_name: str | None = None
    tool_arguments: Any = None
    tool_result: Any = None
    tool_call_id: str | None = None
    #: the span's own label of its kind (``CHAIN``, ``invoke_agent``, ``SPAN``) and its
    #: attributes, kept for a span the turns do not use
    label: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


class _Problems:
    """The problems found in a trace file, each naming the span and field; raised together."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[RowProblem] = []

    def add(self, where: str, span_id: str | None, message: str) -> None:
        span = f"span {span_id!r}: " if span_id else ""
        self.found.append(RowProblem(None, where or None, span + message))

    def raise_any(self) -> None:
        if self.found:
            raise InvalidDataError(self.found, source=self.source)


def read_spans(path: str | os.PathLike[str], format: Format) -> list[Span]:
    """Every span of the file, read with `format`'s conventions (see :func:`load`)."""
    source = str(path)
    text = Path(path).read_text(encoding="utf-8")
    problems = _Problems(source)
    documents = _json_documents(text, problems)
    reader = _read_langfuse if format == "langfuse" else _read_otlp
    spans = list(reader(documents, format, problems))
    problems.raise_any()
    if not spans:
        problems.add("", None, f"no spans: not a {format} trace export")
        problems.raise_any()
    return spans


def _json_documents(text: str, problems: _Problems) -> list[tuple[str, Any]]:
    """The file's JSON documents with where each is: one document, or one a line (the
    collector's file exporter writes one export request a line)."""
    try:
        return [("", json.loads(text))]
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            problems.add("", None, f"not JSON ({whole.msg}, line {whole.lineno})")
            problems.raise_any()
        out = []
        for n, line in lines:
            try:
                out.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as e:
                problems.add(f"line {n}", None, f"not JSON ({e.msg})")
        problems.raise_any()
        return out


# --------------------------------------------------------------------------- OTLP JSON


def _read_otlp(
    documents: Sequence[tuple[str, Any]], format: Format, problems: _Problems
) -> Iterator[Span]:
    convention = _openinference_span if format == "openinference" else _genai_span
    for where, doc in documents:
        resource_spans = doc.get("resourceSpans") if isinstance(doc, Mapping) else None
        if not isinstance(resource_spans, list):
            problems.add(f"{where}.resourceSpans".lstrip("."), None, "missing: not OTLP JSON")
            continue
        for r, resource in enumerate(resource_spans):
            for s, scope in enumerate(_list(resource, "scopeSpans")):
                for i, raw in enumerate(_list(scope, "spans")):
                    at = f"{where} resourceSpans[{r}].scopeSpans[{s}].spans[{i}]".strip()
                    span = _otlp_span(raw, at, problems)
                    if span is not None:
                        convention(span, at, problems)
                        yield span


def _list(value: Any, key: str) -> list[Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, list) else []


def _otlp_span(raw: Any, at: str, problems: _Problems) -> Span | None:
    if not isinstance(raw, Mapping):
        problems.add(at, None, f"a span must be an object, got {type(raw).__name__}")
        return None
    span_id = _otlp_id(raw.get("spanId"), 8)
    label = span_id or str(raw.get("spanId"))
    trace_id = _otlp_id(raw.get("traceId"), 16)
    bad = len(problems.found)
    if span_id is None:
        problems.add(f"{at}.spanId", label, "not a span id (16 hex digits, or 8 bytes base64)")
    if trace_id is None:
        problems.add(f"{at}.traceId", label, "not a trace id (32 hex digits, or 16 bytes base64)")
    parent = raw.get("parentSpanId") or None
    parent_id = _otlp_id(parent, 8) if parent is not None else None
    if parent is not None and parent_id is None:
        problems.add(f"{at}.parentSpanId", label, "not a span id")
    start = raw.get("startTimeUnixNano")
    if not (isinstance(start, int) or (isinstance(start, str) and start.isdigit())):
        problems.add(f"{at}.startTimeUnixNano", label, f"not a time in nanoseconds: {start!r}")
    attributes = _otlp_attributes(raw.get("attributes", []), f"{at}.attributes", label, problems)
    if len(problems.found) > bad or span_id is None or trace_id is None:
        return None
    span = Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=str(raw.get("name", "")),
        start_ns=int(start),  # type: ignore[arg-type]  # checked above
        kind="other",
        attributes=attributes,
    )
    events = [
        (str(e.get("name", "")), _otlp_attributes(e.get("attributes", []), at, label, problems))
        for e in raw.get("events", [])
        if isinstance(e, Mapping)
    ]
    span.attributes["events"] = events
    return span


def _otlp_id(value: Any, size: int) -> str | None:
    """An OTLP id as lower-case hex: the OTLP JSON form is hex; protobuf's own JSON mapping
    (``MessageToJson``) writes bytes as base64, which is read too (the lengths differ)."""
    if not isinstance(value, str):
        return None
    if re.fullmatch(rf"[0-9a-fA-F]{{{size * 2}}}", value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error:
        return None
    return raw.hex() if len(raw) == size else None


def _otlp_attributes(raw: Any, at: str, span_id: str, problems: _Problems) -> dict[str, Any]:
    if not isinstance(raw, list):
        problems.add(at, span_id, "attributes must be a list of {key, value}")
        return {}
    out: dict[str, Any] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            problems.add(f"{at}[{i}]", span_id, "an attribute needs a text key")
            continue
        try:
            out[item["key"]] = _any_value(item.get("value") or {})
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            # a value of no OTLP type, or of one but malformed inside (a kvlist item with no key)
            problems.add(f"{at}[{i}].value", span_id, f"{item['key']}: not an OTLP value ({e!r})")
    return out


def _any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (64-bit integers are JSON text in OTLP)."""
    if not isinstance(value, Mapping):
        raise ValueError("a value must be an object such as {'stringValue': ...}")
    if not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" or kind == "boolValue":
        return inner
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "bytesValue":
        return inner
    if kind == "arrayValue":
        return [_any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: _any_value(kv.get("value") or {}) for kv in inner.get("values", [])}
    raise ValueError(f"unknown value type {kind!r}")


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _text(value: Any) -> str | None:
    """A message content as text: a string, or the texts of its parts joined."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [
            _text(part.get("text", part.get("content")))
            for part in value
            if isinstance(part, Mapping)
        ]
        return "".join(t for t in texts if t) or None
    return json.dumps(value, ensure_ascii=False)


# ----- OpenInference


_OPENINFERENCE_KINDS: dict[str, SpanKind] = {"LLM": "llm", "RETRIEVER": "retriever", "TOOL": "tool"}


def _openinference_span(span: Span, at: str, problems: _Problems) -> None:
    attrs = span.attributes
    label = attrs.get("openinference.span.kind")
    span.label = str(label) if label is not None else None
    span.kind = _OPENINFERENCE_KINDS.get(str(label).upper(), "other")
    span.session_id = _str_or_none(attrs.get("session.id"))
    if span.kind == "llm":
        span.input_messages = _openinference_messages(attrs, "llm.input_messages")
        span.output_messages = _openinference_messages(attrs, "llm.output_messages")
    elif span.kind == "retriever":
        docs = _indexed(attrs, "retrieval.documents")
        span.documents = [str(d["document.content"]) for d in docs if "document.content" in d]
    elif span.kind == "tool":
        span.tool_name = _str_or_none(attrs.get("tool.name")) or span.name
        span.tool_arguments = _maybe_json(attrs.get("input.value"))
        span.tool_result = _maybe_json(attrs.get("output.value"))
        span.tool_call_id = _str_or_none(attrs.get("tool_call.id") or attrs.get("tool.id"))


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference's flattened lists: ``prefix.N.rest`` keys as one dict (``rest`` to value)
    per N, in N's order."""
    items: dict[int, dict[str, Any]] = {}
    pattern = re.compile(rf"{re.escape(prefix)}\.(\d+)\.(.+)")
    for key, value in attrs.items():
        match = pattern.fullmatch(key)
        if match:
            items.setdefault(int(match[1]), {})[match[2]] = value
    return [items[n] for n in sorted(items)]


def _openinference_messages(attrs: Mapping[str, Any], prefix: str) -> list[Message]:
    messages = []
    for m in _indexed(attrs, prefix):
        content = m.get("message.content")
        if content is None:
            parts = _indexed(m, "message.contents")
            content = _text([{"text": p.get("message_content.text")} for p in parts])
        calls = [
            {
                "name": c.get("tool_call.function.name"),
                "arguments": c.get("tool_call.function.arguments"),
                "id": c.get("tool_call.id"),
            }
            for c in _indexed(m, "message.tool_calls")
        ]
        messages.append(
            Message(
                role=str(m.get("message.role", "")),
                content=_str_or_none(content),
                tool_calls=calls,
                tool_call_id=_str_or_none(m.get("message.tool_call_id")),
            )
        )
    return messages


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


# ----- OpenTelemetry GenAI semantic conventions

_GENAI_KINDS: dict[str, SpanKind] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "retrieval": "retriever",
    "execute_tool": "tool",
}


def _genai_span(span: Span, at: str, problems: _Problems) -> None:
    attrs = span.attributes
    operation = attrs.get("gen_ai.operation.name")
    span.label = _str_or_none(operation)
    span.kind = _GENAI_KINDS.get(str(operation), "other")
    span.session_id = _str_or_none(attrs.get("gen_ai.conversation.id") or attrs.get("session.id"))
    if span.kind == "llm":
        given_in = "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs
        if given_in:
            span.input_messages = _genai_messages(
                attrs, "gen_ai.input.messages", at, span, problems
            )
            span.output_messages = _genai_messages(
                attrs, "gen_ai.output.messages", at, span, problems
            )
        else:
            span.input_messages, span.output_messages = _genai_event_messages(attrs["events"])
    elif span.kind == "retriever":
        docs = _maybe_json(attrs.get("gen_ai.retrieval.documents"))
        span.documents = (
            [
                str(d.get("content", d.get("text")))
                for d in docs
                if isinstance(d, Mapping) and (d.get("content") or d.get("text"))
            ]
            if isinstance(docs, list)
            else []
        )
    elif span.kind == "tool":
        span.tool_name = _str_or_none(attrs.get("gen_ai.tool.name")) or span.name
        span.tool_arguments = _maybe_json(attrs.get("gen_ai.tool.call.arguments"))
        span.tool_result = _maybe_json(attrs.get("gen_ai.tool.call.result"))
        span.tool_call_id = _str_or_none(attrs.get("gen_ai.tool.call.id"))


def _genai_messages(
    attrs: Mapping[str, Any], key: str, at: str, span: Span, problems: _Problems
) -> list[Message]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: a list of ``{role, parts}``
    (JSON text on a span when the SDK has no structured attributes)."""
    value = _maybe_json(attrs.get(key, []))
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        problems.add(f"{at}.attributes[{key}]", span.span_id, "not a list of {role, parts}")
        return []
    messages = []
    for m in value:
        message = Message(role=str(m.get("role", "")))
        texts = []
        for part in m.get("parts", []):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                message.tool_calls.append(
                    {
                        "name": part.get("name"),
                        "arguments": part.get("arguments"),
                        "id": part.get("id"),
                    }
                )
            elif kind == "tool_call_response":
                message.tool_call_id = _str_or_none(part.get("id"))
                response = part.get("response")
                texts.append(response if isinstance(response, str) else json.dumps(response))
        message.content = "".join(texts) if texts else None
        messages.append(message)
    return messages


def _genai_event_messages(
    events: Sequence[tuple[str, dict[str, Any]]],
) -> tuple[list[Message], list[Message]]:
    """The older GenAI conventions: one span event a message (``gen_ai.user.message``,
    ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``)."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, attrs in events:
        match = re.fullmatch(r"gen_ai\.(system|user|assistant|tool)\.message", name)
        if match:
            inputs.append(_event_message(match[1], attrs))
        elif name == "gen_ai.choice":
            body = _maybe_json(attrs.get("message"))
            outputs.append(
                _event_message("assistant", body if isinstance(body, Mapping) else attrs)
            )
    return inputs, outputs


def _event_message(role: str, attrs: Mapping[str, Any]) -> Message:
    calls = _maybe_json(attrs.get("tool_calls")) or []
    return Message(
        role=str(attrs.get("role", role)),
        content=_text(attrs.get("content")),
        tool_calls=[_openai_call(c) for c in calls if isinstance(c, Mapping)],
        tool_call_id=_str_or_none(attrs.get("id") or attrs.get("tool_call_id")),
    )


def _openai_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    body = function if isinstance(function, Mapping) else call
    return {"name": body.get("name"), "arguments": body.get("arguments"), "id": call.get("id")}


# --------------------------------------------------------------------------- Langfuse

_LANGFUSE_KINDS: dict[str, SpanKind] = {
    "GENERATION": "llm",
    "RETRIEVER": "retriever",
    "TOOL": "tool",
}


def _read_langfuse(
    documents: Sequence[tuple[str, Any]], format: Format, problems: _Problems
) -> Iterator[Span]:
    for where, doc in documents:
        for at, trace in _langfuse_traces(doc, where):
            if not isinstance(trace, Mapping) or not isinstance(trace.get("id"), str):
                problems.add(f"{at}.id", None, "a Langfuse trace needs its id")
                continue
            observations = trace.get("observations")
            if not isinstance(observations, list):
                problems.add(f"{at}.observations", None, "a Langfuse trace needs its observations")
                continue
            for i, raw in enumerate(observations):
                span = _langfuse_span(raw, trace, f"{at}.observations[{i}]", problems)
                if span is not None:
                    yield span


def _langfuse_traces(doc: Any, where: str) -> list[tuple[str, Any]]:
    """The traces of a Langfuse export: one trace (the UI's trace download), a session (its
    ``traces``), a list of traces, or the API's page (``data``)."""
    prefix = f"{where} " if where else ""
    if isinstance(doc, list):
        return [(f"{prefix}[{i}]", t) for i, t in enumerate(doc)]
    if isinstance(doc, Mapping):
        for key in ("traces", "data"):
            if isinstance(doc.get(key), list):
                return [(f"{prefix}{key}[{i}]", t) for i, t in enumerate(doc[key])]
    return [(prefix.strip() or "trace", doc)]


def _langfuse_span(raw: Any, trace: Mapping[str, Any], at: str, problems: _Problems) -> Span | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
        problems.add(f"{at}.id", None, "an observation needs its id")
        return None
    span_id = raw["id"]
    try:
        start = datetime.fromisoformat(str(raw.get("startTime")).replace("Z", "+00:00"))
    except ValueError:
        problems.add(f"{at}.startTime", span_id, f"not an ISO time: {raw.get('startTime')!r}")
        return None
    label = str(raw.get("type", "SPAN"))
    kind = _LANGFUSE_KINDS.get(label.upper(), "other")
    span = Span(
        trace_id=str(raw.get("traceId") or trace["id"]),
        span_id=span_id,
        parent_id=_str_or_none(raw.get("parentObservationId")),
        name=str(raw.get("name") or ""),
        start_ns=int(start.timestamp() * 1e9),
        kind=kind,
        session_id=_str_or_none(trace.get("sessionId")),
        label=label,
        attributes={
            k: raw[k] for k in ("input", "output", "metadata", "model") if raw.get(k) is not None
        },
    )
    if kind == "llm":
        span.input_messages = _openai_messages(raw.get("input"))
        span.output_messages = _openai_messages(raw.get("output"), role="assistant")
    elif kind == "retriever":
        span.documents = _documents(raw.get("output"))
    elif kind == "tool":
        span.tool_name = span.name or None
        span.tool_arguments = _maybe_json(raw.get("input"))
        span.tool_result = _maybe_json(raw.get("output"))
        meta = raw.get("metadata")
        span.tool_call_id = (
            _str_or_none(meta.get("tool_call_id")) if isinstance(meta, Mapping) else None
        )
    return span


def _openai_messages(value: Any, role: str = "user") -> list[Message]:
    """A generation's input or output as messages: OpenAI's message list (or
    ``{"messages": [...]}``), one message object, or text (a message of `role`)."""
    value = _maybe_json(value)
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, str):
        return [Message(role=role, content=value)]
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        return []
    return [
        Message(
            role=str(m.get("role", role)),
            content=_text(m.get("content")),
            tool_calls=[
                _openai_call(c) for c in m.get("tool_calls") or [] if isinstance(c, Mapping)
            ],
            tool_call_id=_str_or_none(m.get("tool_call_id")),
        )
        for m in value
        if isinstance(m, Mapping)
    ]


def _documents(value: Any) -> list[str]:
    """A retriever's output as texts: a list of texts or of documents (``page_content``,
    ``content`` or ``text``), or an object holding such a list under ``documents``."""
    value = _maybe_json(value)
    if isinstance(value, Mapping):
        value = value.get("documents", [])
    if not isinstance(value, list):
        return []
    texts = []
    for doc in value:
        if isinstance(doc, str):
            texts.append(doc)
        elif isinstance(doc, Mapping):
            text = next((doc[k] for k in ("page_content", "content", "text") if doc.get(k)), None)
            if text is not None:
                texts.append(str(text))
    return texts
