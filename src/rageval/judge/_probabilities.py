"""Probability-weighted verdicts and ratings, read from the token log-probabilities of a reply.

A judge whose endpoint returns log-probabilities (OpenAI, vLLM, llama.cpp's server; not
Anthropic) is asked for them beside the reply, in the same single request: ``logprobs: true``
and ``top_logprobs:`` :data:`TOP_LOGPROBS`. A *choice* of a reply is a leaf of its schema with a
closed set of options -- a boolean (a verdict) or an enum (a rating) -- and each is scored by
the probability of each of its options, not only by the option the model wrote
(:func:`score_reply`):

1. the reply's text is rebuilt from its token texts, so each token has a character span (a
   reply whose tokens do not spell its text is not scored by probability);
2. the reply is scanned as JSON with the position of every value (:func:`value_spans`), and each
   choice's value is found at its path (``("s1", "supported")``, ``("rating",)``);
3. from the token where the value starts, the tokens are walked along the sampled path: every
   alternative among a token's top log-probabilities that, with the text sampled before it in
   the value, spells the start of exactly one option (``true``/``false``; ``4``; a token may
   merge the quote or a space with the word, ``"yes`` or `` true``) adds the probability of
   that path to its option; the walk stops at the token where the sampled text singles out its
   own option, which gets the probability of the sampled path. An alternative that fits
   several options (``1`` of ``1`` and ``10``) or none is left out;
4. the options found are renormalised to sum to 1 (an option absent from the top
   log-probabilities gets 0: its probability was below the last one listed). Where no option
   can be read -- no log-probabilities in the reply, a value not found among the tokens -- the
   choice keeps its sampled value with probability 1, and says why (``sampled-fallback``).

The judge records, per reply, which was used (:class:`ReplyScoring`); a metric reads
:meth:`ReplyScoring.probability` (a verdict's P(true)) and :meth:`ReplyScoring.expected` (a
rating's expected value), or :meth:`ReplyScoring.read_probability` and
:meth:`ReplyScoring.read_expected`, which are None where the value written stands (the metric
then counts that). docs/judge-probabilities.md says the same for users.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rageval.judge._backend import TokenLogprob

__all__ = [
    "ANY_ITEM",
    "NO_LOGPROBS",
    "SAMPLED",
    "SCORINGS",
    "TOP_LOGPROBS",
    "ChoiceScore",
    "ReplyScoring",
    "Scoring",
    "ScoringUsed",
    "choice_leaves",
    "fallback_scoring",
    "forget_logprobs",
    "gives_logprobs",
    "read_stored",
    "remember_no_logprobs",
    "score_reply",
    "stored_reply",
    "value_spans",
]

#: the judge setting: "probabilities" where the endpoint returns log-probabilities, "sampled"
#: never; "auto" asks for them where the backend can return them and uses them where they came
Scoring = Literal["auto", "probabilities", "sampled"]
SCORINGS: tuple[Scoring, ...] = ("auto", "probabilities", "sampled")
#: what one choice (or reply) was scored by
ScoringUsed = Literal["probabilities", "sampled", "sampled-fallback"]

#: alternatives asked for per token: OpenAI's maximum. A choice's options compete with
#: spellings of the same option (" 4", "4") and tokens the schema forbids; 20 leaves room.
TOP_LOGPROBS = 20

Path = tuple[str, ...]
#: the position of an array's item in a path of :func:`choice_leaves` (a reply's choices are
#: at the items' positions, ``("claims", "0", "covered")``, as :func:`value_spans` names them)
ANY_ITEM = "*"

# the standard library's JSON string scanner (its stub does not declare it): the decoded string
# and the index after its closing quote
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_DELIMITERS = frozenset(b" \t\r\n,}]")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass(frozen=True)
class ChoiceScore:
    """One choice of a reply: the value it has there and the probability of each option."""

    path: Path
    #: the option the reply wrote
    sampled: Any
    #: option -> probability, summing to 1; ``{sampled: 1.0}`` unless `used` is "probabilities"
    probabilities: dict[Any, float]
    used: ScoringUsed
    #: why the sampled value stands in (`used` "sampled-fallback")
    why: str | None = None


@dataclass(frozen=True)
class ReplyScoring:
    """How the choices of one reply were scored: "probabilities" when every choice was read
    from the log-probabilities, "sampled" when they were not asked for, "sampled-fallback"
    (with `why`) when they were asked for and some choice could not be read from them."""

    used: ScoringUsed
    why: str | None = None
    choices: dict[Path, ChoiceScore] = field(default_factory=dict)

    def choice(self, *path: str) -> ChoiceScore:
        """The choice at `path` (``"s1", "supported"``); KeyError naming the choices there are."""
        found = self.choices.get(tuple(path))
        if found is None:
            known = ", ".join("/".join(p) for p in self.choices) or "none"
            raise KeyError(f"no choice at {'/'.join(path)!r} in this reply (choices: {known})")
        return found

    def read_distribution(self, *path: str) -> dict[Any, float] | None:
        """Each option's probability at `path` (summing to 1) where they were read from the
        log-probabilities; None where the choice has its sampled value (or this reply has no
        choice there: a reply cached before it was one), so that the metric counts the value
        written."""
        found = self.choices.get(tuple(path))
        if found is None or found.used != "probabilities":
            return None
        return dict(found.probabilities)

    def read_probability(self, *path: str, option: Any = True) -> float | None:
        """P(`option`) at `path` where it was read from the log-probabilities; None where the
        choice has its sampled value (as :meth:`read_distribution`)."""
        found = self.read_distribution(*path)
        return None if found is None else found.get(option, 0.0)

    def read_expected(self, *path: str) -> float | None:
        """The expected value at `path` where it was read from the log-probabilities; None
        where the choice has its sampled value (as :meth:`read_distribution`)."""
        return None if self.read_distribution(*path) is None else self.expected(*path)

    def probability(self, *path: str, option: Any = True) -> float:
        """P(`option`) at `path`: a verdict's probability of being true by default; 1.0 or 0.0
        from the sampled value where the choice was not scored by probability."""
        return self.choice(*path).probabilities.get(option, 0.0)

    def expected(self, *path: str) -> float:
        """The expected value of the numeric choice at `path` (a rating): sum of option times
        its probability; the sampled value where it was not scored by probability."""
        return sum(float(option) * p for option, p in self.choice(*path).probabilities.items())

    def to_json(self) -> dict[str, Any]:
        """The scoring as plain JSON (how the request cache keeps it beside the reply)."""
        return {
            "used": self.used,
            "why": self.why,
            "choices": [
                {
                    "path": list(c.path),
                    "sampled": c.sampled,
                    "probabilities": [[o, p] for o, p in c.probabilities.items()],
                    "used": c.used,
                    "why": c.why,
                }
                for c in self.choices.values()
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplyScoring:
        """The scoring :meth:`to_json` wrote; ValueError when it is not one."""
        try:
            choices = {
                tuple(c["path"]): ChoiceScore(
                    tuple(c["path"]),
                    c["sampled"],
                    {o: float(p) for o, p in c["probabilities"]},
                    c["used"],
                    c["why"],
                )
                for c in data["choices"]
            }
            return cls(data["used"], data["why"], choices)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stored reply scoring: {exc}") from exc


#: why a reply's choices have their sampled values when the endpoint sent no log-probabilities
NO_LOGPROBS = "the endpoint returned no log-probabilities"
#: the scoring of a reply without choices, or of one not asked for log-probabilities
SAMPLED = ReplyScoring("sampled")


# ------------------------------------------------------- what an endpoint gives, stored replies

#: (base URL, model) of endpoints that answered a request for log-probabilities without them:
#: a judge in scoring "auto" stops asking them (for the process, as the modes are remembered)
_NO_LOGPROBS: set[tuple[str, str]] = set()


def gives_logprobs(base_url: str, model: str) -> bool:
    """False once `model` at `base_url` answered a request for log-probabilities without any."""
    return (base_url, model) not in _NO_LOGPROBS


def remember_no_logprobs(base_url: str, model: str) -> None:
    """`model` at `base_url` returns no log-probabilities: "auto" stops asking for them."""
    _NO_LOGPROBS.add((base_url, model))


def forget_logprobs() -> None:
    """Forget what endpoints were found to return (tests; a server replaced at an address)."""
    _NO_LOGPROBS.clear()


def stored_reply(reply_json: str, scoring: ReplyScoring) -> str:
    """What the request cache keeps of a reply scored by probability: the reply's JSON and its
    scoring together (the same reply alone would lose what the log-probabilities said)."""
    return json.dumps(
        {"reply": json.loads(reply_json), "scoring": scoring.to_json()},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def read_stored(text: str) -> tuple[str, ReplyScoring] | None:
    """The reply's JSON and its scoring from :func:`stored_reply`'s text; None when it is not
    one (then the cached entry is not used)."""
    try:
        data = json.loads(text)
        reply = data["reply"]
        scoring = ReplyScoring.from_json(data["scoring"])
    except (ValueError, KeyError, TypeError):
        return None
    return json.dumps(reply, ensure_ascii=False), scoring


# ------------------------------------------------------------------ the schema's choices


@functools.lru_cache(maxsize=4096)
def choice_leaves(schema_json: str) -> dict[Path, tuple[Any, ...]]:
    """The choices of a response model's JSON schema: each path to a boolean or to an enum of
    plain values, with its options (in the schema's order). Objects are followed through
    their properties and ``$ref``s to ``$defs``, arrays through their items (the path holds
    :data:`ANY_ITEM` for the position: every item of the reply has the choice); unions are
    not."""
    schema = json.loads(schema_json)
    defs = schema.get("$defs", {})
    out: dict[Path, tuple[Any, ...]] = {}

    def walk(node: Any, path: Path, depth: int) -> None:
        if not isinstance(node, dict) or depth > 16:
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            walk(defs.get(ref.removeprefix("#/$defs/")), path, depth + 1)
            return
        enum = node.get("enum")
        if isinstance(enum, list) and enum and all(_plain(v) for v in enum):
            out[path] = tuple(enum)
        elif node.get("type") == "boolean":
            out[path] = (True, False)
        for key, sub in (node.get("properties") or {}).items():
            walk(sub, (*path, key), depth + 1)
        if node.get("type") == "array":
            walk(node.get("items"), (*path, ANY_ITEM), depth + 1)

    walk(schema, (), 0)
    return out


def _plain(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str)) and not (
        isinstance(value, float) and not math.isfinite(value)
    )


# --------------------------------------------------------------- scoring one reply


def fallback_scoring(
    obj: Mapping[str, Any], leaves: Mapping[Path, Sequence[Any]], used: ScoringUsed, why: str | None
) -> ReplyScoring:
    """Every choice of `obj` at its sampled value, probability 1 (`used`: "sampled" when
    log-probabilities were not asked for or "auto" found none, "sampled-fallback" when
    "probabilities" asked and none came; `why` says why)."""
    choices = {
        path: ChoiceScore(path, value, {value: 1.0}, used, why)
        for path, (value, _) in _values_at(obj, leaves).items()
    }
    return ReplyScoring(used if choices else "sampled", why if choices else None, choices)


def score_reply(
    text: str,
    obj: Mapping[str, Any],
    tokens: Sequence[TokenLogprob] | None,
    leaves: Mapping[Path, Sequence[Any]],
) -> ReplyScoring:
    """The choices of the reply `obj` (parsed from `text`) scored from `tokens`, the reply's
    tokens with their top log-probabilities (None: the endpoint returned none); see the module
    docstring for how."""
    if not leaves:
        return ReplyScoring("sampled")
    if not tokens:
        return fallback_scoring(obj, leaves, "sampled-fallback", NO_LOGPROBS)
    # in bytes: a token may hold part of a character (its text then lacks that part)
    pieces = [t.raw if t.raw is not None else t.token.encode() for t in tokens]
    data = b"".join(pieces)
    # the content may come without the whitespace or the code fence the model wrote around
    # the object (llama.cpp trims what follows it, and leaves out a ```json fence): offsets in
    # the text shift by what was left out before it
    text_data = text.encode()
    body = text_data.strip()
    at = data.find(body)
    if at < 0 or not _only_wrapping(data[:at], data[at + len(body) :]):
        return fallback_scoring(
            obj, leaves, "sampled-fallback", "the reply's tokens do not spell its text"
        )
    shift = at - (len(text_data) - len(text_data.lstrip()))
    spans = value_spans(text)
    if spans is None:
        return fallback_scoring(
            obj, leaves, "sampled-fallback", "the reply's JSON object was not found in its text"
        )
    starts = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
    choices: dict[Path, ChoiceScore] = {}
    for path, (sampled, options) in _values_at(obj, leaves).items():
        span = spans.get(path)
        found = None
        if span is not None:
            start = len(text[: span[0]].encode()) + shift
            found = _distribution(data, tokens, pieces, starts, start, options)
        if isinstance(found, dict):
            choices[path] = ChoiceScore(path, sampled, found, "probabilities")
        else:
            why = found or "the value was not found in the reply's text"
            choices[path] = ChoiceScore(path, sampled, {sampled: 1.0}, "sampled-fallback", why)
    fallbacks = [c for c in choices.values() if c.used != "probabilities"]
    if not fallbacks:
        return ReplyScoring("probabilities", None, choices)
    first = fallbacks[0]
    why = f"{len(fallbacks)} of {len(choices)} choices: {'/'.join(first.path)}: {first.why}"
    return ReplyScoring("sampled-fallback", why, choices)


def _only_wrapping(before: bytes, after: bytes) -> bool:
    """Whether the tokens' bytes around the content are whitespace and a markdown code fence
    at most: what a server may leave out of a reply's content, not text the model wrote."""
    return before.strip() in _FENCE_OPENINGS and after.strip() in (b"", b"```")


#: what may come before the object in a reply's tokens and not in its content
_FENCE_OPENINGS = (b"", b"```", b"```json", b"```JSON")


def _values_at(
    obj: Mapping[str, Any], leaves: Mapping[Path, Sequence[Any]]
) -> dict[Path, tuple[Any, Sequence[Any]]]:
    """The value of `obj` at each leaf path it has, with the leaf's options; a leaf inside an
    array is at each of its items' positions."""
    out: dict[Path, tuple[Any, Sequence[Any]]] = {}
    for leaf, options in leaves.items():
        found: list[tuple[Path, Any]] = [((), obj)]
        for key in leaf:
            deeper: list[tuple[Path, Any]] = []
            for at, node in found:
                if key == ANY_ITEM and isinstance(node, list):
                    deeper += [((*at, str(i)), item) for i, item in enumerate(node)]
                elif isinstance(node, Mapping) and key in node:
                    deeper.append(((*at, key), node[key]))
            found = deeper
        out.update((at, (node, options)) for at, node in found if _plain(node))
    return out


def _distribution(
    data: bytes,
    tokens: Sequence[TokenLogprob],
    pieces: Sequence[bytes],
    starts: Sequence[int],
    start: int,
    options: Sequence[Any],
) -> dict[Any, float] | str:
    """The probability of each option of the value whose first byte is `start` in the reply
    `data` (whose tokens are `pieces`, each at its byte offset in `starts`), renormalised over
    the options found; or why it cannot be read."""
    spelled = {option: json.dumps(option, ensure_ascii=False).encode() for option in options}
    # the token holding the value's first byte
    index = next((i for i in range(len(pieces)) if starts[i] + len(pieces[i]) > start), None)
    if index is None:
        return "the value was not found among the reply's tokens"
    # from the whitespace before the value, where there is a token of it alone: a server that
    # returns the model's own distribution (llama.cpp does, before its grammar) has the
    # options there too, as paths that leave the space out
    while (
        index > 0
        and not pieces[index - 1].strip()
        and starts[index - 1] + len(pieces[index - 1]) <= start
    ):
        index -= 1
    mass: dict[Any, float] = {}
    path_logprob = 0.0  # of the sampled tokens from the value's start up to this one
    for i in range(index, len(tokens)):
        token = tokens[i]
        # what the token holds before the value (":", " "); an alternative may space it
        # differently (" 4" or "4" after ":"), which spells the same value
        lead = data[starts[i] : start] if starts[i] < start else b""
        core = lead.rstrip()
        before = data[start : starts[i]] if starts[i] > start else b""
        for text, logprob in token.top:
            alternative = text.encode()
            if text == token.token or not alternative.startswith(core):
                continue
            rest = alternative[len(core) :]
            fits = _fitting(before + rest if before else rest.lstrip(), spelled)
            if len(fits) == 1:
                mass[fits[0]] = mass.get(fits[0], 0.0) + math.exp(path_logprob + logprob)
        path_logprob += token.logprob
        fits = _fitting(before + pieces[i][len(lead) :], spelled)
        if not fits:
            return "the sampled tokens spell none of the options"
        if len(fits) == 1:
            mass[fits[0]] = mass.get(fits[0], 0.0) + math.exp(path_logprob)
            total = sum(mass.values())
            if not total > 0.0:
                return "the options found have no probability"
            return {option: p / total for option, p in mass.items()}
    return "the sampled tokens do not single out one option"


def _fitting(prefix: bytes, spelled: Mapping[Any, bytes]) -> list[Any]:
    """The options whose JSON text `prefix` begins (or which `prefix` spells whole, then ends
    the value)."""
    if not prefix:
        return list(spelled)
    out = []
    for option, text in spelled.items():
        if text.startswith(prefix) or (
            prefix.startswith(text)
            and (len(prefix) == len(text) or prefix[len(text)] in _DELIMITERS)
        ):
            out.append(option)
    return out


# ------------------------------------------------------------- where the values are


def value_spans(text: str) -> dict[Path, tuple[int, int]] | None:
    """The character span of every plain value (string, number, true/false/null) of the first
    JSON object in `text`, by its path of keys (array positions as their decimal text); None
    when no object parses from the first ``{``."""
    begin = text.find("{")
    if begin < 0:
        return None
    spans: dict[Path, tuple[int, int]] = {}
    try:
        _scan(text, begin, (), spans, 0)
    except (ValueError, IndexError):
        return None
    return spans


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _scan(text: str, i: int, path: Path, spans: dict[Path, tuple[int, int]], depth: int) -> int:
    """Scan the JSON value at `i` (after whitespace), recording plain values' spans; the index
    after it."""
    if depth > 64:
        raise ValueError("nested too deep")
    i = _skip(text, i)
    char = text[i]
    if char == "{":
        i = _skip(text, i + 1)
        if text[i] == "}":
            return i + 1
        while True:
            if text[i] != '"':
                raise ValueError("expected a key")
            key, i = _scanstring(text, i + 1)
            i = _skip(text, i)
            if text[i] != ":":
                raise ValueError("expected ':'")
            i = _skip(text, _scan(text, i + 1, (*path, key), spans, depth + 1))
            if text[i] == "}":
                return i + 1
            if text[i] != ",":
                raise ValueError("expected ',' or '}'")
            i = _skip(text, i + 1)
    if char == "[":
        i = _skip(text, i + 1)
        if text[i] == "]":
            return i + 1
        position = 0
        while True:
            i = _skip(text, _scan(text, i, (*path, str(position)), spans, depth + 1))
            position += 1
            if text[i] == "]":
                return i + 1
            if text[i] != ",":
                raise ValueError("expected ',' or ']'")
            i += 1
    if char == '"':
        _, end = _scanstring(text, i + 1)
    elif (number := _NUMBER.match(text, i)) is not None:
        end = number.end()
    else:
        word = next((w for w in _LITERALS if text.startswith(w, i)), None)
        if word is None:
            raise ValueError(f"unexpected {char!r}")
        end = i + len(word)
    spans[path] = (i, end)
    return end
