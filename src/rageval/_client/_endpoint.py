"""One configured connection to an OpenAI-compatible endpoint, shared by judges and embeddings.

It owns the API key (kept out of every repr, log line and error message), the ``openai`` client
(created lazily, which is when the SDK is first imported, with the SDK's own retries off), the
endpoint's process-wide limiter, and the memory of a fatal error: once the endpoint refused for
good, every later request raises at once without sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from rageval import _env
from rageval._client._cache import RequestCache, cache_location, resolve_cache
from rageval._client._limiter import endpoint_limiter
from rageval._client._retry import (
    BatchLineLost,
    Target,
    backoff_delay,
    call_with_retries,
)
from rageval._client._run import current_run
from rageval._client._settings import (
    EndpointOptions,
    EndpointSettings,
    Limits,
    endpoint_settings,
)
from rageval._client._transport import DirectSender, SdkSender, Sender, _httpx, post_json
from rageval._client._usage import PriceTable, Tally, UsageLedger
from rageval._sync import close_with_loop
from rageval.errors import FatalJudgeError

__all__ = ["Endpoint", "PlainHTTP", "normalize_base_url"]

R = TypeVar("R")

# The SDK refuses to build a client without some key; local servers (Ollama, vLLM, llama.cpp)
# accept any, and a real endpoint answers 401, which names the variable that was not set.
_NO_KEY = "no-key-set"


def normalize_base_url(url: str) -> str:
    """Lower-case scheme and host, no trailing slash: the endpoint's identity."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base URL must start with http:// or https://, got {url!r}")
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


@dataclass(frozen=True)
class PlainHTTP:
    """An endpoint that is not OpenAI-compatible (Anthropic's Messages API): its requests are
    sent by rageval's HTTP client with these `headers` (made from the API key), and without a
    base URL it is `default_base_url` (the OpenAI variables do not apply)."""

    default_base_url: str
    headers: Callable[[str | None], Mapping[str, str]]


class _Secret:
    """Holds the API key; prints as *** so it cannot leak through repr or vars()."""

    __slots__ = ("value",)

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'***'" if self.value else "None"


