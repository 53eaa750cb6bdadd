"""The one retry loop for every request to an OpenAI-compatible endpoint.

Transient failures (429, 408, 409, 5xx, timeouts, dropped or malformed connections) are retried
with exponential backoff and full jitter, or after exactly the delay the server asked for in
``Retry-After`` / ``retry-after-ms``. The endpoint slot is released while sleeping, and a 429
with a delay also holds back every other request to that endpoint for that long.

Errors no retry can fix become :class:`FatalJudgeError` with a message that names the endpoint,
the model and where the API key came from; the server's text is included with the key removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rageval._client._limiter import EndpointLimiter, Slots
from rageval._client._usage import Tally
from rageval.errors import FatalJudgeError, JudgeCallFailed, RagevalError

__all__ = [
    "BatchLineError",
    "BatchLineLost",
    "Target",
    "backoff_delay",
    "call_with_retries",
    "parse_retry_after",
]

log = logging.getLogger("rageval.judge")

R = TypeVar("R")

BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
# A server asking for a longer pause than this is out of quota for now, not briefly busy.
MAX_RETRY_AFTER = 300.0
# a 429 with one of these codes is out of money, not briefly over a rate (OpenAI, Anthropic)
_NO_QUOTA = ("insufficient_quota", "enforced_spend_limit_reached")
_CONTEXT_TOO_LONG = (
    "context_length_exceeded",
    "context length",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "context size",  # llama.cpp: "request (N tokens) exceeds the available context size"
)


@dataclass(frozen=True)
class Target:
    """What the error messages need to know about the endpoint being called."""

    kind: str  # "judge" or "embeddings endpoint"
    base_url: str
    model: str
    key_source: str  # e.g. "OPENAI_API_KEY", "the api_key argument"
    secret: str | None = field(repr=False)  # only for removing it from server messages
    timeout: float = 60.0

    def redact(self, text: str) -> str:
        if self.secret and len(self.secret) >= 6:
            text = text.replace(self.secret, "***")
        return text


@dataclass(frozen=True)
class _Transient:
    reason: str
    retry_after: float | None
    connection: bool  # the endpoint could not be reached at all


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = lower.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    raw = lower.get("retry-after")
    if raw:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is not None:
            when = email.utils.mktime_tz(parsed)
            return max(0.0, when - (time.time() if now is None else now))
    return None


def backoff_delay(retry: int) -> float:
    """Full-jitter exponential backoff for the ``retry``-th retry (0-based)."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2.0**retry)
    return random.uniform(ceiling / 2, ceiling)


async def call_with_retries(
    send: Callable[[], Awaitable[R]],
    *,
    target: Target,
    limiter: EndpointLimiter | None,
    estimated_tokens: int,
    max_retries: int,
    tally: Tally,
    check_fatal: Callable[[], None],
    reached: Callable[[], bool],
    delay_of: Callable[[int], float] = backoff_delay,
    gate: Slots | None = None,
    priority: int = 0,
) -> R:
    """Send through ``limiter`` until success, a fatal error, or ``max_retries`` retries.

    ``check_fatal`` raises if the endpoint already failed fatally (then nothing is sent);
    ``reached`` tells whether the endpoint ever answered, so that an endpoint that could never
    be reached at all fails fatally instead of one call at a time. Without a limiter nothing
    waits for a slot (a request of a Batch API holds no connection); ``delay_of(retry)`` is the
    pause before a retry the server gave no delay for. Each attempt first passes ``gate``, the
    run's own limit on this endpoint, where the lowest ``priority`` goes first; then the
    endpoint's limiter, which every run shares in arrival order.
    """
    while True:
        check_fatal()
        slot = (
            limiter.request(estimated_tokens) if limiter is not None else contextlib.nullcontext()
        )
        turn = gate.hold(priority) if gate is not None else contextlib.nullcontext()
        async with turn, slot:
            check_fatal()
            tally.requests += 1
            try:
                return await send()
            except Exception as exc:  # classified below; cancellation is not an Exception
                outcome = classify(exc, target)
        if isinstance(outcome, (FatalJudgeError, JudgeCallFailed)):
            raise outcome
        if tally.retries >= max_retries:
            if outcome.connection and not reached():
                raise FatalJudgeError(
                    f"could not reach the {target.kind} at {target.base_url}: "
                    f"{outcome.reason} (after {tally.retries + 1} attempts)"
                )
            raise JudgeCallFailed(
                f"{target.kind} at {target.base_url} failed {tally.retries + 1} times; "
                f"last error: {outcome.reason}",
                "transport",
            )
        if outcome.retry_after is not None:
            if outcome.retry_after > MAX_RETRY_AFTER:
                raise JudgeCallFailed(
                    f"rate limited by {target.base_url}: the server asked to wait "
                    f"{outcome.retry_after:.0f} s",
                    "transport",
                )
            delay = outcome.retry_after
            if limiter is not None:
                limiter.pause(delay)
        else:
            delay = delay_of(tally.retries)
        tally.retries += 1
        log.info(
            "%s %s: %s; retry %d/%d in %.2f s",
            target.kind,
            target.model,
            outcome.reason,
            tally.retries,
            max_retries,
            delay,
        )
        await asyncio.sleep(delay)


class RequestNotSent(RagevalError):
    """Raised from the exception (its ``__cause__``) that came out of the openai SDK's send
    without being one of the SDK's own errors: it was raised below the SDK (transport, socket,
    network policy), and :func:`classify` decides whether a retry can help."""


