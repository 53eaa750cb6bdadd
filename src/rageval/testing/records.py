"""What the test server records and answers: a :class:`RecordedRequest` as the server saw it,
the :class:`Reply` a handler returns, the :class:`Fault` it may produce instead, and the random
:class:`FaultPlan`."""

from __future__ import annotations

import json
import math
import random
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from rageval.testing._wire import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    ERRORS,
    error_kind,
    estimate_tokens,
    text_of,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Fault",
    "FaultPlan",
    "Handler",
    "Mode",
    "RecordedRequest",
    "Reply",
    "ReplyDetails",
    "ScriptedToken",
]

Mode: TypeAlias = Literal["json_schema", "tools", "json", "text"]
#: one token of a reply's scripted log-probabilities: its text, its log-probability and the
#: alternatives at its place ({token: logprob}; the token itself is listed among them too)
ScriptedToken: TypeAlias = tuple[str, float] | tuple[str, float, Mapping[str, float]]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. ``finished`` is NaN while the request is in flight."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    finished: float = math.nan

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def response_format(self) -> dict[str, Any] | None:
        fmt = self.body.get("response_format")
        return fmt if isinstance(fmt, dict) else None

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        tools = self.body.get("tools")
        return tools if isinstance(tools, list) and tools else None

    @property
    def mode(self) -> Mode:
        """The structured-output mechanism the client asked for."""
        if self.tools:
            return "tools"
        fmt_type = (self.response_format or {}).get("type")
        if fmt_type == "json_schema":
            return "json_schema"
        if fmt_type == "json_object":
            return "json"
        return "text"

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema sent in ``response_format`` or as the first tool's parameters."""
        found: Any = None
        if self.tools:
            found = self.tools[0].get("function", {}).get("parameters")
        elif self.response_format is not None:
            found = self.response_format.get("json_schema", {}).get("schema")
        return found if isinstance(found, dict) else None

    @property
    def strict(self) -> bool:
        """Whether the client asked for strict schema adherence (``strict: true``)."""
        if self.tools:
            return self.tools[0].get("function", {}).get("strict") is True
        if self.response_format is not None:
            return self.response_format.get("json_schema", {}).get("strict") is True
        return False

    @property
    def tool_name(self) -> str | None:
        """The function the client forced with ``tool_choice``, else the first tool's name."""
        choice = self.body.get("tool_choice")
        if isinstance(choice, dict):
            name = choice.get("function", {}).get("name")
            if isinstance(name, str):
                return name
        if self.tools:
            name = self.tools[0].get("function", {}).get("name")
            return name if isinstance(name, str) else None
        return None

    @property
    def prompt_chars(self) -> int:
        return sum(len(text_of(m.get("content"))) for m in self.messages if isinstance(m, dict))

    @property
    def schema_text(self) -> str:
        """The structured-output part of the request as compact JSON (``response_format``, or
        ``tools`` and ``tool_choice``): a real API bills it as prompt tokens."""
        parts = {k: self.body[k] for k in ("response_format", "tools", "tool_choice")
                 if k in self.body}  # fmt: skip
        return json.dumps(parts, ensure_ascii=False, separators=(",", ":")) if parts else ""

    @property
    def prompt_text(self) -> str:
        """What the model reads, in order: the schema, then each message's role and text."""
        messages = (
            f"<{m.get('role')}>{text_of(m.get('content'))}"
            for m in self.messages
            if isinstance(m, dict)
        )
        return self.schema_text + "".join(messages)


class ReplyDetails(TypedDict, total=False):
    """What a reply may say besides its content (``Reply.json(obj, finish_reason="length")``):
    the fields of :class:`Reply` of the same names."""

    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    logprobs: Sequence[ScriptedToken] | None


