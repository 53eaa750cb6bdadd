"""A session's (else a trace's) spans, in start order, made into turns: the rows
:func:`rageval.traces.load` returns, one per assistant answer or one conversation per group,
validated as samples."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rageval.samples import Conversation, InvalidDataError, RowProblem, Sample
from rageval.traces._spans import Span, View

__all__ = ["rows_of"]


@dataclass
class _Thread:
    """One session's (else one trace's) turns, as rows of :class:`Turn` fields."""

    id: str
    session_id: str | None
    trace_ids: list[str]
    turns: list[dict[str, Any]] = field(default_factory=list)
    #: the spans the turns do not use (a CHAIN, an AGENT, an embedding call...), summarised
    other_spans: list[dict[str, Any]] = field(default_factory=list)


def _grouped(spans: Sequence[Span]) -> Iterator[tuple[str, list[Span]]]:
    """The spans by session, else by trace, each group in start order (a tie in the file's
    order); groups in the order they start. A trace belongs to the session any of its spans
    names (OpenInference sets ``session.id`` only on the spans made inside ``using_session``)."""
    session_of: dict[str, str] = {}
    for span in spans:
        if span.session_id and span.trace_id not in session_of:
            session_of[span.trace_id] = span.session_id
    groups: dict[str, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):  # sorted() is stable
        groups.setdefault(session_of.get(span.trace_id, span.trace_id), []).append(span)
    yield from groups.items()


def _assemble(key: str, spans: Sequence[Span]) -> _Thread:
    """A group's spans, in start order, as turns. An LLM span's last user message opens a
    user turn when it is new (its text, or how many user messages the call was sent,
    differs from the last one's: a call that resends the history does not repeat it); its
    first output message is an assistant turn, carrying the documents of the retriever spans
    since the previous assistant turn and its tool calls. A tool span (else a tool message a
    later LLM call was sent) answers the latest call of that id, else of that tool's name,
    not yet answered: the call gets the result and a tool turn follows."""
    thread = _Thread(
        id=key,
        session_id=next((s.session_id for s in spans if s.session_id), None),
        trace_ids=list(dict.fromkeys(s.trace_id for s in spans)),
    )
    last_user: tuple[int, str | None] | None = None
    documents: list[str] | None = None
    for span in spans:
        where = {"trace_id": span.trace_id, "span_id": span.span_id}
        if span.kind == "llm":
            users = [m for m in span.input_messages if m.role == "user"]
            if users and (len(users), users[-1].content) != last_user:
                last_user = (len(users), users[-1].content)
                thread.turns.append(
                    {"role": "user", "content": users[-1].content, "metadata": where}
                )
            for message in span.input_messages:
                if message.role == "tool" and message.tool_call_id:
                    _answer(thread, message.tool_call_id, None, None, message.content, where)
            for message in span.output_messages[:1]:
                turn: dict[str, Any] = {
                    "role": "assistant",
                    "content": message.content,
                    "metadata": where,
                }
                if documents is not None:
                    turn["retrieved_contexts"], documents = documents, None
                if message.tool_calls:
                    turn["tool_calls"] = [
                        {k: v for k, v in c.items() if v is not None} for c in message.tool_calls
                    ]
                thread.turns.append(turn)
        elif span.kind == "retriever":
            documents = [*(documents or []), *span.documents]
        elif span.kind == "tool":
            answered = _answer(
                thread,
                span.tool_call_id,
                span.tool_name,
                span.tool_arguments,
                span.tool_result,
                where,
            )
            if not answered:  # a tool that no call of the model asked for
                thread.other_spans.append(_summary(span))
        else:
            thread.other_spans.append(_summary(span))
    return thread


def _answer(
    thread: _Thread,
    call_id: str | None,
    name: str | None,
    arguments: Any,
    result: Any,
    where: dict[str, str],
) -> bool:
    """Give the latest unanswered call of `call_id` (else of the tool `name`) its result and
    follow it with a tool turn; whether there was such a call."""
    calls = [c for t in thread.turns for c in t.get("tool_calls", ())]
    for call in reversed(calls):
        if (
            call.get("id") == call_id if call_id else call.get("name") == name
        ) and "result" not in call:
            break
    else:
        return False
    call["result"] = result
    if arguments is not None and not call.get("arguments"):
        call["arguments"] = arguments
    content = (
        result
        if isinstance(result, str) or result is None
        else json.dumps(result, ensure_ascii=False)
    )
    tool_turn = {"role": "tool", "content": content, "name": call.get("name"), "metadata": where}
    if call.get("id"):
        tool_turn["tool_call_id"] = call["id"]
    thread.turns.append(tool_turn)
    return True


def _summary(span: Span) -> dict[str, Any]:
    attributes = {k: v for k, v in span.attributes.items() if k != "events" or v}
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "name": span.name,
        "kind": span.label,
        "attributes": attributes,
    }


def _turn_rows(thread: _Thread) -> list[dict[str, Any]]:
    """One single-turn row per assistant answer (an assistant turn with text): the user
    message before it, the documents retrieved for the assistant turns since that message
    (absent when no retriever ran), the answer; the tool calls since are kept in metadata."""
    rows = []
    opened = 0  # where the current exchange (from its user turn) starts
    for i, turn in enumerate(thread.turns):
        if turn["role"] == "user":
            opened = i
        if turn["role"] != "assistant" or not (turn.get("content") or "").strip():
            continue
        exchange = thread.turns[opened : i + 1]
        user = exchange[0]["content"] if exchange[0]["role"] == "user" else None
        retrieved = [t["retrieved_contexts"] for t in exchange if "retrieved_contexts" in t]
        trace_id = turn["metadata"]["trace_id"]
        rows.append(
            {
                "id": f"{thread.id}/{i}",
                "user_input": user,
                "response": turn["content"],
                "retrieved_contexts": [d for docs in retrieved for d in docs]
                if retrieved
                else None,
                "metadata": {
                    "session_id": thread.session_id,
                    "trace_id": trace_id,
                    "turn": i,
                    "tool_calls": [c for t in exchange for c in t.get("tool_calls", ())],
                    "other_spans": [s for s in thread.other_spans if s["trace_id"] == trace_id],
                },
            }
        )
    return rows


def _conversation_row(thread: _Thread) -> dict[str, Any]:
    return {
        "id": thread.id,
        "turns": thread.turns,
        "metadata": {
            "session_id": thread.session_id,
            "trace_ids": thread.trace_ids,
            "other_spans": thread.other_spans,
        },
    }


def _validated_rows(
    rows: Mapping[str, dict[str, Any]],
    references: Mapping[str, Mapping[str, Any]],
    view: View,
    source: str,
) -> list[Sample]:
    problems = [
        RowProblem(
            None,
            None,
            f"references name {key!r}, which is no row's id (ids: "
            f"{', '.join(list(rows)[:5])}{', ...' if len(rows) > 5 else ''})",
        )
        for key in references
        if key not in rows
    ]
    if not rows:
        problems.append(
            RowProblem(
                None,
                None,
                "no span is an LLM call under this format's "
                "conventions, so there is no turn to evaluate",
            )
        )
    model: Callable[..., Sample] = (
        Conversation.model_validate if view == "conversations" else Sample.model_validate
    )
    out: list[Sample] = []
    for index, (row_id, row) in enumerate(rows.items()):
        try:
            out.append(model({**row, **references.get(row_id, {})}))
        except ValidationError as e:
            for err in e.errors():
                place = ".".join(str(p) for p in err["loc"]) or None
                problems.append(RowProblem(index, place, err["msg"], row_id))
    if problems:
        raise InvalidDataError(problems, source=source)
    return out


def rows_of(
    spans: Sequence[Span],
    view: View,
    references: Mapping[str, Mapping[str, Any]],
    source: str,
) -> list[Sample]:
    """The rows of `view` made of `spans`, with `references` added by id."""
    rows: dict[str, dict[str, Any]] = {}
    for key, group in _grouped(spans):
        thread = _assemble(key, group)
        made = _turn_rows(thread) if view == "turns" else [_conversation_row(thread)]
        rows.update((row["id"], row) for row in made)
    return _validated_rows(rows, references, view, source)
