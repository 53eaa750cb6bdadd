"""The Judge: structured, validated, cached, accounted calls to one chat model."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from rageval._client._cache import RequestCache, cache_key, resolve_cache
from rageval._client._endpoint import Endpoint
from rageval._client._retry import Tally
from rageval._client._settings import (
    DEFAULT_MAX_CONCURRENCY,
    Limits,
    RetryPolicy,
    endpoint_settings,
)
from rageval._client._transport import BadBody
from rageval._client._usage import PriceTable, Usage, UsageLedger
from rageval._env import DEFAULT_API_KEY_ENV
from rageval.errors import FatalJudgeError, JudgeCallFailed
from rageval.judge._modes import (
    MODES,
    Mode,
    Shape,
    build_request,
    error_text,
    known_mode,
    parse_json_object,
    probe_lock,
    reask_messages,
    remember_mode,
    reply_text,
    shape_of,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["Judge", "JudgeReply", "llm_factory"]

log = logging.getLogger("rageval.judge")

T = TypeVar("T", bound="BaseModel")
R = TypeVar("R")

# A reply cut off at max_tokens is asked again once with twice the budget, up to this many.
MAX_GROWN_BUDGET = 16_384
# 2: the schema enters the key as its canonical JSON text, the messages as length-prefixed text
_CACHE_FORMAT = 2
_ROLES = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True)
class JudgeReply(Generic[T]):
    value: T
    usage: Usage
    cached: bool = False


@dataclass(frozen=True)
class _Raw:
    text: str
    finish_reason: str | None
    refusal: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    counted: bool = False  # the reply reported its token usage


class Judge:
    """A chat model behind any OpenAI-compatible endpoint, asked for validated JSON.

    The endpoint is ``base_url`` (default: ``RAGEVAL_BASE_URL``, ``OPENAI_BASE_URL``, OpenAI)
    or the openai ``client`` given; the API key is ``api_key`` or the environment variable
    ``api_key_env``, and is never written anywhere. ``limits`` (a :class:`Limits`: concurrency,
    requests and tokens per minute, shared by every client of the endpoint; default 16
    concurrent requests) and ``retry`` (a :class:`RetryPolicy`: retries and the timeout of one
    attempt; default 6 and 60 s) may be given as objects or through their shorthands
    ``max_concurrency``, ``requests_per_minute``, ``tokens_per_minute``, ``max_retries`` and
    ``timeout``. Successful replies are cached (:mod:`rageval._client._cache`) unless
    ``cache=False``. ``mode`` picks the structured-output mode; ``"auto"`` probes (see
    :mod:`rageval.judge._modes`).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        client: Any = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float | None = None,
        max_retries: int | None = None,
        seed: int | None = None,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        limits: Limits | None = None,
        retry: RetryPolicy | None = None,
        cache: RequestCache | bool | str | os.PathLike[str] = True,
        prices: PriceTable | None = None,
        mode: Literal["auto", "json_schema", "tools", "json"] = "auto",
        max_reasks: int = 2,
    ) -> None:
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"mode must be 'auto' or one of {MODES}, got {mode!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if max_reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {max_reasks}")
        settings = endpoint_settings(
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            client=client,
            limits=limits,
            retry=retry,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            default_limits=Limits(max_concurrency=DEFAULT_MAX_CONCURRENCY),
        )
        self._endpoint = Endpoint(kind="judge", model=model, settings=settings)
        self.model = model
        self.base_url = self._endpoint.base_url
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.seed = seed
        self.mode = mode
        self.max_reasks = max_reasks
        self.prices = prices if prices is not None else PriceTable()
        self.usage = UsageLedger()
        self.cache: RequestCache | None = resolve_cache(cache)
        self._settings_keys: dict[tuple[Any, ...], str] = {}
        # the calls in progress, by id: what each consumed so far (see pending_usage)
        self._pending: dict[int, Tally] = {}

    def describe(self) -> dict[str, Any]:
        """Settings for run manifests (never the API key)."""
        return {
            "model": self.model,
            **self._endpoint.describe(),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "mode": self.mode,
            "structured_output": self.mode
            if self.mode != "auto"
            else known_mode(self.base_url, self.model),
            "max_reasks": self.max_reasks,
            "cache": str(self.cache.path) if self.cache is not None else None,
        }

    def __repr__(self) -> str:
        return f"Judge(model={self.model!r}, base_url={self.base_url!r}, mode={self.mode!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections this judge opened on the running loop."""
        await self._endpoint.aclose()

    def uncached(self) -> Judge:
        """This judge without its request cache: every call is sent to the endpoint (to score
        a cell again, ``evaluate(repeats=K)``). The view shares everything else with this
        judge -- endpoint, limiter, usage ledger, prices and settings -- so its calls are
        limited and accounted as this judge's."""
        if self.cache is None:
            return self
        view = copy.copy(self)
        view.cache = None
        return view

    # ------------------------------------------------------------------ ask

    async def ask(
        self,
        messages: Sequence[Mapping[str, str]],
        response_model: type[T],
        *,
        tags: Mapping[str, str] | None = None,
        check: Callable[[T], None] | None = None,
        max_reasks: int | None = None,
    ) -> JudgeReply[T]:
        """Ask for a reply that validates as ``response_model`` and passes ``check``.

        ``max_reasks`` overrides the judge's own bound on re-asks for this call.

        Raises :class:`FatalJudgeError` when the endpoint refuses for good (and from then on at
        once), :class:`JudgeCallFailed` when this call cannot produce a usable reply.
        """
        self._endpoint.check_fatal()
        reasks = self.max_reasks if max_reasks is None else max_reasks
        if reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {reasks}")
        convo = _clean_messages(messages)
        shape = shape_of(response_model)
        cache = self.cache
        key = self._cache_key(convo, shape) if cache is not None else ""
        if cache is not None:
            hit = cache.get(key)
            value = _revalidate(hit, response_model, check) if hit is not None else None
            if value is not None:
                usage = Usage(cache_hits=1)
                self.usage.record(usage, tags)
                return JudgeReply(value, usage, cached=True)
        tally = Tally()
        self._pending[id(tally)] = tally
        try:
            value, raw = await self._solve(convo, shape, response_model, check, reasks, tally)
        except FatalJudgeError as exc:
            self._endpoint.remember_fatal(exc)
            raise
        finally:
            # moved from pending to the ledger in one step: a reader never counts it twice
            del self._pending[id(tally)]
            usage = self._usage_of(tally)
            if tally.requests:
                self.usage.record(usage, tags)
        if cache is not None:
            cache.put(key, self.model, raw, usage.to_dict())
        return JudgeReply(value, usage)

    async def _solve(
        self,
        convo: list[dict[str, str]],
        shape: Shape,
        response_model: type[T],
        check: Callable[[T], None] | None,
        max_reasks: int,
        tally: Tally,
    ) -> tuple[T, str]:
        budget = self.max_tokens
        grown = False
        while True:
            raw = await self._complete(convo, shape, budget, tally)
            if raw.refusal:
                raise JudgeCallFailed(f"the model refused to answer: {_shorten(raw.refusal)}")
            if raw.finish_reason == "length":
                bigger = min(budget * 2, max(MAX_GROWN_BUDGET, budget))
                if not grown and bigger > budget:
                    log.info(
                        "reply truncated at max_tokens=%d; asking again with %d", budget, bigger
                    )
                    budget, grown = bigger, True
                    continue
                raise JudgeCallFailed(
                    f"reply truncated: it hit the output token limit (max_tokens={budget})"
                    + (f" even after raising it from {self.max_tokens}" if grown else "")
                )
            if raw.finish_reason == "content_filter":
                raise JudgeCallFailed("reply withheld by the endpoint's content filter")
            try:
                obj = parse_json_object(raw.text)
                value = response_model.model_validate(obj)
                if check is not None:
                    check(value)
            except ValueError as exc:  # JSON, pydantic and check errors are all ValueErrors
                problem = error_text(exc)
                if tally.reasks >= max_reasks:
                    raise JudgeCallFailed(
                        f"no valid reply after {tally.reasks} re-ask(s): {_shorten(problem)}"
                    ) from exc
                tally.reasks += 1
                convo = [*convo, *reask_messages(raw.text, problem)]
                continue
            return value, json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    async def _complete(
        self, convo: list[dict[str, str]], shape: Shape, budget: int, tally: Tally
    ) -> _Raw:
        if self.mode != "auto":
            return await self._request(self.mode, convo, shape, budget, tally)
        mode = known_mode(self.base_url, self.model)
        if mode is None:
            async with probe_lock(self.base_url, self.model).hold():
                mode = known_mode(self.base_url, self.model) or await self._stored_mode()
                if mode is None:
                    return await self._try_modes(MODES, convo, shape, budget, tally)
        # The remembered mode first; if it is refused now (another server on that address, an
        # upgrade), the others in order of preference.
        candidates = [mode, *(m for m in MODES if m != mode)]
        return await self._try_modes(candidates, convo, shape, budget, tally)

    async def _try_modes(
        self,
        candidates: Sequence[Mode],
        convo: list[dict[str, str]],
        shape: Shape,
        budget: int,
        tally: Tally,
    ) -> _Raw:
        for i, mode in enumerate(candidates):
            try:
                raw = await self._request(mode, convo, shape, budget, tally)
            except FatalJudgeError as exc:
                if exc.status in (400, 422) and i + 1 < len(candidates):
                    log.info(
                        "%s at %s refused structured-output mode %s (%s); trying %s",
                        self.model,
                        self.base_url,
                        mode,
                        exc.detail,
                        candidates[i + 1],
                    )
                    continue
                raise
            if known_mode(self.base_url, self.model) != mode:
                remember_mode(self.base_url, self.model, mode)
                if self.cache is not None:
                    self.cache.set_mode(self.base_url, self.model, mode)
            return raw
        raise AssertionError("unreachable: the last candidate mode returns or raises")

    async def _stored_mode(self) -> Mode | None:
        if self.cache is None:
            return None
        stored = self.cache.get_mode(self.base_url, self.model)
        for mode in MODES:
            if stored == mode:
                remember_mode(self.base_url, self.model, mode)
                return mode
        return None

    async def _request(
        self, mode: Mode, convo: list[dict[str, str]], shape: Shape, budget: int, tally: Tally
    ) -> _Raw:
        messages, extra = build_request(mode, convo, shape)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": budget,
            **extra,
        }
        if self.seed is not None:
            params["seed"] = self.seed
        # json mode carries the schema in the messages, the other modes in `extra`
        estimate = _estimate_tokens(messages, len(shape.schema_json) if extra else 0, budget)
        raw = await self._endpoint.post_json(
            "/chat/completions",
            params,
            read=functools.partial(_read_completion, mode=mode),
            estimated_tokens=estimate,
            tally=tally,
        )
        tally.prompt_tokens += raw.prompt_tokens
        tally.completion_tokens += raw.completion_tokens
        used = raw.prompt_tokens + raw.completion_tokens
        self._endpoint.limiter.settle(estimate, used if raw.counted else estimate)
        return raw

    # -------------------------------------------------------------- helpers

    def _cache_key(self, convo: list[dict[str, str]], shape: Shape) -> str:
        # The configured mode, not the probed one: a lookup must not need a probe first.
        # (memoised per settings: they are public attributes a caller may change)
        memo = (shape.schema_json, self.base_url, self.model, self.temperature, self.max_tokens,
                self.seed, self.mode)  # fmt: skip
        settings = self._settings_keys.get(memo)
        if settings is None:
            settings = self._settings_keys[memo] = cache_key(
                {
                    "format": _CACHE_FORMAT,
                    "endpoint": self.base_url,
                    "model": self.model,
                    "temperature": self.temperature,
                    "max_tokens": self.max_tokens,
                    "seed": self.seed,
                    "mode": self.mode,
                    "schema": shape.schema_json,
                }
            )
        # The messages are hashed as length-prefixed text rather than as JSON: the prompts are
        # most of a request, and escaping them to JSON cost more than the rest of a cache hit.
        digest = hashlib.sha256(settings.encode())
        for message in convo:
            content = message["content"].encode("utf-8", "surrogatepass")
            digest.update(f"\0{message['role']}\0{len(content)}\0".encode())
            digest.update(content)
        return digest.hexdigest()

    def pending_usage(self) -> Usage:
        """What the calls still in progress consumed so far: requests sent, retries after
        transient errors, re-asks (the ledger has each call once it ends). A progress display
        adds it to `usage.total` to show a stall's retries while it lasts."""
        return sum((self._usage_of(t) for t in list(self._pending.values())), Usage())

    def _usage_of(self, tally: Tally) -> Usage:
        return Usage(
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            requests=tally.requests,
            retries=tally.retries,
            reasks=tally.reasks,
            cost_usd=self.prices.cost(self.model, tally.prompt_tokens, tally.completion_tokens),
        )


