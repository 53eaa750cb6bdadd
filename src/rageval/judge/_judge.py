"""The Judge: structured, validated, cached, accounted calls to one chat model."""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from rageval._client._cache import RequestCache, cache_key
from rageval._client._endpoint import Endpoint, EndpointClient
from rageval._client._retry import Tally
from rageval._client._run import JudgeCall, current_run
from rageval._client._settings import (
    DEFAULT_MAX_CONCURRENCY,
    EndpointOptions,
    Limits,
)
from rageval._client._transport import BadBody
from rageval._client._usage import PriceTable, Usage
from rageval.errors import FatalJudgeError, JudgeCallFailed
from rageval.judge._modes import (
    MODES,
    Mode,
    Shape,
    build_request,
    error_text,
    extra_body,
    known_mode,
    known_n_support,
    parse_json_object,
    probe_lock,
    reask_messages,
    remember_mode,
    remember_n_support,
    reply_text,
    shape_of,
)

if TYPE_CHECKING:
    from pydantic import BaseModel
    from typing_extensions import Unpack

__all__ = [
    "CONTEXT_WINDOWS",
    "Judge",
    "JudgeReplies",
    "JudgeReply",
    "context_window",
    "llm_factory",
]

log = logging.getLogger("rageval.judge")

T = TypeVar("T", bound="BaseModel")
R = TypeVar("R")

# A reply cut off at max_tokens is asked again once with twice the budget, up to this many.
MAX_GROWN_BUDGET = 16_384
# A prompt is estimated at this many characters per token before it is sent (English text runs
# at about 4; an underestimate is caught by the server's own "context length" error).
CHARS_PER_TOKEN = 4
# A reply needs at least this much room: a prompt that leaves less is not sent.
MIN_REPLY_TOKENS = 256
# 3: the call's own budget, temperature and number of choices are part of the key
_CACHE_FORMAT = 3
_ROLES = frozenset({"system", "user", "assistant"})

#: context windows (prompt + reply, in tokens) of common models, by family name; a dated
#: snapshot ("gpt-4o-mini-2024-07-18") has its family's. Other models: ``max_prompt_tokens``.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
}
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def context_window(model: str) -> int | None:
    """The context window of ``model`` (prompt and reply together), if it is a known one."""
    found = CONTEXT_WINDOWS.get(model)
    return found if found is not None else CONTEXT_WINDOWS.get(_SNAPSHOT_SUFFIX.sub("", model))


@dataclass(frozen=True)
class JudgeReply(Generic[T]):
    value: T
    usage: Usage
    cached: bool = False


@dataclass(frozen=True)
class JudgeReplies(Generic[T]):
    """The ``n`` validated replies of :meth:`Judge.ask_n`, in the order they came."""

    values: list[T]
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
    cached_tokens: int = 0  # prompt tokens served from the provider's prompt cache


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One ask: what is sent, what a reply must be, and the call's own settings."""

    convo: list[dict[str, str]]
    shape: Shape
    model: type[T]
    check: Callable[[T], None] | None
    max_reasks: int
    budget: int
    temperature: float