class Endpoint:
    """One configured connection: see the module docstring."""

    def __init__(
        self,
        *,
        kind: str,
        model: str,
        settings: EndpointSettings,
        plain_http: PlainHTTP | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError("model must be a non-empty string")
        if plain_http is not None and settings.client is not None:
            raise TypeError("an openai client cannot send to this API; give base_url= instead")
        self.kind = kind
        self._plain_http = plain_http
        self.model = model
        self.timeout = float(settings.retry.timeout)
        self.timeout_chosen = settings.timeout_given
        self.max_retries = settings.retry.max_retries
        self.api_key_env = settings.api_key_env
        self._lock = threading.Lock()
        self._given_client: Any = None
        self._given_client_used = False
        self._client_kwargs: dict[str, Any] = {}
        # per event loop: the SDK client and the sender that uses it
        self._senders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Sender]] = (
            weakref.WeakKeyDictionary()
        )
        if settings.client is not None:
            self._adopt(settings.client)
        else:
            if settings.api_key is not None:
                self._key, self.key_source = _Secret(settings.api_key), "the api_key argument"
            else:
                from_env = _env.api_key(settings.api_key_env)
                self._key = _Secret(from_env)
                self.key_source = (
                    settings.api_key_env
                    if from_env
                    else f"{settings.api_key_env} (which is not set)"
                )
            self.base_url = normalize_base_url(
                _env.base_url(settings.base_url)
                if plain_http is None
                else settings.base_url or plain_http.default_base_url
            )
        self.limiter = endpoint_limiter(self.base_url, settings.limits)
        self.target = Target(
            kind=kind,
            base_url=self.base_url,
            model=model,
            key_source=self.key_source,
            secret=self._key.value,
            timeout=self.timeout,
        )
        self._fatal: FatalJudgeError | None = None
        self._reached = False

    def _adopt(self, client: Any) -> None:
        import openai  # already imported by whoever built the client

        if isinstance(client, openai.AsyncOpenAI):
            self._given_client = client.with_options(max_retries=0)
        elif type(client) is openai.OpenAI:
            # A sync client cannot serve async calls: rebuild its settings as async clients.
            self._client_kwargs = {
                "organization": client.organization,
                "project": client.project,
            }
        else:
            raise TypeError(
                f"client must be an openai.AsyncOpenAI or openai.OpenAI, got {type(client).__name__}"
                " (for Azure pass an openai.AsyncAzureOpenAI)"
            )
        key = client.api_key if isinstance(client.api_key, str) else None
        self._key, self.key_source = _Secret(key), "the given client"
        self.base_url = normalize_base_url(str(client.base_url))

    # ---------------------------------------------------------------- client

    async def sender(self) -> Sender:
        """How requests go out on the running loop (an HTTP pool belongs to one loop).

        rageval's own client sends directly through its HTTP client (see
        :mod:`rageval._client._transport`). A client the user gave is used as is, through the
        SDK's ``post()``, on the first loop that needs it (keeping any custom http_client);
        other loops, e.g. each sync `score()` call, get copies of it with a pool of their own.
        """
        if "openai" not in sys.modules:
            # the first import takes seconds on a slow machine: keep the event loop responsive
            await asyncio.to_thread(importlib.import_module, "openai")
        import openai

        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._senders.get(loop)
            if found is not None:
                return found[1]
            if self._plain_http is not None:
                client = _http_client(openai, self.timeout)
                headers = self._plain_http.headers(self._key.value)
                sender: Sender = DirectSender(client, self.base_url, headers)
            elif self._given_client is None:
                http_client = _http_client(openai, self.timeout)
                client = openai.AsyncOpenAI(
                    api_key=self._key.value or _NO_KEY,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,
                    http_client=http_client,
                    **self._client_kwargs,
                )
                sender = DirectSender.of_sdk_client(client, http_client)
            else:
                if not self._given_client_used:
                    self._given_client_used = True
                    client = self._given_client
                else:
                    client = self._given_client.copy(http_client=_http_client(openai, self.timeout))
                sender = SdkSender(client)
            self._senders[loop] = (client, sender)
        if client is not self._given_client:
            close_with_loop(self.aclose)  # a pool of ours: closed when its loop shuts down
        return sender

    async def client(self) -> Any:
        """The openai SDK client requests on the running loop go out with (the Files and
        Batches APIs are called through it); the bare HTTP client of a `plain_http` endpoint."""
        await self.sender()
        with self._lock:
            return self._senders[asyncio.get_running_loop()][0]

    async def aclose(self) -> None:
        """Close the HTTP pool this endpoint opened on the running loop (not a given client)."""
        with self._lock:
            found = self._senders.pop(asyncio.get_running_loop(), None)
        if found is not None and found[0] is not self._given_client:
            # an SDK client closes with close(), a bare HTTP client (plain_http) with aclose()
            await (found[0].close() if self._plain_http is None else found[0].aclose())

    # ------------------------------------------------------------------ send

    async def post_json(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        read: Callable[[dict[str, Any]], R],
        estimated_tokens: int,
        tally: Tally,
    ) -> R:
        """POST ``body`` under the limiter, with retries (see :mod:`rageval._client._retry`), and
        ``read`` the JSON object of the reply. When the current run sends this endpoint's
        requests in batches, the request goes through its Batch API queue instead
        (:mod:`rageval._client._batch`, :mod:`rageval._client._run`)."""
        run = current_run()
        queue = run.batch_queue(self)
        target = self.target
        if queue is not None:

            async def attempt() -> R:
                data = await queue.submit(path, body)
                try:
                    return read(data)
                except ValueError as exc:  # BadBody: a line that is no chat completion
                    raise BatchLineLost(f"malformed reply in a batch line: {exc}") from exc

        else:
            # Before the limiter: a rate-paced slot must not be spent on importing the SDK.
            sender = await self.sender()
            # a llama.cpp server whose slots this run follows: its longer timeout per attempt
            local = run.server_slots.get(id(self))
            timeout = local.timeout if local is not None and local.timeout else self.timeout
            if timeout != target.timeout:  # a timed-out attempt says the timeout it had
                target = dataclasses.replace(target, timeout=timeout)
            # a run stopping gracefully sends nothing more, and counts what it sent
            stop = run.stop

            async def attempt() -> R:
                try:
                    async with stop.sending() if stop is not None else contextlib.nullcontext():
                        result = await post_json(sender, path, body, timeout=timeout, read=read)
                except Exception as exc:
                    if getattr(exc, "status_code", None) is not None:  # an HTTP answer, an error
                        self._reached = True
                    raise
                self._reached = True
                return result

        # a batch line holds no connection (no limiter), is not sent to the endpoint on its own
        # (nothing to reach), and the next batch is the only wait a line sent again needs
        batched = queue is not None
        return await call_with_retries(
            attempt,
            target=target,
            limiter=None if batched else self.limiter,
            estimated_tokens=estimated_tokens,
            max_retries=self.max_retries,
            tally=tally,
            check_fatal=self.check_fatal,
            reached=lambda: batched or self._reached,
            delay_of=(lambda _retry: 0.0) if batched else backoff_delay,
            # the run's own limit on this endpoint, where its earliest row goes first; a
            # request waits there (and at the limiter) outside its timeout, never in the
            # server's queue
            gate=None if batched else run.gates.get(id(self)),
            priority=run.row,
        )

    # ----------------------------------------------------------------- fatal

    def check_fatal(self) -> None:
        fatal = self._fatal
        if fatal is not None:
            raise FatalJudgeError(str(fatal), status=fatal.status, detail=fatal.detail)

    def remember_fatal(self, exc: FatalJudgeError) -> None:
        if self._fatal is None:
            self._fatal = exc

    @property
    def failed(self) -> FatalJudgeError | None:
        return self._fatal

    def probe_key(self) -> str | None:
        """The key a check of this endpoint before a run sends: the one its own requests send
        ("" when there is none), or None for a client object the caller gave, whose transport
        and key are its own."""
        if self._given_client is not None or self._client_kwargs:
            return None
        return self._key.value or ""

    def portable_settings(self) -> dict[str, Any]:
        """The keyword arguments that make this endpoint again in another process (a Ray
        worker): URL, key (its value: a worker on another machine has no such variable), key
        variable, timeout, retries. A client object the caller gave cannot be sent: ValueError.
        """
        if self._given_client is not None or self._client_kwargs:
            raise ValueError(
                f"the {self.kind} at {self.base_url} was given a client object, which cannot be "
                "sent to other processes; give base_url= (and api_key=) instead"
            )
        return {
            "base_url": self.base_url,
            "api_key": self._key.value,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "max_concurrency": self.limiter.max_concurrency,
            "requests_per_minute": self.limiter.requests_per_minute,
            "tokens_per_minute": self.limiter.tokens_per_minute,
            "api_key_from": self.key_source,
        }


