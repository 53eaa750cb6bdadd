"""The row models: :class:`Sample` (a single-turn row) and :class:`Conversation` (turns,
tool calls, references), their field names and aliases, and the problems a row can have
(:class:`RowProblem`, :class:`InvalidDataError`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

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
#: the retrieval fields scored on ids, without a judge (docs/retrieval.md): the ranked ids
#: the retriever returned, and the relevant ids (a list) or every judged id's grade (a mapping)
ID_FIELDS = ("retrieved_context_ids", "reference_context_ids")
SAMPLE_FIELDS = (*TEXT_FIELDS, *LIST_FIELDS, *ID_FIELDS)
#: the fields of a conversation row (:class:`Conversation`); a row is a conversation when it
#: has `turns` (or `messages`, OpenAI's and ragas' name for them)
CONVERSATION_FIELDS = ("turns", "reference_tool_calls", "reference_goal", "reference_topics")
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
            f"{f' ({counted} counted from 0)' if counted else ''}:"
        )
        lines = [str(p) for p in self.problems[:20]]
        more = len(self.problems) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        super().__init__(head + ("\n  " if len(lines) > 1 else " ") + "\n  ".join(lines))


#: a field inside a conversation's turn, as a metric names it: ``turns[3].content``
_TURN_FIELD = re.compile(r"turns\[(\d+)\]\.(.+)")


def _quoted(name: str | None) -> str | None:
    return None if name is None else repr(name)


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
        # the file's line where there is one, else the row; names quoted, numbers not
        shown: tuple[tuple[str, object], ...] = (
            ("line", self.line) if self.line is not None else ("row", self.row),
            ("id", _quoted(self.sample_id)),
            ("turn", self.turn),
            ("field", _quoted(self.field)),
            ("metric", _quoted(self.metric)),
        )
        where = [f"{label} {value}" for label, value in shown if value is not None]
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
    #: the ids of the retrieved contexts, best first (ragas' name); an id given twice counts
    #: at its first rank (docs/retrieval.md)
    retrieved_context_ids: list[str] | None = None
    #: the relevant ids (each of grade 1), or each judged id's relevance grade, an integer as
    #: in TREC qrels (grade 1 or more is relevant; nDCG's gain is the grade)
    reference_context_ids: list[str] | dict[str, int] | None = None
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
        return _list_input(v, "a list of strings")

    @field_validator("retrieved_context_ids", mode="before")
    @classmethod
    def _ranked_ids(cls, v: Any) -> Any:
        v = _list_input(v, "a list of ids, best first")
        return None if v is None else [_context_id(i, f"item {n}") for n, i in enumerate(v)]

    @field_validator("reference_context_ids", mode="before")
    @classmethod
    def _judged_ids(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {_context_id(i, "a key"): _grade(i, g) for i, g in v.items()}
        v = _list_input(v, "a list of relevant ids, or a mapping of id to grade")
        return None if v is None else [_context_id(i, f"item {n}") for n, i in enumerate(v)]

    @property
    def context_grades(self) -> dict[str, int]:
        """Each judged context id's relevance grade: 1 for every id of a list of relevant
        ids ({} when the sample has none)."""
        v = self.reference_context_ids
        if v is None:
            return {}
        return dict(v) if isinstance(v, dict) else dict.fromkeys(v, 1)

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

#: who speaks a turn: the user, the assistant (the system under test), a tool answering one
#: of the assistant's calls, or the instructions the assistant was given (OpenAI's ``system``
#: message, ``developer`` in its newer models' format), which the judge reads in the
#: transcript and which no metric scores as a reply
Role = Literal["system", "developer", "user", "assistant", "tool"]


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
        return _list_input(value)

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
    (`reference_goal`), and the topics the assistant is meant to keep to
    (`reference_topics`); a reference answer per turn goes on the turn. Loaded like
    :class:`Sample` (a row is a conversation when it has `turns` or `messages`).

    A Conversation is a :class:`Sample` whose single-turn fields are absent (giving one is an
    error), so every part of a run that carries rows carries it as it is; a metric that scores
    single-turn samples refuses it before any request (:meth:`rageval.metrics.Metric.input_problems`).
    """

    turns: list[Turn] = Field(validation_alias=AliasChoices("turns", "messages"))
    reference_tool_calls: list[ToolCall] | None = None
    reference_goal: str | None = None
    #: the topics the assistant is meant to keep to (topic_adherence)
    reference_topics: list[str] | None = None

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

    @field_validator("turns", "reference_tool_calls", "reference_topics", mode="before")
    @classmethod
    def _turn_list(cls, value: Any) -> Any:
        return _list_input(value)

    @field_validator("turns")
    @classmethod
    def _some_turns(cls, turns: list[Turn]) -> list[Turn]:
        if not turns:
            raise ValueError("a conversation needs at least one turn")
        return turns

    @property
    def opening(self) -> str:
        """The user's first message ('' when there is none): what stands for the conversation
        in a list of rows, as in the report."""
        return next((t.content or "" for t in self.turns if t.role == "user"), "")

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


def _list_input(value: Any, expected: str = "a list") -> Any:
    """A list field's input: a single string refused (it is not a list of one), a tuple or a
    numpy array (pandas, Parquet) as a list."""
    if isinstance(value, str):
        text = value.strip()
        written = text.startswith("[") and text.endswith("]")
        raise ValueError(
            f"must be {expected}, got a single string"
            + (
                " that is a list written as text, as a CSV file holds one (pandas.read_csv "
                "keeps it so): give rageval the CSV file itself, or parse the column first "
                "(ast.literal_eval)"
                if written
                else ""
            )
        )
    if isinstance(value, tuple):
        return list(value)
    if value is not None and not isinstance(value, list) and hasattr(value, "tolist"):
        return value.tolist()
    return value


def _context_id(value: Any, where: str) -> str:
    """A context id as text: an integer id (ragas accepts them) as its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} is {value!r}: a context id is a non-blank text or an integer")
    return value


def _grade(context_id: Any, value: Any) -> int:
    """A relevance grade: an integer (a whole float, as pandas reads one, counts as it)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(
            f"the grade of id {context_id!r} is {value!r}: a grade is an integer, as in TREC "
            "qrels (0 not relevant, 1 or more relevant)"
        )
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