class Judge(EndpointClient):
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

    ``max_tokens`` is the smallest reply budget of a request: a call that asks for more (a
    metric sizes it from the number of items it asks about) gets more. A prompt estimated to
    exceed ``max_prompt_tokens``, or the model's context window when it is a known model
    (:data:`CONTEXT_WINDOWS`), is not sent: the call fails with kind ``input_too_long``.
    """

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        cache: RequestCache | bool | str | os.PathLike[str] = True,
        prices: PriceTable | None = None,
        mode: Literal["auto", "json_schema", "tools", "json"] = "auto",
        max_reasks: int = 2,
        max_prompt_tokens: int | None = None,
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"mode must be 'auto' or one of {MODES}, got {mode!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if max_reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {max_reasks}")
        if max_prompt_tokens is not None and max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1 or None, got {max_prompt_tokens}")
        limits = Limits(max_concurrency=DEFAULT_MAX_CONCURRENCY)
        self._connect("judge", model, limits, cache, prices, endpoint)
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.seed = seed
        self.mode = mode
        self.max_reasks = max_reasks
        self.max_prompt_tokens = max_prompt_tokens
        self._settings_keys: dict[tuple[Any, ...], str] = {}
        # the calls in progress, by id: the tallies of what each consumed so far (see
        # pending_usage)
        self._pending: dict[int, list[Tally]] = {}

    def describe(self) -> dict[str, Any]:
        """Settings for run manifests (never the API key)."""
        return {
            "model": self.model,
            **self._endpoint_description(),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "context_window": context_window(self.model),
            "seed": self.seed,
            "mode": self.mode,
            "structured_output": self.mode
            if self.mode != "auto"
            else known_mode(self.base_url, self.model),
            "max_reasks": self.max_reasks,
        }

    def __repr__(self) -> str:
        return f"Judge(model={self.model!r}, base_url={self.base_url!r}, mode={self.mode!r})"

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

    # ------------------------------------------------------------- planning

    def structured_mode(self) -> Mode:
        """The structured-output mode requests are sent in: the configured one, else the one
        probed (this process, or remembered in the request cache), else the first to try."""
        if self.mode != "auto":
            return self.mode
        found = known_mode(self.base_url, self.model)
        if found is None and self.cache is not None:
            stored = self.cache.get_mode(self.base_url, self.model)
            found = next((m for m in MODES if m == stored), None)
        return found or MODES[0]

    def request_text(
        self,
        messages: Sequence[Mapping[str, str]],
        response_model: type[BaseModel],
        *,
        max_tokens: int | None = None,
    ) -> tuple[list[dict[str, Any]], str, int]:
        """What :meth:`ask` would send, in the :meth:`structured_mode`: the messages, the
        structured-output arguments sent beside them (the schema) as JSON text ("" when the
        schema is in the messages), and the reply budget it would ask for. Nothing is sent."""
        shape, mode = shape_of(response_model), self.structured_mode()
        sent, _ = build_request(mode, _clean_messages(messages), shape)
        schema = extra_body(mode, shape).decode()
        return sent, schema, max(self.max_tokens, max_tokens or 0)

    def honours_n(self) -> bool | None:
        """Whether the endpoint returns the ``n`` generations one request asks for (learnt
        from the first such request; None before)."""
        return known_n_support(self.base_url, self.model)

    # ------------------------------------------------------------------ ask

    async def ask(
        self,
        messages: Sequence[Mapping[str, str]],
        response_model: type[T],
        *,
        tags: Mapping[str, str] | None = None,
        check: Callable[[T], None] | None = None,
        max_reasks: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> JudgeReply[T]:
        """Ask for a reply that validates as ``response_model`` and passes ``check``.

        ``max_reasks`` overrides the judge's own bound on re-asks for this call; ``max_tokens``
        asks for a larger reply budget than the judge's ``max_tokens`` (never a smaller one);
        ``temperature`` overrides the judge's sampling temperature for this call.

        Raises :class:`FatalJudgeError` when the endpoint refuses for good (and from then on at
        once), :class:`JudgeCallFailed` when this call cannot produce a usable reply.
        """
        call = self._call(messages, response_model, check, max_reasks, max_tokens, temperature)

        async def solve(tallies: list[Tally]) -> tuple[T, str]:
            tallies.append(tally := Tally())
            return await self._solve(call, tally)

        revalidate = functools.partial(_revalidate, response_model=response_model, check=check)
        value, usage, cached = await self._answer(call, "", tags, revalidate, solve)
        return JudgeReply(value, usage, cached)

    async def ask_n(
        self,
        messages: Sequence[Mapping[str, str]],
        response_model: type[T],
        n: int,
        *,
        tags: Mapping[str, str] | None = None,
        check: Callable[[T], None] | None = None,
        max_reasks: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> JudgeReplies[T]:
        """``n`` independent replies to the same messages, each validated (and re-asked on its
        own) like :meth:`ask`. Use a ``temperature`` above 0, or the replies may be identical.

        One request with the ``n`` parameter where the endpoint honours it: whether it does is
        learnt from the first such request per (endpoint, model) and remembered for the
        process. A server that answers with fewer choices, or refuses ``n`` (a 400/422 that the
        same request without ``n`` does not get), gets one request per missing generation, now
        and from then on. The set is cached as a whole.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        call = self._call(messages, response_model, check, max_reasks, max_tokens, temperature)

        async def solve(tallies: list[Tally]) -> tuple[list[T], str]:
            solved = await self._solve_n(call, n, tallies)
            return [value for value, _ in solved], "[" + ",".join(raw for _, raw in solved) + "]"

        revalidate = functools.partial(
            _revalidate_all, response_model=response_model, check=check, n=n
        )
        values, usage, cached = await self._answer(call, f"n={n}", tags, revalidate, solve)
        return JudgeReplies(values, usage, cached)

    async def _answer(
        self,
        call: _Call[Any],
        variant: str,
        tags: Mapping[str, str] | None,
        revalidate: Callable[[str], R | None],
        solve: Callable[[list[Tally]], Awaitable[tuple[R, str]]],
    ) -> tuple[R, Usage, bool]:
        """The cached answer to `call` if it still validates, else `solve`'s (then cached);
        the usage of every request it took is booked under `tags` either way."""
        cache = self.cache
        key = self._cache_key(call, variant) if cache is not None else ""
        started = time.time()
        if cache is not None:
            hit = cache.get(key)
            value = revalidate(hit[0]) if hit is not None else None
            if value is not None:
                usage = Usage(cache_hits=1)
                self.book(usage, tags)
                self._call_ended(started, usage, tags, None)
                return value, usage, True
        tallies: list[Tally] = []
        self._pending[id(tallies)] = tallies
        error: BaseException | None = None
        try:
            value, raw = await solve(tallies)
        except FatalJudgeError as exc:
            self._endpoint.remember_fatal(exc)
            error = exc
            raise
        except Exception as exc:
            error = exc
            raise
        finally:
            # moved from pending to the ledger in one step: a reader never counts it twice
            del self._pending[id(tallies)]
            usage = self._usage_of(tallies)
            if usage.requests:
                self.book(usage, tags)
            self._call_ended(started, usage, tags, error)
        if cache is not None:
            cache.put(key, self.model, raw, usage.to_dict())
        return value, usage, False

    def _call(
        self,
        messages: Sequence[Mapping[str, str]],
        response_model: type[T],
        check: Callable[[T], None] | None,
        max_reasks: int | None,
        max_tokens: int | None,
        temperature: float | None,
    ) -> _Call[T]:
        self._endpoint.check_fatal()
        reasks = self.max_reasks if max_reasks is None else max_reasks
        if reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {reasks}")
        return _Call(
            convo=_clean_messages(messages),
            shape=shape_of(response_model),
            model=response_model,
            check=check,
            max_reasks=reasks,
            budget=max(self.max_tokens, max_tokens or 0),
            temperature=self.temperature if temperature is None else float(temperature),
        )

    async def _solve_n(self, call: _Call[T], n: int, tallies: list[Tally]) -> list[tuple[T, str]]:
        firsts: list[_Raw | None] = []
        if n > 1 and known_n_support(self.base_url, self.model) is not False:
            tallies.append(tally := Tally())
            firsts = list((await self._complete(call.convo, call, call.budget, tally, n))[:n])
        # generations the endpoint did not return are asked for one by one
        firsts += [None] * (n - len(firsts))
        return await self._solve_each(call, firsts, tallies)

    async def _solve_each(
        self, call: _Call[T], firsts: Sequence[_Raw | None], tallies: list[Tally]
    ) -> list[tuple[T, str]]:
        """Each generation validated (and re-asked) on its own; None: ask for it afresh."""
        mine = [Tally() for _ in firsts]
        tallies.extend(mine)
        tasks = [
            asyncio.ensure_future(self._solve(call, t, first))
            for t, first in zip(mine, firsts, strict=True)
        ]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # gather leaves the other generations running when one fails: they would go on
            # sending (and paying for) requests the failed call no longer books
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _solve(
        self, call: _Call[T], tally: Tally, first: _Raw | None = None
    ) -> tuple[T, str]:
        convo, budget = call.convo, call.budget
        grown = False
        last_problem: str | None = None
        while True:
            if first is not None:
                raw, first = first, None
            else:
                raw = (await self._complete(convo, call, budget, tally))[0]
            if raw.refusal:
                raise JudgeCallFailed(
                    f"the model refused to answer: {_shorten(raw.refusal)}", "refusal"
                )
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
                    + (f" even after raising it from {call.budget}" if grown else ""),
                    "truncated",
                )
            if raw.finish_reason == "content_filter":
                raise JudgeCallFailed("reply withheld by the endpoint's content filter", "refusal")
            try:
                obj = parse_json_object(raw.text)
                value = call.model.model_validate(obj)
                if call.check is not None:
                    call.check(value)
            except ValueError as exc:  # JSON, pydantic and check errors are all ValueErrors
                problem = error_text(exc)
                if tally.reasks >= call.max_reasks or problem == last_problem:
                    again = " (the same problem twice)" if problem == last_problem else ""
                    raise JudgeCallFailed(
                        f"no valid reply after {tally.reasks} re-ask(s){again}: "
                        f"{_shorten(problem)}",
                        "invalid_reply",
                    ) from exc
                last_problem = problem
                tally.reasks += 1
                convo = [*convo, *reask_messages(raw.text, problem)]
                continue
            return value, json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    async def _complete(
        self, convo: list[dict[str, str]], call: _Call[Any], budget: int, tally: Tally, n: int = 1
    ) -> list[_Raw]:
        if self.mode != "auto":
            return await self._request_n(self.mode, convo, call, budget, tally, n)
        mode = known_mode(self.base_url, self.model)
        if mode is None and self.batched:
            # No probe first: through a Batch API it would take a whole batch on its own.
            # Every request tries the modes in order; one refused goes into the next batch.
            mode = await self._stored_mode()
            if mode is None:
                return await self._try_modes(MODES, convo, call, budget, tally, n)
        if mode is None:
            async with probe_lock(self.base_url, self.model).hold():
                mode = known_mode(self.base_url, self.model) or await self._stored_mode()
                if mode is None:
                    return await self._try_modes(MODES, convo, call, budget, tally, n)
        # The remembered mode first; if it is refused now (another server on that address, an
        # upgrade), the others in order of preference.
        candidates = [mode, *(m for m in MODES if m != mode)]
        return await self._try_modes(candidates, convo, call, budget, tally, n)

    async def _try_modes(
        self,
        candidates: Sequence[Mode],
        convo: list[dict[str, str]],
        call: _Call[Any],
        budget: int,
        tally: Tally,
        n: int,
    ) -> list[_Raw]:
        for i, mode in enumerate(candidates):
            try:
                raws = await self._request_n(mode, convo, call, budget, tally, n)
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
            return raws
        raise AssertionError("unreachable: the last candidate mode returns or raises")

    async def _request_n(
        self,
        mode: Mode,
        convo: list[dict[str, str]],
        call: _Call[Any],
        budget: int,
        tally: Tally,
        n: int,
    ) -> list[_Raw]:
        """A request for ``n`` choices; whether the endpoint honours ``n`` is learnt here: a
        reply with fewer choices, or a 400/422 that the same request without ``n`` does not
        get, means it does not (then the one choice it gave is returned)."""
        if n == 1:
            return await self._request(mode, convo, call, budget, tally)
        try:
            raws = await self._request(mode, convo, call, budget, tally, n)
        except FatalJudgeError as exc:
            if exc.status not in (400, 422):
                raise
            # n may be what was refused; if the mode was, this raises too and the mode goes
            raws = await self._request(mode, convo, call, budget, tally)
            log.info("%s at %s refused n=%d (%s); one generation per request from now on",
                     self.model, self.base_url, n, exc.detail)  # fmt: skip
            remember_n_support(self.base_url, self.model, False)
            return raws
        remember_n_support(self.base_url, self.model, len(raws) >= n)
        return raws

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
        self,
        mode: Mode,
        convo: list[dict[str, str]],
        call: _Call[Any],
        budget: int,
        tally: Tally,
        n: int = 1,
    ) -> list[_Raw]:
        """One HTTP request (with its retries); its choices (one unless ``n`` > 1)."""
        messages, extra = build_request(mode, convo, call.shape)
        # json mode carries the schema in the messages, the other modes in `extra` (whose JSON
        # is made once per response model and mode)
        prompt = _estimate_prompt(messages, len(extra_body(mode, call.shape)))
        budget = self._fit(prompt, budget)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": call.temperature,
            "max_tokens": budget,
            **extra,
        }
        if n > 1:
            params["n"] = n
        if self.seed is not None:
            params["seed"] = self.seed
        estimate = prompt + budget * n
        spending = current_run().spending
        # the most this request can cost: its prompt and its whole reply budget
        reserved = (self._cost(prompt, budget * n) or 0.0) if spending is not None else 0.0
        if spending is not None:
            await spending.reserve(reserved)
        cost = 0.0  # a request that fails is not billed
        try:
            raws = await self._endpoint.post_json(
                "/chat/completions",
                params,
                read=functools.partial(_read_completion, mode=mode, n=n),
                estimated_tokens=estimate,
                tally=tally,
            )
            head = raws[0]
            if spending is not None:
                counted = self._cost(head.prompt_tokens, head.completion_tokens, head.cached_tokens)
                cost = reserved if counted is None or not head.counted else counted
        finally:
            if spending is not None:
                spending.settle(reserved, cost)
        tally.prompt_tokens += head.prompt_tokens
        tally.completion_tokens += head.completion_tokens
        tally.cached_tokens += head.cached_tokens
        used = head.prompt_tokens + head.completion_tokens
        if not self.batched:  # a batched request took no rate budget
            self._endpoint.limiter.settle(estimate, used if head.counted else estimate)
        return raws

    def _cost(self, prompt: int, completion: int, cached: int = 0) -> float | None:
        return self.prices.cost(
            self.model, prompt, completion, cached_tokens=cached, batch=self.batched
        )

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint client requests go out through (:mod:`rageval._client`); a run in batch
        mode gives it a Batch API queue in its run context (:mod:`rageval._client._run`)."""
        return self._endpoint

    @property
    def batched(self) -> bool:
        """Whether the current run sends this judge's requests through the endpoint's Batch API
        (priced at batch rates)."""
        return current_run().batch_queue(self._endpoint) is not None

    def _call_ended(
        self,
        started: float,
        usage: Usage,
        tags: Mapping[str, str] | None,
        error: BaseException | None,
    ) -> None:
        """Tell the current run's observers of a finished call."""
        run = current_run()
        if run.call_listeners:
            run.judge_call_ended(
                JudgeCall(
                    model=self.model,
                    base_url=self.base_url,
                    started=started,
                    ended=time.time(),
                    usage=usage,
                    tags=dict(tags or {}),
                    error=None if error is None else f"{type(error).__name__}: {error}",
                )
            )

    def book(self, usage: Usage, tags: Mapping[str, str] | None = None) -> None:
        """Book `usage` under `tags` in this judge's ledger and to the current run's meter."""
        self.usage.record(usage, tags)
        current_run().book(usage, tags)

    def _fit(self, prompt_tokens: int, budget: int) -> int:
        """The reply budget that fits beside the prompt, or JudgeCallFailed(input_too_long)
        when the prompt is over the limits: then nothing is sent and nothing is paid."""
        limit = self.max_prompt_tokens
        if limit is not None and prompt_tokens > limit:
            raise JudgeCallFailed(
                f"the prompt is about {prompt_tokens:,} tokens, over max_prompt_tokens="
                f"{limit:,}: not sent",
                "input_too_long",
            )
        window = context_window(self.model)
        if window is not None and prompt_tokens + budget > window:
            room = window - prompt_tokens
            if room < min(budget, MIN_REPLY_TOKENS):
                raise JudgeCallFailed(
                    f"the prompt is about {prompt_tokens:,} tokens, too long for the "
                    f"{window:,}-token context window of {self.model}: not sent",
                    "input_too_long",
                )
            budget = room
        return budget

    # -------------------------------------------------------------- helpers

    def _cache_key(self, call: _Call[Any], variant: str) -> str:
        # The configured mode, not the probed one: a lookup must not need a probe first.
        # (memoised per settings: they are public attributes a caller may change)
        memo = (call.shape.schema_json, self.base_url, self.model, call.temperature, call.budget,
                self.seed, self.mode, variant)  # fmt: skip
        settings = self._settings_keys.get(memo)
        if settings is None:
            settings = self._settings_keys[memo] = cache_key(
                {
                    "format": _CACHE_FORMAT,
                    "endpoint": self.base_url,
                    "model": self.model,
                    "temperature": call.temperature,
                    "max_tokens": call.budget,
                    "seed": self.seed,
                    "mode": self.mode,
                    "schema": call.shape.schema_json,
                    "variant": variant,
                }
            )
        # The messages are hashed as length-prefixed text rather than as JSON: the prompts are
        # most of a request, and escaping them to JSON cost more than the rest of a cache hit.
        digest = hashlib.sha256(settings.encode())
        for message in call.convo:
            content = message["content"].encode("utf-8", "surrogatepass")
            digest.update(f"\0{message['role']}\0{len(content)}\0".encode())
            digest.update(content)
        return digest.hexdigest()

    def pending_usage(self) -> Usage:
        """What the calls still in progress consumed so far: requests sent, retries after
        transient errors, re-asks (the ledger has each call once it ends). A progress display
        adds it to `usage.total` to show a stall's retries while it lasts."""
        calls = [list(tallies) for tallies in list(self._pending.values())]
        return sum((self._usage_of(tallies) for tallies in calls), Usage())

    def _usage_of(self, tallies: Sequence[Tally]) -> Usage:
        prompt = sum(t.prompt_tokens for t in tallies)
        completion = sum(t.completion_tokens for t in tallies)
        cached = sum(t.cached_tokens for t in tallies)
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            requests=sum(t.requests for t in tallies),
            retries=sum(t.retries for t in tallies),
            reasks=sum(t.reasks for t in tallies),
            cost_usd=self._cost(prompt, completion, cached),
            cached_tokens=cached,
        )