def _http_client(openai: Any, timeout: float) -> Any:
    """The SDK's aiohttp transport when aiohttp is installed, else its default httpx one.

    Both are the openai SDK's own clients; aiohttp's C-accelerated HTTP parsing costs about half
    the client CPU per request of the pure-Python httpx stack (benchmarks/RESULTS.md), which is
    what bounds a run's speed against a fast endpoint. Every client gets the same TLS context
    (what the client would make itself), made once: loading the CA bundle takes ~50 ms.
    """
    if hasattr(openai, "DefaultAioHttpClient") and importlib.util.find_spec("aiohttp"):
        return openai.DefaultAioHttpClient(timeout=timeout, verify=_tls_context())
    return openai.DefaultAsyncHttpxClient(timeout=timeout, verify=_tls_context())


@functools.cache
def _tls_context() -> Any:
    # the defaults of the HTTP library under the SDK: its CA bundle, SSL_CERT_FILE/DIR honoured
    return _httpx().create_ssl_context()


class EndpointClient:
    """What the judge and the OpenAI-compatible embeddings share: their requests go through one
    :class:`Endpoint` (at `base_url`), with the request cache, a price table and a usage
    ledger of their own."""

    _endpoint: Endpoint
    base_url: str
    cache: RequestCache | None
    prices: PriceTable
    usage: UsageLedger

    def _connect(
        self,
        kind: str,
        model: str,
        default_limits: Limits,
        cache: RequestCache | bool | str | os.PathLike[str],
        prices: PriceTable | None,
        endpoint: EndpointOptions,
        plain_http: PlainHTTP | None = None,
    ) -> None:
        settings = endpoint_settings(default_limits=default_limits, **endpoint)
        self._endpoint = Endpoint(kind=kind, model=model, settings=settings, plain_http=plain_http)
        self.base_url = self._endpoint.base_url
        self.cache = resolve_cache(cache)
        self.prices = prices if prices is not None else PriceTable()
        self.usage = UsageLedger()

    def probe_key(self) -> str | None:
        """The key a check of the endpoint before a run sends (see :meth:`Endpoint.probe_key`)."""
        return self._endpoint.probe_key()

    def _endpoint_description(self) -> dict[str, Any]:
        """The endpoint's part of a run manifest (never the key) and where the cache is."""
        return {**self._endpoint.describe(), "cache": cache_location(self.cache)}

    async def aclose(self) -> None:
        """Close the HTTP connections this client opened on the running loop."""
        await self._endpoint.aclose()
