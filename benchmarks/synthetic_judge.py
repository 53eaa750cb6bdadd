"""A deterministic stand-in judge that answers both rageval's and ragas' prompts plausibly.

Use it as the ``FakeOpenAI`` handler for benchmarks, so that every evaluation tool does its
full work (statement extraction, verdicts per item, ratings) against a judge that never fails
(from this directory, or with it on ``PYTHONPATH``)::

    python -m rageval.testing.serve --handler synthetic_judge:handle

It is benchmark tooling, not part of the installed package; rageval's tests use it too (pytest
puts this directory on the path: ``pythonpath`` in pyproject.toml).

What it answers:

* rageval's structured requests (``response_format`` JSON schema or a forced tool, or the
  schema appended to the system message in JSON mode): an instance of the schema built from
  the tagged blocks of the user message. A key named like a numbered item (``"s3"`` for the
  line ``[s3] text``) gets the verdict on that item; statements are the 2–4 sentences of the
  tagged text; ``reference_statements`` the sentences of ``<reference>``, each ruled on
  against the numbered items; ``question`` is a question made from the answer; a ``rating`` is
  on the scale the prompt states (``{"rating": 0|1|2}``); an agent goal's ``user_goal`` and
  ``end_state`` are the user's first and the assistant's last text in ``<conversation>``, and
  ``achieved`` is whether the end state covers the desired outcome (the verdict rule below);
  a conversation's ``intentions`` are its user messages, a user message's ``facts`` its
  sentences.
* ragas 0.4's ``PydanticPrompt`` prompts (instruction, output JSON schema, examples, then
  ``input: {json}``): the JSON its parser expects for each output model it uses, covering the
  statements and contexts of the input, so ragas never takes its "fix output" path.
* ragas' ``nv_*`` metrics (plain-text templates): a bare rating on their scale.

How it decides: a verdict on an item (statement, context) is "supported" when one unit of the
evidence (a context, a reference statement) contains at least 80% of the item's content words,
or, for a long item such as a context, when the item contains 80% of the evidence's words —
the same rule for both tools. Ratings are drawn from a hash of the prompt, skewed towards the
top of the scale. The reply depends only on the request, so re-runs are identical.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rageval.testing.schema import schema_instance
from rageval.testing.server import RecordedRequest, Reply

__all__ = ["answer", "classify", "handle", "sentences", "supported"]

_BLOCK = re.compile(r"<([A-Za-z_]+)>\n(.*?)\n</\1>", re.DOTALL)
_NUMBERED_LINE = re.compile(r"^\[([a-z]?\d+)\] (.*)$", re.MULTILINE)
_FIRST_ITEM = re.compile(r"^\[[a-z]?1\] ")
_ITEM_KEY = re.compile(r"^[a-z]\d+$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+")
_RATING_SCALE = re.compile(r'"rating":\s*(\d+(?:\s*\|\s*\d+)+)')
_HOW_MANY = re.compile(r"\bexactly (\d+|one)\b", re.IGNORECASE)
_RAGAS_TITLE = re.compile(r'"title": "(\w+)", "type": "object"\}Do not use single quotes')
_SCHEMA_MARK = "JSON Schema:\n"
_RAGAS_INPUT_MARK = "\ninput: "
_RAGAS_PROMPT_MARK = "Now perform the same with the following input"
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "as",
        "about",
        "every",
        "each",
        "some",
        "any",
        "all",
        "there",
        "their",
        "they",
        "he",
        "she",
        "his",
        "her",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "how",
        "also",
        "than",
        "then",
        "so",
        "not",
        "no",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
    ]
)
_SUPPORT_THRESHOLD = 0.8
_QUESTION_TAGS = frozenset({"question", "query"})
_NV_TEMPLATES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("Say 4, if User Answer", "ragas:nv_accuracy", (0, 2, 4)),
    ("I will rate the User Answer", "ragas:nv_accuracy", (0, 2, 4)),
    ("the Relevance score is", "ragas:nv_context_relevance", (0, 1, 2)),
    ("the Groundedness score is", "ragas:nv_groundedness", (0, 1, 2)),
)
_json_decoder = json.JSONDecoder()


# ------------------------------------------------------------------------- judging text
def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower())) - _STOPWORDS


def _covered(item: frozenset[str], units: Iterable[frozenset[str]]) -> bool:
    if not item:
        return False
    for unit in units:
        if unit and len(item & unit) / min(len(item), len(unit)) >= _SUPPORT_THRESHOLD:
            return True
    return False


def supported(item: str, evidence: Iterable[str]) -> bool:
    """True when one evidence unit covers the item's content words (or, for a long item, the
    item covers the unit's): the verdict rule of this judge, for every metric and tool."""
    return _covered(_words(item), (_words(unit) for unit in evidence))