class BatchLineError(RagevalError):
    """A line of a Batch API job came back with an error response (``status_code``, the
    error ``body``): sorted like the HTTP error it stands for (a 429 or 5xx goes into the next
    batch, a 400 is fatal...)."""

    def __init__(self, status_code: int, body: Any) -> None:
        error = body.get("error", body) if isinstance(body, dict) else body
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"batch line error {status_code}: {message or error}")
        self.status_code = status_code
        self.body = error
        self.code = error.get("code") if isinstance(error, dict) else None
        self.message = str(message or "")
        self.response = _NoHeaders()


class BatchLineLost(RagevalError):
    """A line of a Batch API job got no answer (the batch expired before it ran, or its
    reply could not be read): it goes into the next batch."""


class _NoHeaders:
    """What the sorting reads of an HTTP response, for a batch line (which has no headers)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}


def classify(exc: Exception, target: Target) -> _Transient | FatalJudgeError | JudgeCallFailed:
    """Sort an exception raised by the openai SDK into transient, fatal or failed-call."""
    import openai

    if isinstance(exc, BatchLineError):
        return _classify_status(exc, target)
    if isinstance(exc, BatchLineLost):
        return _Transient(target.redact(str(exc)), None, connection=False)

    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc, target)
    if isinstance(exc, openai.APITimeoutError):
        failure = _connection_failure_behind(exc)
        if failure is None:
            return _Transient(f"no reply within {target.timeout:g} s", None, connection=False)
        # the SDK's aiohttp transport reports a refused or dropped connection as a timeout
        reason = f"connection error ({type(failure).__name__}: {failure})"
        return _Transient(target.redact(reason), None, connection=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        reason = f"connection error ({type(cause).__name__}: {cause})" if cause else str(exc)
        return _Transient(target.redact(reason), None, connection=True)
    if isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError)):
        # the SDK lets a 200 whose body is not JSON through as a bare JSONDecodeError
        return _Transient("malformed response body", None, connection=False)
    if isinstance(exc, RequestNotSent):
        # Nothing the SDK knows: a failure below it. A connection failure is transient like
        # any other; anything else stopped the request from leaving at all (e.g. a network
        # policy), which no retry can fix.
        inner = exc.__cause__
        leaf = _unwrap_group(inner) if inner is not None else None
        leaf = leaf if leaf is not None else inner
        if leaf is not None and _is_connection_failure(leaf):
            reason = f"connection error ({type(leaf).__name__}: {leaf})"
            return _Transient(target.redact(reason), None, connection=True)
        return FatalJudgeError(
            f"could not send a request to the {target.kind} at {target.base_url}: "
            f"{type(leaf).__name__}: {target.redact(str(leaf))}"
        )
    raise exc


def _connection_failure_behind(exc: BaseException) -> BaseException | None:
    """The connection failure (refused, reset, closed by the server) that caused `exc`, if any."""
    seen: set[int] = set()
    cause: BaseException | None = exc.__cause__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (TimeoutError, asyncio.TimeoutError)):
            return None
        if _is_connection_failure(cause):
            return cause
        cause = cause.__cause__
    return None


def _is_connection_failure(exc: BaseException) -> bool:
    """A socket error or an aiohttp connection error, but not a timeout."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return False
    aiohttp = sys.modules.get("aiohttp")
    return isinstance(exc, OSError) or (
        aiohttp is not None and isinstance(exc, aiohttp.ClientConnectionError)
    )


def _unwrap_group(exc: BaseException) -> BaseException | None:
    """The first leaf exception of an exception group, or None if `exc` is not a group."""
    if not isinstance(getattr(exc, "exceptions", None), (list, tuple)):
        return None
    leaf = exc
    while isinstance(getattr(leaf, "exceptions", None), (list, tuple)) and leaf.exceptions:  # type: ignore[attr-defined]
        leaf = leaf.exceptions[0]  # type: ignore[attr-defined]
    return leaf


def _classify_status(exc: Any, target: Target) -> _Transient | FatalJudgeError | JudgeCallFailed:
    status: int = exc.status_code
    detail = target.redact(_server_message(exc))
    code = str(getattr(exc, "code", None) or "")
    where = f"{target.kind} at {target.base_url}"
    if status == 429 and code not in _NO_QUOTA:
        retry_after = parse_retry_after(dict(exc.response.headers))
        return _Transient(f"rate limited (429): {detail}", retry_after, connection=False)
    if status in (408, 409) or status >= 500:
        retry_after = parse_retry_after(dict(exc.response.headers))
        return _Transient(f"server error ({status}): {detail}", retry_after, connection=False)
    if status == 429:
        message = f"{where} reports that the account has no quota left (429): {detail}"
    elif status == 401:
        message = f"{where} rejected the API key from {target.key_source} (401): {detail}"
    elif status == 403:
        message = f"{where} refused access to model {target.model!r} (403): {detail}"
    elif status == 404:
        message = (
            f"model {target.model!r} not found at {target.base_url} (404): {detail}. Check the "
            "model name, and that the base URL includes the API prefix (often /v1)."
        )
    elif any(marker in f"{code} {detail}".lower() for marker in _CONTEXT_TOO_LONG):
        # One over-long sample must not stop the whole run.
        return JudgeCallFailed(
            f"prompt too long for model {target.model!r} ({status}): {detail}", "input_too_long"
        )
    else:
        message = f"{where} rejected the request to model {target.model!r} ({status}): {detail}"
    return FatalJudgeError(message, status=status, detail=detail)


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    text: str | None = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            text = inner.get("message") or inner.get("detail")
        elif isinstance(inner, str):
            text = inner
    elif isinstance(body, str):
        text = body
    if not text:
        text = str(getattr(exc, "message", "") or exc)
    text = " ".join(str(text).split())
    return text if len(text) <= 300 else text[:297] + "..."