def llm_factory(model: str, client: Any = None, **kw: Any) -> Judge:
    """Build a :class:`Judge` (ragas' name for it): ``llm_factory("gpt-4o-mini", client=...)``."""
    return Judge(model, client=client, **kw)


def _read_completion(data: dict[str, Any], mode: Mode, n: int = 1) -> list[_Raw]:
    """The first ``n`` choices of a chat completion (a server may send fewer); the usage of the
    whole reply is booked on the first."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadBody("no choices[0].message in a chat completion")
    usage = data.get("usage")
    out = []
    for i, choice in enumerate(choices[:n]):
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise BadBody(f"no choices[{i}].message in a chat completion")
        message = choice["message"]
        finish_reason = choice.get("finish_reason")
        refusal = message.get("refusal")
        out.append(
            _Raw(
                reply_text(message, mode),
                finish_reason if isinstance(finish_reason, str) else None,
                refusal if isinstance(refusal, str) else None,
                prompt_tokens=_count(usage, "prompt_tokens") if i == 0 else 0,
                completion_tokens=_count(usage, "completion_tokens") if i == 0 else 0,
                counted=isinstance(usage, dict),
                cached_tokens=_cached_count(usage) if i == 0 else 0,
            )
        )
    return out


def _count(usage: Any, field: str) -> int:
    value = usage.get(field) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


def _cached_count(usage: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens``: the prompt tokens served from the
    provider's prompt cache (never more than the prompt)."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    return min(_count(details, "cached_tokens"), _count(usage, "prompt_tokens"))


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


def _revalidate(text: str, response_model: type[T], check: Callable[[T], None] | None) -> T | None:
    """A cached value, if it still validates (the model or the check may have changed)."""
    try:
        value = response_model.model_validate_json(text)
        if check is not None:
            check(value)
    except ValueError:
        return None
    return value


def _revalidate_all(
    text: str, *, response_model: type[T], check: Callable[[T], None] | None, n: int
) -> list[T] | None:
    """The ``n`` cached values of an ``ask_n``, if every one still validates."""
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if not isinstance(items, list) or len(items) != n:
        return None
    values = []
    for item in items:
        value = _revalidate(json.dumps(item), response_model=response_model, check=check)
        if value is None:
            return None
        values.append(value)
    return values


def _estimate_prompt(messages: list[dict[str, Any]], schema_chars: int) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in messages) + schema_chars
    return chars // CHARS_PER_TOKEN + 4 * len(messages)


def _shorten(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