def sentences(text: str, limit: int = 4) -> list[str]:
    """The text's sentences (at most `limit`): this judge's statement extraction."""
    found = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    return found[:limit]


def _seed(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _rating(scale: Sequence[int], seed: int) -> int:
    """Top of the scale 60% of the time, the middle 30%, the bottom 10%."""
    ordered = sorted(scale)
    roll = seed % 10
    if roll < 6:
        return ordered[-1]
    if roll < 9:
        return ordered[len(ordered) // 2]
    return ordered[0]


def _questions(text: str, n: int) -> list[str]:
    found = sentences(text) or [text.strip() or "the topic"]
    out = []
    for i in range(n):
        claim = found[i % len(found)].rstrip(".!?")
        out.append(f"Is it true that {claim[:1].lower()}{claim[1:]}?")
    return out


#: the agent goal outcome's fields, and whose words this judge takes for each
_OUTCOME_SPEAKERS = {"user_goal": "user", "end_state": "assistant"}


def _said(conversation: str, role: str) -> list[str]:
    """The texts `role` says in a conversation as rageval's transcript shows it (``user:
    …`` paragraphs; an assistant's tool calls on lines of their own after its text)."""
    head = f"{role}: "
    out = []
    for part in conversation.split("\n\n"):
        if part.startswith(head):
            text = part[len(head) :].split("\n[calls ", 1)[0]
            if text and not text.startswith("[calls "):
                out.append(text)
    return out


def _reason(ok: bool) -> str:
    return "The evidence states this." if ok else "The evidence does not state this."


# ------------------------------------------------------------------------- classifying
def _user_text(req: RecordedRequest) -> str:
    """The first user message: the prompt (later ones are re-asks)."""
    for message in req.messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
    return ""


def _system_text(req: RecordedRequest) -> str:
    for message in req.messages:
        if isinstance(message, dict) and message.get("role") == "system":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _schema_name(req: RecordedRequest) -> str:
    if req.tools:
        return req.tool_name or "reply"
    fmt = req.response_format or {}
    name = fmt.get("json_schema", {}).get("name")
    return name if isinstance(name, str) else "reply"


def classify(req: RecordedRequest) -> str:
    """A short name for the kind of prompt, e.g. ``rageval:FaithfulnessVerdicts``,
    ``ragas:NLIStatementOutput``, ``ragas:fix_output``, ``ragas:nv_accuracy``, ``unknown``."""
    if req.schema is not None:
        return f"rageval:{_schema_name(req)}"
    text = _user_text(req)
    if _RAGAS_PROMPT_MARK in text:
        match = _RAGAS_TITLE.search(text)
        title = match.group(1) if match else "unknown"
        return "ragas:fix_output" if title == "StringIO" else f"ragas:{title}"
    if _SCHEMA_MARK in _system_text(req):
        return "rageval-json:reply"
    for marker, kind, _ in _NV_TEMPLATES:
        if marker in text:
            return kind
    return "unknown"


def handle(req: RecordedRequest) -> Reply:
    """The ``FakeOpenAI`` handler."""
    return answer(classify(req), req)


def answer(kind: str, req: RecordedRequest) -> Reply:
    """The reply for a request already classified as `kind` (see :func:`classify`)."""
    family, _, name = kind.partition(":")
    text = _user_text(req)
    if family == "rageval" and req.schema is not None:
        return Reply.json(_Structured(req.schema, text).build())
    if family == "rageval-json":
        schema = _embedded_schema(_system_text(req))
        if schema is not None:
            return Reply.text(json.dumps(_Structured(schema, text).build()))
    if family == "ragas":
        for _, nv_kind, scale in _NV_TEMPLATES:
            if kind == nv_kind:
                return Reply.text(str(_rating(scale, _seed(text))))
        return Reply.text(json.dumps(_ragas_reply(name, text)))
    return Reply.text("ok")


def _embedded_schema(text: str) -> dict[str, Any] | None:
    start = text.find(_SCHEMA_MARK)
    if start < 0:
        return None
    try:
        value, _ = _json_decoder.raw_decode(text, start + len(_SCHEMA_MARK))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------- rageval
class _Structured:
    """An instance of a rageval response schema, filled from the prompt's tagged blocks."""

    def __init__(self, schema: dict[str, Any], prompt: str) -> None:
        self.root = schema
        self.prompt = prompt
        self.seed = _seed(prompt)
        self.blocks = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(prompt)]
        #: numbered blocks: tag -> [(id, text)]
        self.numbered = {
            tag: _NUMBERED_LINE.findall(body)
            for tag, body in self.blocks
            if _FIRST_ITEM.match(body)
        }
        self.items = {
            key: (tag, text) for tag, found in self.numbered.items() for key, text in found
        }

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target[part]
            return target if isinstance(target, dict) else {}
        for key in ("anyOf", "oneOf"):
            options = node.get(key)
            if isinstance(options, list):
                for option in options:
                    if isinstance(option, dict) and option.get("type") != "null":
                        return self.resolve(option)
        return node

    def build(self) -> dict[str, Any]:
        props: dict[str, Any] = self.root.get("properties", {})
        out: dict[str, Any] = {}
        for name, sub in props.items():
            node = self.resolve(sub)
            if _ITEM_KEY.match(name) and name in self.items:
                out[name] = self._verdict(node, *self.items[name])
            elif self._ruled_list(node) is not None:
                out[name] = self._ruled_statements(name, node)
            else:
                out[name] = self._value(name, node)
        return out

    def _fill(self, fields: dict[str, Any], ok: bool, text: str) -> dict[str, Any]:
        item: dict[str, Any] = {}
        for field, sub in fields.items():
            leaf = self.resolve(sub)
            if leaf.get("type") == "boolean":
                item[field] = ok
            elif leaf.get("type") == "string":
                item[field] = text if field == "statement" else _reason(ok)
            else:
                item[field] = self._value(field, leaf)
        return item

    def _verdict(self, node: dict[str, Any], tag: str, text: str) -> dict[str, Any]:
        evidence = [_words(unit) for unit in self._evidence(tag)]
        return self._fill(node.get("properties", {}), _covered(_words(text), evidence), text)

    def _ruled_list(self, node: dict[str, Any]) -> dict[str, Any] | None:
        """The item schema of an array of {statement, reason, <bool>} objects, else None."""
        if node.get("type") != "array" or not isinstance(node.get("items"), dict):
            return None
        items = self.resolve(node["items"])
        fields = items.get("properties", {})
        kinds = {self.resolve(f).get("type") for f in fields.values()}
        return items if "statement" in fields and "boolean" in kinds else None

    def _ruled_statements(self, name: str, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The sentences of the block named like the list (``reference_statements`` →
        ``<reference>``), each ruled on against the numbered items."""
        items = self._ruled_list(node)
        assert items is not None
        source = name.split("_")[0]
        text = dict(self.blocks).get(source, "")
        units = [_words(t) for found in self.numbered.values() for _, t in found]
        return [
            self._fill(items.get("properties", {}), _covered(_words(sentence), units), sentence)
            for sentence in sentences(text, limit=32)
        ]

    def _evidence(self, tag: str) -> list[str]:
        units: list[str] = []
        for name, body in self.blocks:
            if name == tag or name in _QUESTION_TAGS:
                continue
            numbered = self.numbered.get(name)
            units.extend([t for _, t in numbered] if numbered is not None else [body])
        return units

    def _text_for(self, name: str) -> str:
        tags = dict(self.blocks)
        for candidate in (name, "answer", "text", "response"):
            if candidate in tags:
                return tags[candidate]
        return self.blocks[-1][1] if self.blocks else self.prompt

    def _value(self, name: str, node: dict[str, Any]) -> Any:
        kind = node.get("type")
        if name == "noncommittal":  # answer_relevancy: 1/0 (a boolean in older rageval)
            flag = "don't know" in self._text_for("answer").lower()
            return flag if kind == "boolean" else int(flag)
        if kind == "array" and self.resolve(node.get("items", {})).get("type") == "string":
            if name == "intentions":  # conversation completeness: one per user message
                return _said(dict(self.blocks).get("conversation", ""), "user")
            return sentences(self._text_for(name))
        if kind == "boolean":
            if name == "about_user":  # knowledge retention: a user message's sentences are facts
                return True
            if name == "achieved":  # agent goal: the end state covers the desired outcome
                tags = dict(self.blocks)
                return supported(tags.get("desired_outcome", ""), [tags.get("end_state", "")])
            return self.seed % 2 == 0
        if kind in ("number", "integer") or "enum" in node:
            return self._number(name, node)
        if kind == "string":
            if name == "question":
                return _questions(self._text_for("answer"), 1)[0]
            if name in _OUTCOME_SPEAKERS:  # agent goal: the first user / last assistant text
                said = _said(dict(self.blocks).get("conversation", ""), _OUTCOME_SPEAKERS[name])
                return (said[-1] if name == "end_state" else said[0]) if said else ""
            return "Judged from the tagged material."
        return schema_instance({**node, "$defs": self.root.get("$defs", {})})

    def _number(self, name: str, node: dict[str, Any]) -> Any:
        match = _RATING_SCALE.search(self.prompt) if name == "rating" else None
        if match is not None:
            return _rating([int(v) for v in match.group(1).split("|")], self.seed)
        if "enum" in node:
            return _rating(node["enum"], self.seed)
        low = int(node.get("minimum", 0))
        high = int(node.get("maximum", low + 1))
        return _rating(range(low, high + 1), self.seed)


# ------------------------------------------------------------------------- ragas
def _ragas_input(prompt: str) -> dict[str, Any]:
    start = prompt.rfind(_RAGAS_INPUT_MARK)
    if start < 0:
        return {}
    try:
        value, _ = _json_decoder.raw_decode(prompt, start + len(_RAGAS_INPUT_MARK))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _word_sets(context: str) -> list[frozenset[str]]:
    """ragas joins the contexts with newlines: one evidence unit per line."""
    return [_words(line) for line in context.split("\n") if line.strip()]


def _ragas_statements(data: dict[str, Any]) -> dict[str, Any]:
    return {"statements": sentences(str(data.get("answer", "")))}


def _ragas_nli(data: dict[str, Any]) -> dict[str, Any]:
    units = _word_sets(str(data.get("context", "")))
    out = []
    for statement in data.get("statements", []):
        ok = _covered(_words(str(statement)), units)
        out.append({"statement": statement, "reason": _reason(ok), "verdict": int(ok)})
    return {"statements": out}


def _ragas_correctness(data: dict[str, Any]) -> dict[str, Any]:
    answer = [str(s) for s in data.get("answer", [])]
    truth = [str(s) for s in data.get("ground_truth", [])]
    answer_words = [_words(s) for s in answer]
    truth_words = [_words(s) for s in truth]
    tp: list[dict[str, str]] = []
    fp: list[dict[str, str]] = []
    fn: list[dict[str, str]] = []
    for statement, words in zip(answer, answer_words, strict=True):
        ok = _covered(words, truth_words)
        (tp if ok else fp).append({"statement": statement, "reason": _reason(ok)})
    for statement, words in zip(truth, truth_words, strict=True):
        if not _covered(words, answer_words):
            fn.append({"statement": statement, "reason": "The answer does not state this."})
    return {"TP": tp, "FP": fp, "FN": fn}


def _ragas_precision(data: dict[str, Any]) -> dict[str, Any]:
    ok = supported(str(data.get("context", "")), [str(data.get("answer", ""))])
    return {"reason": _reason(ok), "verdict": int(ok)}


def _ragas_recall(data: dict[str, Any]) -> dict[str, Any]:
    units = _word_sets(str(data.get("context", "")))
    out = []
    for statement in sentences(str(data.get("answer", "")), limit=32):
        ok = _covered(_words(statement), units)
        out.append({"statement": statement, "reason": _reason(ok), "attributed": int(ok)})
    return {"classifications": out}


def _ragas_relevance(data: dict[str, Any]) -> dict[str, Any]:
    response = str(data.get("response", ""))
    return {
        "question": _questions(response, 1)[0],
        "noncommittal": int("don't know" in response.lower()),
    }


def _ragas_fix(data: dict[str, Any]) -> dict[str, Any]:
    return {"text": str(data.get("output_string", ""))}


_RAGAS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "StatementGeneratorOutput": _ragas_statements,
    "NLIStatementOutput": _ragas_nli,
    "ClassificationWithReason": _ragas_correctness,
    "Verification": _ragas_precision,
    "ContextRecallClassifications": _ragas_recall,
    "ResponseRelevanceOutput": _ragas_relevance,
    "fix_output": _ragas_fix,
}


def _ragas_reply(name: str, prompt: str) -> Any:
    build = _RAGAS.get(name)
    if build is not None:
        return build(_ragas_input(prompt))
    schema = _embedded_schema(prompt)
    return schema_instance(schema) if schema is not None else {}
