"""The dry run's token counts: the judge model's own tokenizer where it is known offline, else
the documented approximation.

A model of OpenAI's families (:data:`MODEL_ENCODINGS`) is counted with its tiktoken encoding
when tiktoken is installed (``rageval[tokens]``) AND the encoding's vocabulary file is already
in tiktoken's cache (``rageval._env.tiktoken_cache_dir``: the file named by the sha1 of the
encoding's URL) with the content tiktoken expects of it (its sha256). Nothing is ever
downloaded: the file is checked before tiktoken is asked, since tiktoken fetches a missing or
damaged file from the internet. Otherwise -- and for every other model -- a request counts as
one token per :data:`CHARS_PER_TOKEN` characters of what it sends.

With the tokenizer a chat request counts as OpenAI bills one: 3 tokens per message for the
chat format's delimiters, its role and its content, 3 for the start of the reply, and the
structured-output arguments (the JSON schema in ``response_format``, or the tool definition)
as the tokens of their JSON text, as sent; OpenAI does not document how it renders the schema
into the prompt (benchmarks/RESULTS.md measures what that choice weighs).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval import _env
from rageval._extras import require
from rageval.errors import MissingExtraError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "APPROXIMATION",
    "CHARS_PER_TOKEN",
    "ENCODING_FILES",
    "MODEL_ENCODINGS",
    "Counters",
    "EncodingFile",
    "TokenCounter",
    "counter_for",
    "encoding_of",
]

#: the approximation's characters per token (English: 3.5 to 4.5 with OpenAI's tokenizers)
CHARS_PER_TOKEN = 4
#: tokens of the chat format around each message, and before the reply (OpenAI's count)
PER_MESSAGE = 3
REPLY_PRIMER = 3


@dataclass(frozen=True)
class EncodingFile:
    """Where tiktoken downloads an encoding's vocabulary from, and the sha256 it expects."""

    url: str
    sha256: str


#: the encodings rageval may count with: tiktoken's own URLs and hashes for them
ENCODING_FILES: dict[str, EncodingFile] = {
    "o200k_base": EncodingFile(
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": EncodingFile(
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
#: model families (a name, or its start followed by "-") and their encodings, first match wins
MODEL_ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
)


def encoding_of(model: str) -> str | None:
    """The tiktoken encoding of `model` (``openai/`` in front allowed), None if unknown."""
    name = model.removeprefix("openai/")
    for family, encoding in MODEL_ENCODINGS:
        if name == family or name.startswith(family + "-"):
            return encoding
    return None


class TokenCounter:
    """Counts the prompt tokens of a chat request: the approximation (this class) or a
    tokenizer (:class:`_Tokenizer`). ``label`` says which, as the estimate prints it."""

    label = f"approximation: {CHARS_PER_TOKEN} characters per token"

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]], schema: str) -> int:
        """Tokens of `messages` and of `schema` (the structured-output arguments' JSON)."""
        chars = sum(len(str(m.get("content") or "")) for m in messages) + len(schema)
        return math.ceil(chars / CHARS_PER_TOKEN)


APPROXIMATION = TokenCounter()


class _Approximated(TokenCounter):
    """The approximation, for a model whose tokenizer is known but not at hand."""

    def __init__(self, why: str) -> None:
        self.label = f"{APPROXIMATION.label} ({why})"


class _Tokenizer(TokenCounter):
    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding
        self.label = f"{encoding.name} (tiktoken)"

    def _count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]], schema: str) -> int:
        found = REPLY_PRIMER + (self._count(schema) if schema else 0)
        for message in messages:
            found += PER_MESSAGE + self._count(str(message.get("role") or ""))
            found += self._count(str(message.get("content") or ""))
        return found


def counter_for(model: str) -> TokenCounter:
    """How the prompts of `model` are counted: its tokenizer where it is known offline (see
    the module docstring), else the approximation (its label saying why, for a model whose
    tokenizer is known)."""
    encoding = encoding_of(model)
    if encoding is None:
        return APPROXIMATION
    try:
        require("tokens", f"counting with {encoding}")
    except MissingExtraError as e:
        return _Approximated(str(e))
    import tiktoken

    cache = _env.tiktoken_cache_dir()
    wanted = ENCODING_FILES[encoding]
    path = None if cache is None else cache / hashlib.sha1(wanted.url.encode()).hexdigest()
    try:
        intact = path is not None and hashlib.sha256(path.read_bytes()).hexdigest() == wanted.sha256
    except OSError:
        intact = False
    if not intact:
        return _Approximated(f"{encoding} is not in tiktoken's cache, {cache or 'which is off'}")
    return _Tokenizer(tiktoken.get_encoding(encoding))


@dataclass
class Counters:
    """The counter of each judge model of one estimate, chosen once per model."""

    by_model: dict[str, TokenCounter] = field(default_factory=dict)

    def of(self, model: str) -> TokenCounter:
        found = self.by_model.get(model)
        if found is None:
            found = self.by_model[model] = counter_for(model)
        return found

    def label(self) -> str:
        """Which counters were used (the approximation's label when none was)."""
        if len({c.label for c in self.by_model.values()}) > 1:
            return "; ".join(f"{m}: {c.label}" for m, c in sorted(self.by_model.items()))
        return next(iter(self.by_model.values()), APPROXIMATION).label
