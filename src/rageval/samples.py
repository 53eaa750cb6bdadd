"""Data in: the `Sample` row model, loaders for every supported source, and validation.

Validation is separate from loading so that a run can report every row a metric cannot score
(row number, id and field) before a single judge request is paid for.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import math
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import to_jsonable_python

from rageval._extras import require
from rageval.errors import RagevalError

#: legacy (ragas 0.1-style) column names accepted everywhere, mapped to the canonical field names
LEGACY_ALIASES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
    "ground_truths": "reference",
}
TEXT_FIELDS = ("user_input", "response", "reference")
LIST_FIELDS = ("retrieved_contexts", "reference_contexts")
SAMPLE_FIELDS = (*TEXT_FIELDS, *LIST_FIELDS)
#: the fields of a conversation row (:class:`Conversation`); a row is a conversation when it
#: has `turns` (or `messages`, OpenAI's and ragas' name for them)
CONVERSATION_FIELDS = ("turns", "reference_tool_calls", "reference_goal")
CONVERSATION_ALIASES: dict[str, str] = {"messages": "turns"}
#: every field a row may carry, single-turn or conversation
ROW_FIELDS = (*SAMPLE_FIELDS, *CONVERSATION_FIELDS)
#: every other name of a field, mapped to the field
FIELD_ALIASES: dict[str, str] = {**LEGACY_ALIASES, **CONVERSATION_ALIASES}


class InvalidDataError(RagevalError, ValueError):
    """Input data that cannot be evaluated. `problems` lists every (row, id, field, message).

    A problem in a line-based file (JSONL, CSV, TSV) names the file's 1-based line; in other
    input (a list, a DataFrame, a JSON or Parquet file) the 0-based row, as the data indexes it.
    """

    def __init__(self, problems: Sequence[RowProblem], *, source: str | None = None) -> None:
        self.problems = list(problems)
        by_row = any(p.row is not None and p.line is None for p in self.problems)
        by_turn = any(p.turn is not None for p in self.problems)
        counted = " and ".join(w for w, given in (("rows", by_row), ("turns", by_turn)) if given)
        head = (
            f"invalid input{f' in {source}' if source else ''}"
            f"{f' ({counted} counted from 0)' if counted else ''}: "
        )
        lines = [str(p) for p in self.problems[:20]]
        more = len(self.problems) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        super().__init__(head + ("\n  " if len(lines) > 1 else "") + "\n  ".join(lines))


#: a field inside a conversation's turn, as a metric names it: ``turns[3].content``
_TURN_FIELD = re.compile(r"turns\[(\d+)\]\.(.+)")


@dataclass(frozen=True)
class RowProblem:
    row: int | None  # 0-based row index; None for problems with the whole input
    field: str | None
    message: str
    sample_id: str | None = None
    metric: str | None = None
    #: 1-based line of the file where the row starts (JSONL, CSV, TSV input)
    line: int | None = None
    #: for a problem inside a conversation's turn, the turn's 0-based index in `turns`;
    #: `field` is then the turn's field (``tool_calls[0].arguments``)
    turn: int | None = None

    @classmethod
    def of_metric(
        cls,
        row: int,
        field: str,
        message: str,
        sample_id: str | None,
        metric: str,
        line: int | None,
    ) -> RowProblem:
        """A metric's problem with a row's `field` (:meth:`rageval.metrics.Metric.
        input_problems`); a field inside a turn, ``turns[3].content``, is located as that
        turn's field."""
        found = _TURN_FIELD.fullmatch(field)
        if found is None:
            return cls(row, field, message, sample_id, metric, line)
        turn, inside = int(found[1]), found[2]
        return cls(row, inside, message, sample_id, metric, line, turn=turn)

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        elif self.row is not None:
            where.append(f"row {self.row}")
        if self.sample_id is not None:
            where.append(f"id {self.sample_id!r}")
        if self.turn is not None:
            where.append(f"turn {self.turn}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        if self.metric is not None:
            where.append(f"metric {self.metric!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def blocks(self, required_fields: Iterable[str]) -> bool:
        """Whether this problem stops a metric that reads `required_fields`: a problem with
        one of the sample's text or list fields stops only the metrics that read that field;
        any other problem (an unreadable row, a bad id) stops every metric."""
        if self.field is None:
            return True
        name = "turns" if self.turn is not None else re.split(r"[.\[]", self.field, maxsplit=1)[0]
        canonical = FIELD_ALIASES.get(name, name)
        return canonical not in ROW_FIELDS or canonical in required_fields


def _alias(name: str) -> AliasChoices:
    legacy = [k for k, v in LEGACY_ALIASES.items() if v == name]
    return AliasChoices(name, *legacy)


class Sample(BaseModel):
    """One RAG interaction to score. Legacy names (`question`, `answer`, `contexts`,
    `ground_truth`) are accepted as aliases of the canonical fields."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    user_input: str | None = Field(default=None, validation_alias=_alias("user_input"))
    response: str | None = Field(default=None, validation_alias=_alias("response"))
    retrieved_contexts: list[str] | None = Field(
        default=None, validation_alias=_alias("retrieved_contexts")
    )
    #: the reference answer, or several acceptable ones (QA sets list aliases: "48 Hours",
    #: "forty-eight time"); see :attr:`references`
    reference: str | list[str] | None = Field(default=None, validation_alias=_alias("reference"))
    reference_contexts: list[str] | None = None
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: free-form fields a rubric may reference (anything not in the canonical set)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("retrieved_contexts", "reference_contexts", mode="before")
    @classmethod
    def _contexts_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError("must be a list of strings, got a single string")
        if isinstance(v, tuple):
            return list(v)
        if v is not None and not isinstance(v, list) and hasattr(v, "tolist"):
            return v.tolist()  # numpy arrays from pandas/parquet
        return v

    @field_validator("reference", mode="before")
    @classmethod
    def _reference_alternatives(cls, v: Any) -> Any:
        if isinstance(v, tuple) or (not isinstance(v, (str, list)) and hasattr(v, "tolist")):
            v = list(v)  # a tuple, or a numpy array from pandas/parquet
        if isinstance(v, list):
            if not v:
                raise ValueError("an empty list of references: give at least one answer")
            if not all(isinstance(r, str) for r in v):
                raise ValueError("must be a text or a list of texts (acceptable answers)")
            # a blank alternative holds no answer; all blank is a blank reference
            v = [r for r in v if not (isinstance(r, str) and not r.strip())] or [""]
            if len(v) == 1:
                return v[0]  # one acceptable answer is just the reference
        elif v is not None and not isinstance(v, str):
            raise ValueError("must be a text or a list of texts (acceptable answers)")
        return v

    @property
    def references(self) -> list[str]:
        """Every acceptable reference in its given order ([] when there is none). The first is
        the canonical one: :meth:`text` gives it, and metrics that split the reference into
        statements (answer_correctness, context_recall) read it alone; the lexical metrics and
        semantic_similarity take the best match over all of them (as SQuAD's F1 does over gold
        answers), and the judges of answer_accuracy and context_precision are shown them as
        alternatives (:func:`rageval.metrics.authoring.reference_text`)."""
        v = self.reference
        if v is None:
            return []
        return [v] if isinstance(v, str) else list(v)

    def text(self, field: str) -> str:
        """Value of a text field ('' when absent); of several references, the first."""
        v = getattr(self, field)
        if isinstance(v, list) and field in TEXT_FIELDS:
            return str(v[0])
        return v if isinstance(v, str) else ""


#: ragas' name for the same thing, so code written for ragas runs unchanged
SingleTurnSample = Sample


# --------------------------------------------------------------------------- conversations

#: who speaks a turn: the user, the assistant (the system under test), or a tool answering
#: one of the assistant's calls
Role = Literal["user", "assistant", "tool"]


def json_problem(value: Any, where: str = "") -> str | None:
    """Why `value` is not plain JSON data (objects with text keys, arrays, texts, finite
    numbers, true/false, null), naming where inside it; None when it is."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a non-finite number at {where or 'the top'}"
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = json_problem(item, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"a key that is not text ({key!r}) at {where or 'the top'}"
            found = json_problem(item, f"{where}[{key!r}]")
            if found:
                return found
        return None
    return f"a {type(value).__name__} at {where or 'the top'}, which JSON has no form for"


class ToolCall(BaseModel):
    """A call of a tool: its name, its arguments (a JSON object; OpenAI's JSON text of one is
    read as that object) and, optionally, what the tool returned. OpenAI's shape
    (``{"type": "function", "function": {"name": ..., "arguments": "{...}"}}``) and ragas'
    (``{"name": ..., "args": {...}}``) are read as well."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str
    arguments: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("arguments", "args")
    )
    #: what the tool returned (any JSON value), when the data records it
    result: Any = None
    #: the call's id (OpenAI's ``call_...``), which a tool turn's `tool_call_id` answers
    id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _openai_shape(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("function"), Mapping):
            if data.get("type", "function") != "function":
                raise ValueError(f"a tool call of type {data.get('type')!r}: expected 'function'")
            rest = {k: v for k, v in data.items() if k not in ("function", "type")}
            return {**rest, **data["function"]}
        return data

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("a tool call needs the tool's name")
        return name

    @field_validator("arguments", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if isinstance(value, str):  # OpenAI sends the arguments as JSON text
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"arguments given as text are not valid JSON ({e.msg})") from None
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"arguments must be a JSON object, got a {type(value).__name__}")
        problem = json_problem(value)
        if problem:
            raise ValueError(f"arguments must be JSON: {problem}")
        return dict(value)

    @field_validator("result")
    @classmethod
    def _json_result(cls, value: Any) -> Any:
        problem = json_problem(value)
        if problem:
            raise ValueError(f"a tool's result must be JSON: {problem}")
        return value

    @model_serializer(mode="wrap")
    def _present_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # what the data does not give is left out (a result of null is no result)
        return {k: v for k, v in handler(self).items() if v is not None}

    @property
    def text(self) -> str:
        """The call as evidence and judges read it: ``get_weather({"city": "Paris"})`` (keys
        sorted)."""
        return f"{self.name}({json.dumps(self.arguments, sort_keys=True, ensure_ascii=False)})"


#: what only an assistant turn carries
_ASSISTANT_ONLY = ("retrieved_contexts", "tool_calls", "reference")


class Turn(BaseModel):
    """One message of a conversation. An assistant turn may carry the contexts retrieved for
    it, the tools it called and a reference answer for it; a tool turn is what a tool
    returned (its `content`), answering the call `tool_call_id`."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    role: Role
    content: str | None = None
    retrieved_contexts: list[str] | None = Field(
        default=None, validation_alias=AliasChoices("retrieved_contexts", "contexts")
    )
    tool_calls: list[ToolCall] | None = None
    #: the reference answer for this (assistant) turn
    reference: str | None = None
    #: a tool turn: the id of the call it answers, and the tool's name
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("retrieved_contexts", "tool_calls", mode="before")
    @classmethod
    def _as_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be a list, got a single string")
        return _plain_list(value)

    @field_validator(*_ASSISTANT_ONLY)
    @classmethod
    def _assistant_only(cls, value: Any, info: ValidationInfo) -> Any:
        role = info.data.get("role")
        if value is not None and role is not None and role != "assistant":
            raise ValueError(f"only an assistant turn carries {info.field_name}, not a {role} turn")
        return value

    @model_serializer(mode="wrap")
    def _present_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class Conversation(Sample):
    """A conversation to score as one row: its turns (user, assistant and tool messages), and
    what it is compared with -- the tool calls the assistant should have made
    (`reference_tool_calls`, in order) and the goal the user wanted reached
    (`reference_goal`); a reference answer per turn goes on the turn. Loaded like
    :class:`Sample` (a row is a conversation when it has `turns` or `messages`).

    A Conversation is a :class:`Sample` whose single-turn fields are absent (giving one is an
    error), so every part of a run that carries rows carries it as it is; a metric that scores
    single-turn samples refuses it before any request (:meth:`rageval.metrics.Metric.input_problems`).
    """

    turns: list[Turn] = Field(validation_alias=AliasChoices("turns", "messages"))
    reference_tool_calls: list[ToolCall] | None = None
    reference_goal: str | None = None

    @field_validator(*SAMPLE_FIELDS, mode="before")
    @classmethod
    def _no_single_turn_field(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None:
            raise ValueError(
                f"a conversation row (it has turns) takes no {info.field_name}: give it on its "
                "turns (user and assistant content; an assistant turn's retrieved_contexts and "
                "reference)"
            )
        return value

    @field_validator("turns", "reference_tool_calls", mode="before")
    @classmethod
    def _turn_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be a list, got a single string")
        return _plain_list(value)

    @field_validator("turns")
    @classmethod
    def _some_turns(cls, turns: list[Turn]) -> list[Turn]:
        if not turns:
            raise ValueError("a conversation needs at least one turn")
        return turns

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tools the assistant called, in the order of its turns."""
        return [
            call
            for turn in self.turns
            if turn.role == "assistant"
            for call in turn.tool_calls or ()
        ]

    def turn_sample(self, index: int) -> Sample:
        """Assistant turn `index` as the single-turn sample the per-turn metrics score: its
        text as `response`, its own `retrieved_contexts` and `reference`, and as `user_input`
        the conversation so far (:func:`transcript` of the turns before it) -- just the
        user's message when that is the whole of it, so that a one-exchange conversation is
        the single-turn sample it stands for."""
        turn = self.turns[index]
        if turn.role != "assistant":
            raise ValueError(f"turn {index} is a {turn.role} turn, not an assistant turn")
        before = self.turns[:index]
        alone = len(before) == 1 and before[0].role == "user"
        return Sample(
            user_input=(before[0].content or "") if alone else transcript(before),
            response=turn.content,
            retrieved_contexts=turn.retrieved_contexts,
            reference=turn.reference,
            id=self.id,
        )


def transcript(turns: Sequence[Turn]) -> str:
    """Turns as a judge reads a conversation: one message per paragraph, ``user: …``,
    ``assistant: …`` (its tool calls after its text, ``[calls get_weather({…})]``) and
    ``tool get_weather: …`` for what a tool returned."""
    parts = []
    for turn in turns:
        speaker = f"tool {turn.name}" if turn.role == "tool" and turn.name else turn.role
        lines = [turn.content] if turn.content else []
        lines += [f"[calls {call.text}]" for call in turn.tool_calls or ()]
        parts.append(f"{speaker}: " + "\n".join(lines))
    return "\n\n".join(parts)


def _plain_list(value: Any) -> Any:
    """A tuple or a numpy array (pandas, Parquet) as a list."""
    if isinstance(value, tuple):
        return list(value)
    if value is not None and not isinstance(value, list) and hasattr(value, "tolist"):
        return value.tolist()
    return value


def is_conversation_row(row: Mapping[str, Any]) -> bool:
    """Whether a row (under rageval's names or their aliases) is a conversation: it has turns."""
    return any(row.get(name) is not None for name in ("turns", "messages"))


def sample_of(row: Mapping[str, Any]) -> Sample:
    """The row as a :class:`Conversation` when it has turns, else as a :class:`Sample`
    (pydantic's ValidationError when it is not valid)."""
    cls = Conversation if is_conversation_row(row) else Sample
    return cls.model_validate(row)


def missing_fields(sample: Sample, fields: Iterable[str]) -> list[str]:
    """The required fields a sample does not have (None; an empty string or list counts as
    present: metrics define their own behaviour for empty input)."""
    return [f for f in fields if getattr(sample, f, None) is None]


# --------------------------------------------------------------------------- loading


_KNOWN_FIELDS = frozenset({*ROW_FIELDS, *FIELD_ALIASES, "id", "metadata"})


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _normalise_row(
    raw: Mapping[str, Any], column_map: Mapping[str, str] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The row under the names Sample reads: the column map applied, one name per field (a
    field given under two names, e.g. `question` and `user_input` in a file converted from
    the old naming, is accepted when both hold the same value), other columns in metadata,
    empty cells as None. Also returns the names whose field was given twice with different
    values, with the message saying so."""
    cmap = column_map or {}
    kept_as: dict[str, str] = {}  # field -> the name the row keeps it under
    given_as: dict[str, list[str]] = {}  # field -> the row's own columns for it
    row: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    conflicts: dict[str, str] = {}
    for key, value in raw.items():
        name = cmap.get(key, key)
        if name not in _KNOWN_FIELDS:
            extras[name] = value
            continue
        value = None if _is_missing(value) else value
        field = FIELD_ALIASES.get(name, name)
        given_as.setdefault(field, []).append(key)
        kept = kept_as.setdefault(field, name)
        if kept == name and len(given_as[field]) == 1:
            row[name] = value
        elif row[kept] is None:
            row[kept] = value
        elif value is not None and _plain(value) != _plain(row[kept]):
            both = " and ".join(repr(_shown(k, cmap)) for k in given_as[field])
            conflicts[kept] = (
                f"{both} both name the field {field!r} and hold different values; keep one of them"
            )
    if extras:
        meta = dict(row.get("metadata") or {})
        meta.update(extras)
        row["metadata"] = meta
    return row, conflicts


def _shown(name: str, column_map: Mapping[str, str]) -> str:
    """A column as the user knows it (with what the column map made of it)."""
    return f"{name} (mapped to {column_map[name]})" if name in column_map else name


def _check_column_map(column_map: Mapping[str, str], columns: Collection[str]) -> list[RowProblem]:
    """A map from a column the data does not have, or to a name that is not a field, is an
    error (a typo would otherwise silently drop the column). ragas' column_map goes the other
    way (field -> column); a map that looks reversed says so."""
    problems = []
    fields = ", ".join(sorted({*ROW_FIELDS, "id", "metadata"}))
    for source, target in column_map.items():
        looks_reversed = source in _KNOWN_FIELDS and target in columns
        hint = (
            f"; it looks reversed: the map goes from your column to rageval's field, "
            f"i.e. {target} -> {source}"
            if looks_reversed
            else ""
        )
        if target not in _KNOWN_FIELDS:
            problems.append(
                RowProblem(
                    None,
                    None,
                    f"column_map: {source} -> {target}: {target!r} is not a rageval field "
                    f"({fields}){hint}",
                )
            )
        elif source not in columns:
            shown = ", ".join(sorted(columns)[:20]) or "none"
            problems.append(
                RowProblem(
                    None,
                    None,
                    f"column_map: {source} -> {target}: the data has no column {source!r} "
                    f"(its columns: {shown}){hint}",
                )
            )
    return problems


def _is_missing(value: Any) -> bool:
    """None, or a pandas/numpy NaN standing for an empty cell."""
    if value is None:
        return True
    return isinstance(value, float) and value != value


@dataclass
class LoadedData:
    """Rows parsed into Samples, plus every problem found in them.

    A row whose only problems are with some of its fields still has a Sample (without those
    fields): the problems stop only the metrics that read them (see RowProblem.blocks).
    """

    samples: list[Sample | None]  # None where the row could not be read at all
    problems: list[RowProblem]
    source: str
    #: 1-based file line where each row starts (line-based files), else None
    lines: list[int] | None = None
    #: the file the rows were read from, if any
    path: Path | None = None
    #: the rows as given, for data given in memory (a list, a DataFrame...; None for a file):
    #: what a run directory keeps a copy of (:func:`rows_json`)
    rows: list[Any] | None = None
    #: the data's own column names, in the order first seen (before the column map)
    columns: list[str] = dataclasses.field(default_factory=list)
    #: the sample fields some row gives a value for, read or not: a field that every row
    #: gives wrongly (two names with different values, a context list that is one string)
    #: is still given, and the metrics that read it report those rows instead of vanishing
    given_fields: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.samples)

    def line(self, row: int) -> int | None:
        return self.lines[row] if self.lines is not None else None


def _rows_from_object(data: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        columns = {k: list(v) for k, v in data.items()}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}={len(v)}" for k, v in columns.items())
            raise InvalidDataError(
                [RowProblem(None, None, f"columns have different lengths ({sizes})")]
            )
        n = lengths.pop() if lengths else 0
        for i in range(n):
            yield {k: v[i] for k, v in columns.items()}
        return
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas DataFrame
        yield from data.to_dict(orient="records")
        return
    if hasattr(data, "column_names") and hasattr(data, "to_list"):  # datasets.Dataset
        yield from data.to_list()
        return
    if not isinstance(data, Iterable) or isinstance(data, (str, bytes)):
        raise InvalidDataError(
            [
                RowProblem(
                    None,
                    None,
                    f"cannot read data of type {type(data).__name__}: pass a file path, a list "
                    "of dicts, a dict of lists, a pandas DataFrame or a datasets.Dataset",
                )
            ]
        )
    yield from data


FileRows = tuple[list[Mapping[str, Any] | None], list[RowProblem], list[int] | None]
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet")


def _read_file_rows(path: Path) -> FileRows:
    """The rows of a file, the problems of rows that could not be read, and (for line-based
    files) the 1-based line where each row starts."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix in (".csv", ".tsv"):
        return _read_csv(path, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        require("parquet", "reading Parquet")
        import pandas as pd

        return list(pd.read_parquet(path).to_dict(orient="records")), [], None
    kind = f"unsupported file type {suffix!r}" if suffix else "no file suffix to tell the type"
    raise InvalidDataError(
        [RowProblem(None, None, f"{kind} (use {', '.join(SUPPORTED_SUFFIXES)})")],
        source=str(path),
    )


def _read_jsonl(path: Path) -> FileRows:
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    lines: list[int] = []
    with path.open("rb") as fh:
        for line, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            row = len(rows)
            lines.append(line)
            rows.append(None)
            try:
                # utf-8-sig: exports from Windows tools start with a byte-order mark
                obj = json.loads(raw.decode("utf-8-sig" if line == 1 else "utf-8"))
            except UnicodeDecodeError as e:
                message = f"line is not valid UTF-8 ({e.reason} at byte {e.start})"
            except json.JSONDecodeError as e:
                message = f"line is not valid JSON ({e.msg} at column {e.colno})"
            else:
                if isinstance(obj, dict):
                    rows[row] = obj
                    continue
                message = f"line is a JSON {type(obj).__name__}, expected an object"
            problems.append(RowProblem(row, None, message, line=line))
    return rows, problems, lines


def _read_json(path: Path) -> FileRows:
    try:
        obj = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidDataError(
            [RowProblem(None, None, f"not valid UTF-8 JSON: {e}")], source=str(path)
        ) from e
    if isinstance(obj, dict) and isinstance(obj.get("samples"), list):
        obj = obj["samples"]
    if isinstance(obj, dict):
        return list(_rows_from_object(obj)), [], None
    if not isinstance(obj, list):
        raise InvalidDataError(
            [
                RowProblem(
                    None,
                    None,
                    "expected a list of objects, an object of columns, or {'samples': [...]}",
                )
            ],
            source=str(path),
        )
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    for i, item in enumerate(obj):
        if isinstance(item, dict):
            rows.append(item)
        else:
            problems.append(
                RowProblem(i, None, f"item is a JSON {type(item).__name__}, expected an object")
            )
            rows.append(None)
    return rows, problems, None


def _read_csv(path: Path, *, delimiter: str) -> FileRows:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidDataError(
            [RowProblem(None, None, f"file is not valid UTF-8 ({e.reason} at byte {e.start})")],
            source=str(path),
        ) from e
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    lines: list[int] = []
    while True:
        line = reader.line_num + 1  # where the next record starts
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise InvalidDataError(
                [RowProblem(None, None, f"line {line}: not valid CSV ({e})")], source=str(path)
            ) from e
        if not cells:  # a blank line
            continue
        if header is None:
            header = cells
            continue
        row = len(rows)
        lines.append(line)
        if len(cells) > len(header):
            problems.append(
                RowProblem(
                    row,
                    None,
                    f"row has more cells than the header ({len(cells)} > {len(header)})",
                    line=line,
                )
            )
        # fewer cells than the header: the fields of the missing ones are absent
        named = zip(header, cells, strict=False)
        # an unnamed column is the index pandas' to_csv() writes
        rows.append({key: cell or None for key, cell in named if key != ""})
    return rows, problems, lines


_LIST_CELL_HINT = (
    "a context list in a CSV cell must be a JSON list of strings, e.g. "
    '["first", "second"], or a Python list literal as pandas writes it'
)


def _parse_list_cells(row: dict[str, Any]) -> dict[str, str]:
    """Read the list fields of a CSV row in place (a cell is text); the fields that could not
    be read, with why."""
    bad = {}
    for key, cell in row.items():
        field = LEGACY_ALIASES.get(key, key)
        if isinstance(cell, str) and field == "reference":
            row[key] = _reference_cell(cell)
            continue
        if isinstance(cell, str) and field in ("turns", "reference_tool_calls"):
            try:
                row[key] = json.loads(cell)
            except json.JSONDecodeError as e:
                bad[key] = f"{field} in a CSV cell must be a JSON list of objects ({e.msg})"
            continue
        if not isinstance(cell, str) or field not in LIST_FIELDS:
            continue
        try:
            row[key] = json.loads(cell)
            continue
        except json.JSONDecodeError:
            pass
        try:
            row[key] = _python_literal(cell)
        except ValueError as e:
            bad[key] = f"{_LIST_CELL_HINT} ({e})"
    return bad


def _reference_cell(cell: str) -> str | list[str]:
    """A reference cell of a CSV: several acceptable answers when it holds a JSON list of
    strings (``["48 Hours", "forty-eight time"]``), else the text as it is."""
    if cell.lstrip().startswith("["):
        try:
            value = json.loads(cell)
        except json.JSONDecodeError:
            return cell
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
    return cell


def _python_literal(text: str) -> Any:
    """A Python literal (pandas' `to_csv()` writes a list column as each list's repr), read
    with `ast.literal_eval`: never evaluated as code.

    Refused: string literals side by side, which Python would join into one string (numpy's
    array repr `['a' 'b']` would otherwise read back as `['ab']`)."""
    import ast
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, tokenize.TokenError):
        raise ValueError("not a JSON list nor a Python literal") from None
    kinds = [t.type for t in tokens if t.type not in (tokenize.NL, tokenize.NEWLINE)]
    if any(a == b == tokenize.STRING for a, b in itertools.pairwise(kinds)):
        raise ValueError("items not separated by commas, as in a numpy array's repr")
    return list(value) if isinstance(value, tuple) else value


def load_samples(
    data: Any,
    *,
    column_map: Mapping[str, str] | None = None,
) -> LoadedData:
    """Parse any supported input into Samples, collecting every row's problems.

    `data` may be a path (JSONL/JSON/CSV/TSV/Parquet), a list of dicts, a dict of lists,
    a pandas DataFrame or a Hugging Face `datasets.Dataset`. `column_map` renames the user's
    columns to rageval's (`{"query": "user_input"}`); a name in it that the data or rageval
    does not know is an error.
    """
    problems: list[RowProblem] = []
    lines: list[int] | None = None
    path: Path | None = None
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"data file not found: {path}")
        if path.is_dir():
            raise InvalidDataError([RowProblem(None, None, _directory_message(path))])
        raw_rows, problems, lines = _read_file_rows(path)
        source = str(path)
    else:
        raw_rows = list(_rows_from_object(data))
        source = type(data).__name__
    if not raw_rows:
        raise InvalidDataError([RowProblem(None, None, "the input has no rows")], source=source)
    columns = list(dict.fromkeys(k for r in raw_rows if isinstance(r, Mapping) for k in r))
    if column_map:
        wrong_map = _check_column_map(column_map, set(columns))
        if wrong_map:
            raise InvalidDataError(wrong_map, source=source)
    unreadable = {p.row for p in problems if p.row is not None}
    cells_are_text = path is not None and path.suffix.lower() in (".csv", ".tsv")
    given: set[str] = set()
    samples: list[Sample | None] = []
    for i, raw in enumerate(raw_rows):
        line = lines[i] if lines is not None else None
        if i in unreadable:
            samples.append(None)
            continue
        if isinstance(raw, Sample):  # Sample and Conversation objects are rows as they are
            raw = raw.model_dump(exclude_none=True, exclude_defaults=True)
        if not isinstance(raw, Mapping):
            problems.append(
                RowProblem(i, None, f"row is a {type(raw).__name__}, expected a mapping of fields")
            )
            samples.append(None)
            continue
        sid = None if raw.get("id") is None else str(raw.get("id"))
        row, bad_cells = _normalise_row(raw, column_map)
        given.update(FIELD_ALIASES.get(k, k) for k, v in row.items() if v is not None)
        if cells_are_text:
            bad_cells.update(_parse_list_cells(row))
        for field, message in bad_cells.items():
            problems.append(RowProblem(i, field, message, sid, line=line))
        samples.append(_validated(row, i, line, sid, set(bad_cells), problems))
    _check_duplicate_ids(samples, lines, problems)
    return LoadedData(
        samples,
        problems,
        source,
        lines=lines,
        path=path,
        columns=[str(c) for c in columns],
        given_fields=frozenset(given & set(ROW_FIELDS)),
        rows=raw_rows if path is None else None,
    )


def rows_json(rows: Sequence[Any]) -> str:
    """Rows given in memory as a JSON array (one row a line) that :func:`load_samples` reads
    back as the same samples: an empty cell (None, a pandas NaN) is null, a numpy value its
    list or number, another object what pydantic writes for it in JSON (as the samples' own
    JSON form has it), and a NaN inside a value stays NaN (Python's JSON reads it back)."""

    def jsonable(value: Any) -> Any:
        return to_jsonable_python(value, fallback=_jsonable_fallback)

    def row_json(row: Any) -> str:
        if isinstance(row, Mapping):
            row = {str(k): None if _is_missing(v) else jsonable(v) for k, v in row.items()}
        return json.dumps(jsonable(row), ensure_ascii=False)

    return "[\n" + ",\n".join(map(row_json, rows)) + "\n]\n"


def _jsonable_fallback(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _validated(
    row: dict[str, Any],
    index: int,
    line: int | None,
    sid: str | None,
    bad_cells: set[str],
    problems: list[RowProblem],
) -> Sample | None:
    """The row's Sample (its Conversation, for a row with turns); a field with a problem is
    left out (reported here, or already by the file reader: `bad_cells`), so that it stops
    only the metrics that read it. A problem inside a turn names the turn and its field."""
    bad = set(bad_cells)
    cls = Conversation if is_conversation_row(row) else Sample
    if cls is Conversation and bad & {"turns", "messages"}:
        return None  # no turns: nothing of the conversation can be scored
    try:
        return cls.model_validate({k: v for k, v in row.items() if k not in bad})
    except ValidationError as e:
        for err in e.errors():
            turn, loc = _located(tuple(err["loc"]))
            message = _friendly(err, in_turn=turn is not None)
            problems.append(RowProblem(index, loc, message, sid, line=line, turn=turn))
            bad.add(str(err["loc"][0]) if err["loc"] else "")
    if "" in bad:
        return None
    try:
        return cls.model_validate({k: v for k, v in row.items() if k not in bad})
    except ValidationError:  # a conversation whose turns were all left out
        return None


def _located(loc: tuple[int | str, ...]) -> tuple[int | None, str | None]:
    """Where a validation error is: (the turn, its field) inside a conversation's turns, as
    ``(2, "tool_calls[0].arguments")``; else (None, the row's field: ``contexts.1`` as
    before, ``reference_tool_calls[0].name`` inside a conversation's lists)."""
    if not loc:
        return None, None
    head, rest = str(loc[0]), loc[1:]
    if FIELD_ALIASES.get(head, head) == "turns" and rest and isinstance(rest[0], int):
        return rest[0], _path(rest[1:]) or None
    if head in CONVERSATION_FIELDS:
        return None, head + _path(rest, lead=".")
    return None, ".".join(str(p) for p in loc)


def _path(loc: Sequence[int | str], lead: str = "") -> str:
    """A location inside a value: ``tool_calls[0].arguments``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f"{lead if not out else '.'}{part}"
    return out


def _directory_message(path: Path) -> str:
    hint = (
        f"; it holds a rageval run: continue it with --resume {path}"
        if (path / "manifest.json").exists()
        else ""
    )
    return f"{path} is a directory: DATA must be a file ({', '.join(SUPPORTED_SUFFIXES)}){hint}"


def _friendly(err: Any, *, in_turn: bool = False) -> str:
    msg = str(err.get("msg", "invalid value"))
    value = err.get("input")
    if err.get("type") == "extra_forbidden":
        if in_turn:
            return "unknown field of a turn (put it under the turn's metadata)"
        return "unknown field (rename it with column_map=, or put it under metadata)"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg.removeprefix('Value error, ')} (got {shown})"


def _check_duplicate_ids(
    samples: Sequence[Sample | None], lines: Sequence[int] | None, problems: list[RowProblem]
) -> None:
    seen: dict[str, int] = {}
    for i, s in enumerate(samples):
        if s is None or s.id is None:
            continue
        if s.id in seen:
            first = seen[s.id]
            also = f"line {lines[first]}" if lines is not None else f"row {first}"
            line = lines[i] if lines is not None else None
            problems.append(RowProblem(i, "id", f"duplicate id (also {also})", s.id, line=line))
        else:
            seen[s.id] = i


def sample_ids(samples: Sequence[Sample | None]) -> list[str]:
    """Stable ids: the user's id, else the row number."""
    return [
        s.id if s is not None and s.id is not None else f"row-{i}" for i, s in enumerate(samples)
    ]