@dataclass(frozen=True)
class Reply:
    """A chat answer. Build with ``Reply.json``, ``Reply.text``, ``Reply.tool_arguments``, or
    ``Reply.choices`` for a request with ``n`` > 1 that should get different choices (a single
    reply to such a request is repeated ``n`` times)."""

    kind: Literal["json", "text", "tool_arguments", "choices"]
    value: Any
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: prompt tokens reported as served from the prompt cache (None: the server's simulation)
    cached_tokens: int | None = None
    #: the tokens of the reply's text with their log-probabilities, returned to a request that
    #: asks ``logprobs: true`` (with its ``top_logprobs`` alternatives each); their texts must
    #: spell the reply's content. None: ``logprobs: null``, as a server without them
    logprobs: Sequence[ScriptedToken] | None = None

    @staticmethod
    def json(obj: Any, **details: Unpack[ReplyDetails]) -> Reply:
        """A structured answer, delivered as a tool call if the request used tools, else as
        message content holding the JSON text."""
        return Reply("json", obj, **details)

    @staticmethod
    def text(s: str, **details: Unpack[ReplyDetails]) -> Reply:
        """Raw message content, in every mode (a model that ignored the tools answers this way)."""
        return Reply("text", s, **details)

    @staticmethod
    def tool_arguments(s: str, **details: Unpack[ReplyDetails]) -> Reply:
        """A tool call whose ``arguments`` are exactly ``s`` (e.g. malformed JSON)."""
        return Reply("tool_arguments", s, **details)

    def reported_completion_tokens(self, text: str, budget: object) -> int:
        """The completion tokens the server reports for this reply, whose text is `text`, to a
        request with the reply budget `budget`: the reply's own count, else for a reply cut at
        its limit the whole budget (what a server that stops at ``max_tokens`` reports), else
        estimated from `text`."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        if self.finish_reason == "length" and isinstance(budget, int) and budget > 0:
            return budget
        return estimate_tokens(len(text))

    @staticmethod
    def choices(*replies: Reply) -> Reply:
        """One choice per reply, in order (for a request with ``n`` = the number of replies;
        a request that asked for fewer gets the first ones)."""
        if not replies or any(r.kind == "choices" for r in replies):
            raise ValueError("Reply.choices takes one or more plain replies")
        return Reply("choices", tuple(replies))


@dataclass(frozen=True)
class Fault:
    """A failure the server produces instead of an answer."""

    kind: Literal["status", "timeout", "drop", "malformed_http", "truncated", "garbage"]
    status_code: int = 0
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    content: str | None = None
    #: the completion tokens a truncated reply reports (None: its whole ``max_tokens``)
    completion_tokens: int | None = None

    @staticmethod
    def rate_limit(retry_after: float | None = 1.0, header: str = "retry-after") -> Fault:
        """429 with the delay in ``retry-after`` (seconds) or ``retry-after-ms`` (milliseconds)."""
        headers: tuple[tuple[str, str], ...] = ()
        if retry_after is not None:
            if header == "retry-after-ms":
                headers = ((header, f"{retry_after * 1000:g}"),)
            elif header == "retry-after":
                headers = ((header, f"{retry_after:g}"),)
            else:
                raise ValueError("header must be 'retry-after' or 'retry-after-ms'")
        return Fault("status", 429, ERRORS[429][2], headers)

    @staticmethod
    def status(code: int, message: str | None = None) -> Fault:
        """An HTTP error with an OpenAI-style body (404 carries ``code: model_not_found``)."""
        if not 400 <= code <= 599:
            raise ValueError(f"not an error status: {code}")
        default = error_kind(code)[2]
        return Fault("status", code, message if message is not None else default)

    @staticmethod
    def timeout(seconds: float) -> Fault:
        """Accept the request, send nothing for ``seconds``, then close the connection."""
        return Fault("timeout", seconds=seconds)

    @staticmethod
    def drop() -> Fault:
        """Close the connection without any response."""
        return Fault("drop")

    @staticmethod
    def malformed_http() -> Fault:
        """A 200 whose body is not valid JSON."""
        return Fault("malformed_http")

    @staticmethod
    def garbage(content: str = "Sure! The answer looks fine to me.") -> Fault:
        """A 200 whose message is prose instead of the JSON asked for (no tool call either)."""
        return Fault("garbage", content=content)

    @staticmethod
    def truncated(content: str | None = None, completion_tokens: int | None = None) -> Fault:
        """A 200 with ``finish_reason: "length"`` and ``content`` (default: the default
        handler's answer cut in half), in the request's mode. Its usage reports
        ``completion_tokens`` (default: the request's whole ``max_tokens``, as a server that
        stopped the reply at its limit; fewer: a reply cut before its limit, by a proxy, a
        dropped stream or a context window)."""
        return Fault("truncated", content=content, completion_tokens=completion_tokens)


# A plain function runs on the server's event loop and must be quick; an async handler may
# await (e.g. asyncio.sleep for a per-request delay) without holding up other requests.
Handler: TypeAlias = Callable[[RecordedRequest], "Reply | Fault | Awaitable[Reply | Fault]"]


class FaultPlan:
    """Injects a random fault into a fraction ``rate`` of the requests on ``paths``.

    The decisions depend only on ``seed`` and the order in which requests arrive, so a
    sequential client sees the same faults on every run.
    """

    def __init__(
        self,
        rate: float,
        faults: Sequence[Fault],
        seed: int = 0,
        paths: Collection[str] = (CHAT_PATH,),
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        if rate > 0 and not faults:
            raise ValueError("a positive rate needs at least one fault")
        if EMBEDDINGS_PATH in paths and any(f.kind == "truncated" for f in faults):
            raise ValueError("Fault.truncated() only applies to chat completions")
        self.rate = rate
        self.faults = tuple(faults)
        self.seed = seed
        self.paths = frozenset(paths)
        self.injected: list[Fault] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def draw(self, path: str) -> Fault | None:
        """The fault for the next request on ``path``, or None to let it through."""
        if path not in self.paths:
            return None
        with self._lock:
            hit = self._rng.random() < self.rate
            fault = self.faults[self._rng.randrange(len(self.faults))] if hit else None
            if fault is not None:
                self.injected.append(fault)
            return fault

    def reset(self) -> None:
        with self._lock:
            self._rng = random.Random(self.seed)
            self.injected.clear()
