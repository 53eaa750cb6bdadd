"""The seam between a :class:`~rageval.judge.Judge` and the API it talks to.

A backend turns one conversation and a response model's schema into the API's request, sends
it through its :class:`~rageval._client._endpoint.Endpoint` (limiter, retries, fatal-error
memory) and reads the reply back into :class:`Completion` values: the text that should hold
the JSON object, why the model stopped, and the tokens used. It describes itself (its kind,
the structured-output mechanism it uses) and says what of its identity goes into a request's
cache key. Everything else stays with the judge: validating a reply against the response
model and re-asking, the request cache, prices, the run's budget and the prompt-length limits.

The judge hands the backend an :class:`Exchange` for each call: every HTTP request the backend
makes goes through :meth:`Exchange.post_json`, whose :meth:`Exchange.send` sizes the reply
budget to fit the prompt, reserves the most the request can cost from the run's budget,
settles it with the usage read back, and books the tokens. Two backends ship with rageval:
``"openai"`` (:mod:`rageval.judge._openai`, any OpenAI-compatible endpoint) and
``"anthropic"`` (:mod:`rageval.judge._anthropic`, Anthropic's Messages API);
docs/ARCHITECTURE.md says how to add one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rageval._client._endpoint import Endpoint
    from rageval._client._usage import Tally
    from rageval.judge._modes import Shape

__all__ = [
    "CHARS_PER_TOKEN",
    "Completion",
    "CompletionRequest",
    "Exchange",
    "Grant",
    "JudgeBackend",
    "TokenLogprob",
    "count",
    "estimate_prompt_tokens",
]

# A prompt is estimated at this many characters per token before it is sent (English text runs
# at about 4; an underestimate is caught by the server's own "context length" error).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class TokenLogprob:
    """One token of a reply with its log-probability and the most likely alternatives at its
    place (each ``(token, logprob)``, the token itself usually among them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    #: the token's bytes, where the API sends them: a token may hold part of a character,
    #: which its text leaves out (None: the UTF-8 of `token`)
    raw: bytes | None = None


@dataclass(frozen=True)
class Completion:
    """One generation of a reply, as the judge reads it whatever the API."""

    #: the text that should hold the JSON object (a forced tool call's arguments, or content)
    text: str
    #: "length" when the reply hit the output token limit, "content_filter" when the endpoint
    #: withheld it; anything else is a finished reply
    finish_reason: str | None
    #: the model's refusal, when it declined to answer
    refusal: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: the reply reported its token usage
    counted: bool = False
    #: prompt tokens served from the provider's prompt cache (part of prompt_tokens)
    cached_tokens: int = 0
    #: the reply budget the request was sent with: the judge's, or less where the prompt left
    #: less room in the context window (0: not known)
    max_tokens: int = 0
    #: the tokens of `text` with their log-probabilities, when they were asked for and the
    #: endpoint returned them (:mod:`rageval.judge._probabilities`)
    tokens: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class CompletionRequest:
    """What the judge asks a backend for: ``n`` replies to ``messages`` (roles system, user
    and assistant) that should validate under ``shape``'s schema."""

    messages: list[dict[str, str]]
    shape: Shape
    temperature: float
    max_tokens: int
    seed: int | None
    #: the judge's structured-output setting ("auto" or a mode a backend may use)
    mode: str
    n: int = 1
    #: the alternatives per token to return with the reply's log-probabilities (0: none asked;
    #: a backend whose API cannot return them ignores it)
    top_logprobs: int = 0


@dataclass(frozen=True)
class Grant:
    """What :meth:`Exchange.send` lets one HTTP request ask for."""

    #: the reply budget, after fitting it beside the prompt
    max_tokens: int
    #: prompt and reply budget (of all ``n`` generations): what the rate limiter admits
    estimated_tokens: int


#: how a backend posts one HTTP request, given what the judge lets it ask for
Post = Callable[[Grant], Awaitable[list[Completion]]]


@dataclass(frozen=True)
class Exchange:
    """The judge's side of one call: how each HTTP request a backend makes for it is sized,
    paid for and counted. The judge makes one per call, `sender` being its own sending bound
    to the call; a backend posts each request through :meth:`post_json` (:meth:`send` and
    :attr:`tally` are what it is made of)."""

    #: what the call consumed so far (the endpoint's retry loop counts its requests and
    #: retries in it)
    tally: Tally
    sender: Callable[[int, int, int, Post], Awaitable[list[Completion]]]

    async def send(
        self, prompt_tokens: int, max_tokens: int, n: int, post: Post
    ) -> list[Completion]:
        """``post`` one request whose prompt is about ``prompt_tokens`` long, asking for
        ``n`` replies of up to ``max_tokens`` each; the usage of the whole reply is read from
        its first :class:`Completion`. Raises JudgeCallFailed(input_too_long) without sending
        when the prompt is over the judge's limits."""
        return await self.sender(prompt_tokens, max_tokens, n, post)

    async def post_json(
        self,
        endpoint: Endpoint,
        path: str,
        body: Callable[[int], dict[str, Any]],
        *,
        read: Callable[[dict[str, Any]], list[Completion]],
        prompt_tokens: int,
        max_tokens: int,
        n: int = 1,
    ) -> list[Completion]:
        """:meth:`send` one JSON request to `endpoint`'s `path`, the way every backend posts:
        `body` is the request given the reply budget granted, sent with the endpoint's limiter,
        retries and error sorting (admitted for the grant's tokens, counted in :attr:`tally`),
        and `read` reads the reply's JSON object."""

        async def post(grant: Grant) -> list[Completion]:
            return await endpoint.post_json(
                path,
                body(grant.max_tokens),
                read=read,
                estimated_tokens=grant.estimated_tokens,
                tally=self.tally,
            )

        return await self.send(prompt_tokens, max_tokens, n, post)


class JudgeBackend(Protocol):
    """An API a judge asks: see the module docstring."""

    #: the backend's name, as ``Judge(backend=...)`` and ``--llm KIND:MODEL`` take it
    kind: str
    #: the connection requests go out through
    endpoint: Endpoint

    async def complete(self, request: CompletionRequest, exchange: Exchange) -> list[Completion]:
        """Up to ``request.n`` replies (at least one); an API that cannot return several per
        request returns one, and the judge asks again for the others."""
        ...

    def preview(self, request: CompletionRequest) -> tuple[list[dict[str, Any]], str]:
        """What :meth:`complete` would send, without sending: the messages as the API gets
        them, and the structured-output arguments sent beside them as JSON text ("" when the
        schema is in the messages)."""
        ...

    def structured_output(self, mode: str, *, settled: bool) -> str | None:
        """The structured-output mechanism requests are sent with under the judge's ``mode``:
        ``settled`` only as far as it is known now (None before an endpoint was probed), else
        the one the next request would try first."""
        ...

    def honours_n(self) -> bool | None:
        """Whether one request returns the ``n`` generations it asks for (None: not known
        yet)."""
        ...

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this backend's replies in a request's cache key, beside the
        endpoint, model, messages, schema and sampling settings."""
        ...


def estimate_prompt_tokens(messages: list[dict[str, Any]], schema_chars: int) -> int:
    """The tokens of a prompt of these messages and a schema of ``schema_chars`` characters
    sent beside them, estimated before sending (the judge fits the reply budget by it)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages) + schema_chars
    return chars // CHARS_PER_TOKEN + 4 * len(messages)


def count(usage: Any, field: str) -> int:
    """A token count of a reply's ``usage`` object (0 when it is missing or not a count)."""
    value = usage.get(field) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else 0
