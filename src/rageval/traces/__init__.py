"""Data in: exported traces as rows -- OTLP JSON (GenAI semantic conventions), OpenInference
spans, Langfuse's export -- read by :func:`load` into single-turn samples (one per assistant
answer) or conversations (one per session, else per trace).

Each format is read into the same :class:`Span` records (what an LLM call was asked and
answered, which documents a retriever returned, which tool ran with what), and one assembly
turns a session's spans, in start order, into turns. docs/traces.md has the table of what
maps where.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, get_args

from rageval.samples import Sample
from rageval.traces._spans import Format, Message, Span, View, read_spans
from rageval.traces._turns import rows_of

__all__ = ["Format", "Message", "Span", "View", "load", "read_spans"]


def load(
    path: str | os.PathLike[str],
    format: Format = "otlp",
    *,
    view: View = "turns",
    references: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Sample]:
    """The rows of an exported trace file, for :func:`rageval.evaluate`.

    `format`: ``"otlp"`` (the OpenTelemetry collector's file exporter: OTLP JSON, one request
    a line or one document, read with the GenAI semantic conventions), ``"openinference"``
    (the same files, read with OpenInference's span attributes) or ``"langfuse"`` (a trace
    or session downloaded from Langfuse, or a list of traces). Spans are grouped by session
    (OpenInference ``session.id``, GenAI ``gen_ai.conversation.id``, Langfuse ``sessionId``),
    else by trace.

    `view`: ``"turns"`` gives one :class:`Sample` per assistant answer (the user message
    before it, the documents retrieved since, the answer; id ``<group>/<turn>``);
    ``"conversations"`` one :class:`Conversation` per group (id: the session or trace id).

    `references` adds fields to the rows by id: ``{"<group>/<turn>": {"reference": ...}}``
    for turns, ``{"<group>": {"reference_tool_calls": [...], "reference_goal": ...}}`` for
    conversations. An id that names no row, or a field the row does not take, is an error.

    A file that is not a trace export of `format` raises :class:`InvalidDataError` naming the
    file, the span and the field, before any request; a span of a kind the turns do not use
    is kept in the row's metadata (``other_spans``).
    """
    if format not in get_args(Format):
        raise ValueError(f"unknown trace format {format!r}: one of {', '.join(get_args(Format))}")
    if view not in get_args(View):
        raise ValueError(f"unknown view {view!r}: one of {', '.join(get_args(View))}")
    return rows_of(read_spans(path, format), view, references or {}, str(path))
