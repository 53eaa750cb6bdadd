"""The Judge: structured, validated, cached, accounted calls to one chat model."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from rageval._client._cache import RequestCache, cache_key, cache_location
from rageval._client._endpoint import Endpoint, EndpointClient, PlainHTTP
from rageval._client._run import JudgeCall, current_run
from rageval._client._settings import EndpointOptions, Limits
from rageval._client._usage import PriceTable, Tally, Usage, price_record
from rageval.errors import FatalJudgeError, JudgeCallFailed
from rageval.judge._backend import (
    Completion,
    CompletionRequest,
    Exchange,
    Grant,
    JudgeBackend,
    Post,
)
from rageval.judge._budget import (
    context_window,
    cut_short,
    fit_budget,
    grown_budget,
    window_cut,
)
from rageval.judge._cached import revalidate_all, revalidate_scored
from rageval.judge._modes import (
    MODES,
    Shape,
    error_text,
    loops,
    parse_json_object,
    reask_messages,
    shape_of,
)
from rageval.judge._probabilities import (
    NO_LOGPROBS,
    SAMPLED,
    SCORINGS,
    TOP_LOGPROBS,
    Path,
    ReplyScoring,
    Scoring,
    choice_leaves,
    fallback_scoring,
    gives_logprobs,
    remember_no_logprobs,
    score_reply,
    stored_reply,
)
from rageval.judge._registry import BackendTraits, backend_traits
from rageval.judge._spec import JudgeSpec

if TYPE_CHECKING:
    from pydantic import BaseModel
    from typing_extensions import Unpack

__all__ = [
    "Judge",
    "JudgeReplies",
    "JudgeReply",
    "llm_factory",
]

log = logging.getLogger("rageval.judge")

T = TypeVar("T", bound="BaseModel")
R = TypeVar("R")

# Replies in a row that fail validation with the same problem end a call, whatever re-asks it
# has left (a judge that answers prose, or the same off-scale rating, this often will not do
# better next time).
SAME_PROBLEM_LIMIT = 3
# 3: the call's own budget, temperature and number of choices are part of the key
_CACHE_FORMAT = 3
_ROLES = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True)
class JudgeReply(Generic[T]):
    """The validated reply of :meth:`Judge.ask`, what it cost, and how its choices (verdicts,
    ratings) were scored: by the probabilities of their options where the judge's `scoring`
    asked for log-probabilities and the endpoint gave them (:mod:`rageval.judge._probabilities`)."""

    value: T
    usage: Usage
    cached: bool = False
    scoring: ReplyScoring = SAMPLED


@dataclass(frozen=True)
class JudgeReplies(Generic[T]):
    """The ``n`` validated replies of :meth:`Judge.ask_n`, in the order they came."""

    values: list[T]
    usage: Usage
    cached: bool = False


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
    #: the choices of the response model (its booleans and enums), by path
    leaves: Mapping[Path, tuple[Any, ...]]
    #: the choices are scored by probability: log-probabilities are asked for (unless the
    #: endpoint was found to give none), and the cache keys on the judge's scoring
    scored: bool


class Judge(EndpointClient):
    """A chat model asked for validated JSON, through a backend (:mod:`rageval.judge._backend`):
    ``backend="openai"`` (the default) for any OpenAI-compatible endpoint, ``"anthropic"`` for
    Anthropic's Messages API, or the kind of a backend another package registers
    (:mod:`rageval.judge._registry`; docs/backends.md).

    The endpoint is ``base_url`` (default for ``"openai"``: ``RAGEVAL_BASE_URL``,
    ``OPENAI_BASE_URL``, OpenAI; for ``"anthropic"``: Anthropic's API) or the openai ``client``
    given; the API key is ``api_key`` or the environment variable ``api_key_env`` (default
    ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` for ``"anthropic"``), and is never written
    anywhere. ``limits`` (a :class:`Limits`: concurrency,
    requests and tokens per minute, shared by every client of the endpoint; default 16
    concurrent requests) and ``retry`` (a :class:`RetryPolicy`: retries and the timeout of one
    attempt; default 6 and 60 s) may be given as objects or through their shorthands
    ``max_concurrency``, ``requests_per_minute``, ``tokens_per_minute``, ``max_retries`` and
    ``timeout``. Successful replies are cached (:mod:`rageval._client._cache`) unless
    ``cache=False``. ``mode`` picks the structured-output mode; ``"auto"`` probes (see
    :mod:`rageval.judge._modes`; the ``"anthropic"`` backend has one, ``"tools"``).
    :attr:`spec` states all these settings in one object, which :meth:`from_spec` takes.

    ``max_tokens`` is the smallest reply budget of a request: a call that asks for more (a
    metric sizes it from the number of items it asks about) gets more. A prompt estimated to
    exceed ``max_prompt_tokens``, or the model's context window when it is a known model
    (:data:`~rageval.judge._budget.CONTEXT_WINDOWS`) or a llama.cpp server the run checked,
    is not sent: the call fails with kind ``input_too_long``
    (:func:`~rageval.judge._budget.fit_budget`).
    """

    def __init__(
        self,
        model: str,
        *,
        backend: str = "openai",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        cache: RequestCache | bool | str | os.PathLike[str] = True,
        prices: PriceTable | None = None,
        mode: Literal["auto", "json_schema", "tools", "json"] = "auto",
        max_reasks: int = 2,
        max_prompt_tokens: int | None = None,
        scoring: Scoring = "auto",
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        traits = backend_traits(backend)
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"mode must be 'auto' or one of {MODES}, got {mode!r}")
        if mode != "auto" and mode not in traits.structured_modes:
            raise ValueError(
                f"the {backend} backend answers through {' or '.join(traits.structured_modes)}:"
                f" mode {mode!r}"
            )
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
        if scoring == "probabilities" and not traits.logprobs:
            raise ValueError(
                f"scoring='probabilities': the {backend} backend's API returns no "
                "log-probabilities (use 'auto' or 'sampled')"
            )
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if max_reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {max_reasks}")
        if max_prompt_tokens is not None and max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1 or None, got {max_prompt_tokens}")
        # no concurrency of the judge's own: the endpoint's default (16) unless the user
        # chooses one; a chosen one is what a run never overrides (a llama.cpp server's slots)
        limits = Limits()
        plain_http = None
        if traits.default_base_url is not None:  # not found the OpenAI way: its own address
            plain_http = PlainHTTP(traits.default_base_url, traits.auth_headers)
        endpoint.setdefault("api_key_env", traits.api_key_env)
        if prices is None and traits.prices:
            prices = PriceTable(traits.prices)
        self._connect("judge", model, limits, cache, prices, endpoint, plain_http)
        #: what the backend is like (its registered traits)
        self.traits: BackendTraits = traits
        self.backend: JudgeBackend = traits.make(self._endpoint, model, self.cache)
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.seed = seed
        self.mode = mode
        self.max_reasks = max_reasks
        self.max_prompt_tokens = max_prompt_tokens
        #: how verdicts and ratings are scored: "probabilities" of their options read from the
        #: reply's token log-probabilities, "sampled" values, or "auto" (the probabilities
        #: where the endpoint returns them); docs/judge-probabilities.md
        self.scoring: Scoring = scoring
        self._settings_keys: dict[tuple[Any, ...], str] = {}
        # the calls in progress, by id: the tallies of what each consumed so far (see
        # pending_usage)
        self._pending: dict[int, list[Tally]] = {}

    @classmethod
    def from_spec(
        cls,
        spec: JudgeSpec,
        *,
        api_key: str | None = None,
        cache: RequestCache | bool | str | os.PathLike[str] = True,
        prices: PriceTable | None = None,
    ) -> Judge:
        """The judge `spec` states, with its key from `api_key` or the spec's variable."""
        arguments = spec.judge_arguments()
        if api_key is not None:
            arguments["api_key"] = api_key
        return cls(spec.model, **arguments, cache=cache, prices=prices)

    @property
    def spec(self) -> JudgeSpec:
        """This judge's settings, all in one object (the key, prices and cache aside)."""
        endpoint, limiter = self._endpoint, self._endpoint.limiter
        return JudgeSpec(
            model=self.model,
            backend=self.traits.kind,
            base_url=self.base_url,
            api_key_env=endpoint.api_key_env,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            max_prompt_tokens=self.max_prompt_tokens,
            seed=self.seed,
            mode=self.mode,
            scoring=self.scoring,
            max_reasks=self.max_reasks,
            timeout=endpoint.timeout if endpoint.timeout_chosen else None,
            max_retries=endpoint.max_retries,
            max_concurrency=limiter.max_concurrency,
            requests_per_minute=limiter.requests_per_minute,
            tokens_per_minute=limiter.tokens_per_minute,
        )

    def describe(self) -> dict[str, Any]:
        """Settings for run manifests: the :attr:`spec`, where the key and the cache come
        from, what is known of the model and its price (never the API key)."""
        return {
            **self.spec.model_dump(),
            "api_key_from": self._endpoint.key_source,
            "cache": cache_location(self.cache),
            "context_window": context_window(self.model),
            "structured_output": self.backend.structured_output(self.mode, settled=True),
            # the price the run's cost and budget used, so that a resume prices as it did
            "price": price_record(self.prices.price(self.model)),
        }

    def __repr__(self) -> str:
        return (
            f"Judge(model={self.model!r}, backend={self.backend.kind!r}, "
            f"base_url={self.base_url!r}, mode={self.mode!r})"
        )

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

    def structured_mode(self) -> str:
        """The structured-output mode requests are sent in: the configured one, else the one
        probed (this process, or remembered in the request cache), else the first to try."""
        return self.backend.structured_output(self.mode, settled=False) or MODES[0]

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
        budget = max(self.max_tokens, max_tokens or 0)
        request = CompletionRequest(_clean_messages(messages), shape_of(response_model),
                                    self.temperature, budget, self.seed, self.mode)  # fmt: skip
        sent, schema = self.backend.preview(request)
        return sent, schema, budget

    def honours_n(self) -> bool | None:
        """Whether the endpoint returns the ``n`` generations one request asks for (learnt
        from the first such request; None before)."""
        return self.backend.honours_n()

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
        call = self._call(
            messages, response_model, check, max_reasks, max_tokens, temperature, scoring=True
        )

        async def solve(tallies: list[Tally]) -> tuple[tuple[T, ReplyScoring], str]:
            tallies.append(tally := Tally())
            value, raw, scoring = await self._solve(call, tally)
            # a reply scored by probability is cached with its scoring
            return (value, scoring), stored_reply(raw, scoring) if call.scored else raw

        revalidate = functools.partial(
            revalidate_scored,
            response_model=response_model,
            check=check,
            leaves=call.leaves,
            scored=call.scored,
        )
        (value, scoring), usage, cached = await self._answer(call, "", tags, revalidate, solve)
        return JudgeReply(value, usage, cached, scoring)

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
            return [s[0] for s in solved], "[" + ",".join(s[1] for s in solved) + "]"

        revalidate = functools.partial(
            revalidate_all, response_model=response_model, check=check, n=n
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
        *,
        scoring: bool = False,
    ) -> _Call[T]:
        """One ask's settings; with `scoring` (:meth:`ask`, not :meth:`ask_n`) its choices are
        scored by probability as the judge's :attr:`scoring` says."""
        self._endpoint.check_fatal()
        reasks = self.max_reasks if max_reasks is None else max_reasks
        if reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {reasks}")
        shape = shape_of(response_model)
        leaves = choice_leaves(shape.schema_json)
        return _Call(
            convo=_clean_messages(messages),
            shape=shape,
            model=response_model,
            check=check,
            max_reasks=reasks,
            budget=max(self.max_tokens, max_tokens or 0),
            temperature=self.temperature if temperature is None else float(temperature),
            leaves=leaves,
            scored=scoring and bool(leaves) and self.scoring != "sampled" and self.traits.logprobs,
        )

    async def _solve_n(self, call: _Call[T], n: int, tallies: list[Tally]) -> list[tuple[T, str]]:
        firsts: list[Completion | None] = []
        budget = call.budget
        if n > 1 and self.backend.honours_n() is not False:
            tallies.append(tally := Tally())
            replies = (await self._complete(call.convo, call, budget, tally, n))[:n]
            bigger = grown_budget(budget)
            window = self._window()[1]
            cut = all(cut_short(c, budget, window) for c in replies)
            if len(replies) == n and bigger > budget and cut:
                # every generation hit the limit: the n of them again in one request with the
                # larger budget, not in n requests of one (each a new chance to fail)
                log.info("replies truncated at max_tokens=%d; asking again with %d", budget, bigger)
                budget = bigger
                replies = (await self._complete(call.convo, call, budget, tally, n))[:n]
            firsts = list(replies)
        # generations the endpoint did not return are asked for one by one
        firsts += [None] * (n - len(firsts))
        return [(v, raw) for v, raw, _ in await self._solve_each(call, firsts, tallies, budget)]

    async def _solve_each(
        self,
        call: _Call[T],
        firsts: Sequence[Completion | None],
        tallies: list[Tally],
        budget: int,
    ) -> list[tuple[T, str, ReplyScoring]]:
        """Each generation validated (and re-asked) on its own; None: ask for it afresh. The
        reply `budget` is the call's, or the larger one the n generations were asked with."""
        mine = [Tally() for _ in firsts]
        tallies.extend(mine)
        tasks = [
            asyncio.ensure_future(self._solve(call, t, first, budget))
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
        self,
        call: _Call[T],
        tally: Tally,
        first: Completion | None = None,
        budget: int | None = None,
    ) -> tuple[T, str, ReplyScoring]:
        convo = call.convo
        budget = call.budget if budget is None else budget
        grown = budget > call.budget
        last_problem: str | None = None
        in_a_row = 0  # replies in a row, up to this one, that met the same problem
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
                sent = raw.max_tokens or budget
                if loops(raw.text):
                    raise JudgeCallFailed(
                        f"reply truncated: the model repeated the same text until it hit the "
                        f"output token limit (max_tokens={sent}): ...{_shorten(raw.text[-120:])}",
                        "truncated",
                    )
                full = window_cut(raw, budget, self._window()[1])
                bigger = grown_budget(budget)
                if not grown and bigger > budget and not full:
                    log.info(
                        "reply truncated at max_tokens=%d; asking again with %d", budget, bigger
                    )
                    budget, grown = bigger, True
                    continue
                got = raw.completion_tokens if 0 < raw.completion_tokens < sent else sent
                cause = f"it hit the output token limit (max_tokens={sent})"
                if full:  # all the room beside the prompt: fewer tokens than sent, or all of them
                    cause = f"the context window had no room beside the prompt past {got} tokens"
                elif got < sent:  # stopped early, with room left in a window not known full
                    cause = f"the endpoint stopped it after {got} tokens (max_tokens={sent})"
                if grown and not full:
                    cause += f" even after raising it from {call.budget}"
                raise JudgeCallFailed(f"reply truncated: {cause}", "truncated")
            if raw.finish_reason == "content_filter":
                raise JudgeCallFailed("reply withheld by the endpoint's content filter", "refusal")
            try:
                obj = parse_json_object(raw.text)
                value = call.model.model_validate(obj)
                if call.check is not None:
                    call.check(value)
            except ValueError as exc:  # JSON, pydantic and check errors are all ValueErrors
                problem = error_text(exc)
                in_a_row = in_a_row + 1 if problem == last_problem else 1
                # one repeat is forgiven: a transient fault (a proxy's canned prose) can meet
                # the re-ask too, and a call lost there can lose a whole conversation's cell;
                # a judge that makes the same mistake three times in a row will not do better
                # a fourth time
                if tally.reasks >= call.max_reasks or in_a_row >= SAME_PROBLEM_LIMIT:
                    again = f" (the same problem {in_a_row} times in a row)" if in_a_row > 1 else ""
                    raise JudgeCallFailed(
                        f"no valid reply after {tally.reasks} re-ask(s){again}: "
                        f"{_shorten(problem)}",
                        "invalid_reply",
                    ) from exc
                last_problem = problem
                tally.reasks += 1
                convo = [*convo, *reask_messages(raw.text, problem)]
                continue
            text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            return value, text, self._scoring(call, raw, obj)

    def _scoring(self, call: _Call[Any], raw: Completion, obj: dict[str, Any]) -> ReplyScoring:
        """How the choices of the valid reply `raw` (parsed as `obj`) are scored; a reply
        without log-probabilities to a call that asked for them stops "auto" asking this
        endpoint."""
        if not call.scored:
            return fallback_scoring(obj, call.leaves, "sampled", None) if call.leaves else SAMPLED
        if raw.tokens is None and self.scoring == "auto":
            # "auto" scores by sampled values where the endpoint gives no log-probabilities
            remember_no_logprobs(self.base_url, self.model)
            return fallback_scoring(obj, call.leaves, "sampled", NO_LOGPROBS)
        return score_reply(raw.text, obj, raw.tokens, call.leaves)

    async def _complete(
        self, convo: list[dict[str, str]], call: _Call[Any], budget: int, tally: Tally, n: int = 1
    ) -> list[Completion]:
        asks = call.scored and (self.scoring != "auto" or gives_logprobs(self.base_url, self.model))
        request = CompletionRequest(convo, call.shape, call.temperature, budget, self.seed,
                                    self.mode, n, TOP_LOGPROBS if asks else 0)  # fmt: skip
        exchange = Exchange(tally, functools.partial(self._send, tally))
        return await self.backend.complete(request, exchange)

    async def _send(
        self,
        tally: Tally,
        prompt: int,
        budget: int,
        n: int,
        post: Post,
    ) -> list[Completion]:
        """One HTTP request of a backend: the reply budget fitted beside the prompt, the most
        it can cost reserved from the run's budget and settled with the usage read back, its
        tokens counted (the :meth:`~rageval.judge._backend.Exchange.send` of a call)."""
        budget = self._fit(prompt, budget)
        estimate = prompt + budget * n
        spending = current_run().spending
        # the most this request can cost: its prompt and its whole reply budget
        reserved = (self._cost(prompt, budget * n) or 0.0) if spending is not None else 0.0
        if spending is not None:
            await spending.reserve(reserved)
        cost = 0.0  # a request that fails is not billed
        try:
            replies = [
                dataclasses.replace(reply, max_tokens=budget)
                for reply in await post(Grant(max_tokens=budget, estimated_tokens=estimate))
            ]
            head = replies[0]
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
        return replies

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
                    backend=self.backend.kind,
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

    def _window(self) -> tuple[str, int | None]:
        """Whose context window each request must fit in, and its tokens (None: not known):
        the llama.cpp server's this run follows, else the one the endpoint's model list gave
        (vLLM's ``max_model_len``), else a known model's."""
        run = current_run()
        server = run.server_slots.get(id(self._endpoint))
        if server is not None and server.context:
            return f"the llama.cpp server at {self.base_url}", server.context
        listed = run.windows.get(id(self._endpoint))
        if listed is not None:
            return f"{self.model} at {self.base_url}", listed
        return self.model, context_window(self.model)

    def _fit(self, prompt_tokens: int, budget: int) -> int:
        """The reply budget that fits beside the prompt (:func:`fit_budget`) in the context
        window of :meth:`_window`."""
        where, window = self._window()
        return fit_budget(prompt_tokens, budget, self.max_prompt_tokens, window, where)

    # -------------------------------------------------------------- helpers

    def _cache_key(self, call: _Call[Any], variant: str) -> str:
        # The configured mode, not the probed one: a lookup must not need a probe first.
        # (memoised per settings: they are public attributes a caller may change)
        scoring = self.scoring if call.scored else None
        memo = (call.shape.schema_json, self.base_url, self.model, call.temperature, call.budget,
                self.seed, self.mode, variant, self.backend.kind, scoring)  # fmt: skip
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
                    **self.backend.cache_identity(),
                    # only where probabilities score the reply: other requests keep their keys
                    **({"scoring": scoring} if scoring else {}),
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
        """What the requests of one call consumed, priced on their tokens together."""
        total = Tally()
        for tally in tallies:
            total.add(tally)
        total.cost_usd = self._cost(
            total.prompt_tokens, total.completion_tokens, total.cached_tokens
        )
        return total.usage()


def llm_factory(model: str, client: Any = None, **kw: Any) -> Judge:
    """Build a :class:`Judge` (ragas' name for it): ``llm_factory("gpt-4o-mini", client=...)``.

    Args:
        model: the judge model's name at its endpoint.
        client: an ``openai.AsyncOpenAI`` (or Azure) client to send the requests through, used
            as it is; None builds one from ``base_url``, ``api_key`` or the environment.
        **kw: any other keyword argument of :class:`Judge` (``base_url``, ``limits``, ``retry``,
            ``prices``, ``backend``...).
    """
    return Judge(model, client=client, **kw)


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


def _shorten(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
