"""The ``"openai"`` judge backend: any OpenAI-compatible chat completions endpoint.

``POST {base_url}/chat/completions`` with the schema in one of the structured-output modes of
:mod:`rageval.judge._modes`. A judge in ``mode="auto"`` probes the modes per (endpoint, model)
and remembers the one that works, for the process and in the request cache's directory. ``n``
generations are asked for in one request where the endpoint honours ``n``, which is learnt
from the first such request.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rageval._client._run import current_run
from rageval._client._transport import BadBody
from rageval.errors import FatalJudgeError
from rageval.judge._backend import (
    Completion,
    CompletionRequest,
    Exchange,
    TokenLogprob,
    count,
    estimate_prompt_tokens,
)
from rageval.judge._modes import (
    MODES,
    Mode,
    build_request,
    extra_body,
    known_mode,
    known_n_support,
    probe_lock,
    remember_mode,
    remember_n_support,
    reply_text,
)

if TYPE_CHECKING:
    from rageval._client._cache import RequestCache
    from rageval._client._endpoint import Endpoint

__all__ = ["OpenAIBackend"]

log = logging.getLogger("rageval.judge")

# a 400/422 to a request means its structured-output mode (or its n) was refused
_REFUSED = (400, 422)


class OpenAIBackend:
    """Chat completions of one model at one OpenAI-compatible endpoint; the probed modes are
    remembered in ``modes`` (a request cache), when there is one."""

    kind = "openai"

    def __init__(self, endpoint: Endpoint, model: str, modes: RequestCache | None) -> None:
        self.endpoint = endpoint
        self.model = model
        self._modes = modes

    # ------------------------------------------------------------ identity

    def structured_output(self, mode: str, *, settled: bool) -> str | None:
        if mode != "auto":
            return mode
        found = known_mode(self.endpoint.base_url, self.model)
        if found is not None or settled:
            return found
        stored = self._modes.get_mode(self.endpoint.base_url, self.model) if self._modes else None
        return next((m for m in MODES if m == stored), MODES[0])

    def honours_n(self) -> bool | None:
        return known_n_support(self.endpoint.base_url, self.model)

    def cache_identity(self) -> dict[str, Any]:
        # nothing beside the judge's own settings: the keys stay those of the rageval versions
        # before there were backends, so the requests they cached are still answered
        return {}

    def preview(self, request: CompletionRequest) -> tuple[list[dict[str, Any]], str]:
        mode = self._mode(self.structured_output(request.mode, settled=False) or MODES[0])
        sent, _ = build_request(mode, request.messages, request.shape)
        return sent, extra_body(mode, request.shape).decode()

    # ------------------------------------------------------------- sending

    async def complete(self, request: CompletionRequest, exchange: Exchange) -> list[Completion]:
        if request.mode != "auto":
            return await self._request_n(self._mode(request.mode), request, exchange)
        base_url = self.endpoint.base_url
        mode = known_mode(base_url, self.model)
        if mode is None and current_run().batch_queue(self.endpoint) is not None:
            # No probe first: through a Batch API it would take a whole batch on its own.
            # Every request tries the modes in order; one refused goes into the next batch.
            mode = self._stored_mode()
            if mode is None:
                return await self._try_modes(MODES, request, exchange)
        if mode is None:
            async with probe_lock(base_url, self.model).hold():
                mode = known_mode(base_url, self.model) or self._stored_mode()
                if mode is None:
                    return await self._try_modes(MODES, request, exchange)
        # The remembered mode first; if it is refused now (another server on that address, an
        # upgrade), the others in order of preference.
        candidates = [mode, *(m for m in MODES if m != mode)]
        return await self._try_modes(candidates, request, exchange)

    async def _try_modes(
        self, candidates: Sequence[Mode], request: CompletionRequest, exchange: Exchange
    ) -> list[Completion]:
        base_url = self.endpoint.base_url
        for i, mode in enumerate(candidates):
            try:
                replies = await self._request_n(mode, request, exchange)
            except FatalJudgeError as exc:
                if exc.status in _REFUSED and i + 1 < len(candidates):
                    log.info("%s at %s refused structured-output mode %s (%s); trying %s",
                             self.model, base_url, mode, exc.detail, candidates[i + 1])  # fmt: skip
                    continue
                raise
            if known_mode(base_url, self.model) != mode:
                remember_mode(base_url, self.model, mode)
                if self._modes is not None:
                    self._modes.set_mode(base_url, self.model, mode)
            return replies
        raise AssertionError("unreachable: the last candidate mode returns or raises")

    async def _request_n(
        self, mode: Mode, request: CompletionRequest, exchange: Exchange
    ) -> list[Completion]:
        """A request for ``n`` choices; whether the endpoint honours ``n`` is learnt here: a
        reply with fewer choices, or a 400/422 that the same request without ``n`` does not
        get, means it does not (then the one choice it gave is returned)."""
        if request.n == 1:
            return await self._request(mode, request, exchange, 1)
        unknown = known_n_support(self.endpoint.base_url, self.model) is None
        # one call learns it while the others wait: calls started together would each send
        # their n and each be refused (llama-server answers 400 to n > 1). Not through a Batch
        # API, where the wait would be a whole batch: there each line learns it for itself.
        if unknown and current_run().batch_queue(self.endpoint) is None:
            async with probe_lock(self.endpoint.base_url, self.model, "n").hold():
                return await self._request_n_known(mode, request, exchange)
        return await self._request_n_known(mode, request, exchange)

    async def _request_n_known(
        self, mode: Mode, request: CompletionRequest, exchange: Exchange
    ) -> list[Completion]:
        if known_n_support(self.endpoint.base_url, self.model) is False:
            return await self._request(mode, request, exchange, 1)
        try:
            replies = await self._request(mode, request, exchange, request.n)
        except FatalJudgeError as exc:
            if exc.status not in _REFUSED:
                raise
            # n may be what was refused; if the mode was, this raises too and the mode goes
            replies = await self._request(mode, request, exchange, 1)
            log.info("%s at %s refused n=%d (%s); one generation per request from now on",
                     self.model, self.endpoint.base_url, request.n, exc.detail)  # fmt: skip
            remember_n_support(self.endpoint.base_url, self.model, False)
            return replies
        remember_n_support(self.endpoint.base_url, self.model, len(replies) >= request.n)
        return replies

    def _stored_mode(self) -> Mode | None:
        if self._modes is None:
            return None
        stored = self._modes.get_mode(self.endpoint.base_url, self.model)
        for mode in MODES:
            if stored == mode:
                remember_mode(self.endpoint.base_url, self.model, mode)
                return mode
        return None

    async def _request(
        self, mode: Mode, request: CompletionRequest, exchange: Exchange, n: int
    ) -> list[Completion]:
        """One HTTP request (with its retries); its choices (one unless ``n`` > 1)."""
        messages, extra = build_request(mode, request.messages, request.shape)
        # json mode carries the schema in the messages, the other modes in `extra` (whose JSON
        # is made once per response model and mode)
        prompt = estimate_prompt_tokens(messages, len(extra_body(mode, request.shape)))

        def body(max_tokens: int) -> dict[str, Any]:
            params: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": request.temperature,
                "max_tokens": max_tokens,
                **extra,
            }
            if n > 1:
                params["n"] = n
            if request.top_logprobs and mode != "tools":
                # a tool call's arguments have no log-probabilities in the chat API
                params["logprobs"] = True
                params["top_logprobs"] = request.top_logprobs
            if request.seed is not None:
                params["seed"] = request.seed
            return params

        return await exchange.post_json(
            self.endpoint,
            "/chat/completions",
            body,
            read=functools.partial(_read_completion, mode=mode, n=n),
            prompt_tokens=prompt,
            max_tokens=request.max_tokens,
            n=n,
        )

    @staticmethod
    def _mode(mode: str) -> Mode:
        return next(m for m in MODES if m == mode)


def _read_completion(data: dict[str, Any], mode: Mode, n: int = 1) -> list[Completion]:
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
            Completion(
                reply_text(message, mode),
                finish_reason if isinstance(finish_reason, str) else None,
                refusal if isinstance(refusal, str) else None,
                prompt_tokens=count(usage, "prompt_tokens") if i == 0 else 0,
                completion_tokens=count(usage, "completion_tokens") if i == 0 else 0,
                counted=isinstance(usage, dict),
                cached_tokens=_cached_count(usage) if i == 0 else 0,
                tokens=_read_logprobs(choice.get("logprobs")) if mode != "tools" else None,
            )
        )
    return out


def _read_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """``choices[i].logprobs.content``: each token with its log-probability and its
    ``top_logprobs``; None when the reply has none or they are not in that form (a server's
    other shapes are not guessed at: the choices then keep their sampled values)."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    out = []
    for entry in content:
        token = entry.get("token") if isinstance(entry, dict) else None
        logprob = (
            _logprob(entry["logprob"]) if isinstance(entry, dict) and "logprob" in entry else None
        )
        if not isinstance(token, str) or logprob is None:
            return None
        top = entry.get("top_logprobs")
        alternatives = []
        for alt in top if isinstance(top, list) else ():
            value = _logprob(alt["logprob"]) if isinstance(alt, dict) and "logprob" in alt else None
            if value is not None and isinstance(alt.get("token"), str):
                alternatives.append((alt["token"], value))
        raw = entry.get("bytes")
        whole = isinstance(raw, list) and all(_is_byte(b) for b in raw)
        out.append(TokenLogprob(token, logprob, tuple(alternatives), bytes(raw) if whole else None))
    return tuple(out)


def _logprob(value: Any) -> float | None:
    """A log-probability as sent: a number, or null for a probability of 0 (llama.cpp writes
    log(0) = -inf as null: a token its grammar forced that the model gave no chance)."""
    if value is None:
        return -math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _is_byte(value: Any) -> bool:
    return isinstance(value, int) and 0 <= value < 256


def _cached_count(usage: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens``: the prompt tokens served from the
    provider's prompt cache (never more than the prompt)."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    return min(count(details, "cached_tokens"), count(usage, "prompt_tokens"))