def llm_factory(model: str, client: Any = None, **kw: Any) -> Judge:
    """Build a :class:`Judge` (the name the seeds use): ``llm_factory("gpt-4o-mini", client=...)``."""
    return Judge(model, client=client, **kw)


def _read_completion(data: dict[str, Any], mode: Mode) -> _Raw:
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise BadBody("no choices[0].message in a chat completion")
    message = choice["message"]
    finish_reason = choice.get("finish_reason")
    refusal = message.get("refusal")
    usage = data.get("usage")
    counted = isinstance(usage, dict)
    return _Raw(
        reply_text(message, mode),
        finish_reason if isinstance(finish_reason, str) else None,
        refusal if isinstance(refusal, str) else None,
        prompt_tokens=_count(usage, "prompt_tokens"),
        completion_tokens=_count(usage, "completion_tokens"),
        counted=counted,
    )


def _count(usage: Any, field: str) -> int:
    value = usage.get(field) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


def _clean_messages(messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...}")
    out = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES or not isinstance(content, str):
            raise ValueError(
                f"messages[{i}] must have role system/user/assistant and string content"
            )
        out.append({"role": role, "content": content})
    return out


def _revalidate(
    hit: tuple[str, dict[str, Any]], response_model: type[T], check: Callable[[T], None] | None
) -> T | None:
    """A cached value, if it still validates (the model or the check may have changed)."""
    try:
        value = response_model.model_validate_json(hit[0])
        if check is not None:
            check(value)
    except ValueError:
        return None
    return value


def _estimate_tokens(messages: list[dict[str, Any]], schema_chars: int, budget: int) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in messages) + schema_chars
    return chars // 4 + 4 * len(messages) + budget


def _shorten(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
