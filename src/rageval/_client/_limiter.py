"""Per-endpoint request limiter: concurrent requests, requests/minute, tokens/minute.

Every HTTP request to an endpoint holds one slot of that endpoint's limiter while it is in
flight, whoever sends it (any Judge, any embeddings client). There is one limiter per normalised
base URL per process. When several clients configure the same endpoint the tightest setting of
each limit wins (the smallest concurrency, the lowest rpm/tpm), and a client that leaves a limit
unset (None) expresses no opinion about it.

Rate limits are paced, not burst: with ``requests_per_minute=120`` requests start at least 0.5 s
apart, and a request estimated at ``n`` tokens uses ``n / (tpm / 60)`` seconds of the token
budget (corrected by :meth:`EndpointLimiter.settle` once the real count is known).

Where the rates are paced is a :class:`RateBudget`: by default this process's own, so the limits
hold per process. :meth:`EndpointLimiter.share_rates` hands the pacing to a budget shared with
other processes (the Ray engine's, one per endpoint for all its workers); concurrency, pauses
after a 429 and retries stay with each process.

The primitives here are loop-agnostic (a thread lock plus futures woken with
``call_soon_threadsafe``), because the same endpoint is used from the caller's loop, from the
private loops that synchronous helpers run on, and from several threads at once. asyncio's own
Semaphore binds itself to the first loop that waits on it.
"""

from __future__ import annotations

import abc
import asyncio
import heapq
import itertools
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from rageval._client._settings import DEFAULT_MAX_CONCURRENCY, Limits

__all__ = [
    "EndpointLimiter",
    "Pace",
    "RateBudget",
    "Slots",
    "endpoint_limiter",
]


#: a request waiting for a slot: its priority, its arrival number, its loop and its future
_Waiter = tuple[int, int, asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class Slots:
    """A counting semaphore usable from any event loop and thread; ``Slots(1)`` is a lock.

    Waiters are served lowest `priority` first, then in the order they came (all at the
    default priority: first come, first served). A run's own gate per endpoint gives each
    request the row of the sample it scores (:attr:`RunContext.row`), so the earliest row's
    requests go first and rows finish in order.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self._limit = limit
        self._in_use = 0
        # (priority, arrival, loop, future): a heap, served smallest first
        self._waiters: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_use(self) -> int:
        return self._in_use

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        with self._lock:
            self._limit = limit
            self._wake_locked()

    async def acquire(self, priority: int = 0) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self._limit and not self._waiters:
                self._in_use += 1
                return
            fut: asyncio.Future[None] = loop.create_future()
            waiter = (priority, next(self._arrivals), loop, fut)
            heapq.heappush(self._waiters, waiter)
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(waiter)
                    heapq.heapify(self._waiters)
                    queued = True
                except ValueError:
                    queued = False
            # Not queued any more: the slot was handed to us (or is on its way, in which case
            # _grant sees the cancelled future and passes it on).
            if not queued and fut.done() and not fut.cancelled():
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            self._in_use -= 1
            self._wake_locked()

    def _wake_locked(self) -> None:
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        while self._waiters and self._in_use < self._limit:
            _, _, loop, fut = heapq.heappop(self._waiters)
            if loop.is_closed():
                continue
            self._in_use += 1
            if loop is here:
                loop.call_soon(self._grant, fut)  # no wake-up write needed on our own loop
            else:
                loop.call_soon_threadsafe(self._grant, fut)

    def _grant(self, fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            self.release()
        else:
            fut.set_result(None)

    @asynccontextmanager
    async def hold(self, priority: int = 0) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()


class Pace:
    """Evenly spaced admission at ``per_minute`` units per minute (GCRA without burst)."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = _positive(per_minute)
        self._next_free = 0.0  # monotonic time at which the budget is next free

    @property
    def per_second(self) -> float:
        # derived, so the rate reads back exactly as it was given (recorded in run manifests)
        return self.per_minute / 60.0

    def reserve(self, now: float, cost: float) -> float:
        """Book ``cost`` units; returns the monotonic time at which they may be used."""
        start = max(now, self._next_free)
        self._next_free = start + cost / self.per_second
        return start

    def adjust(self, delta_cost: float) -> None:
        self._next_free += delta_cost / self.per_second


class RateBudget(abc.ABC):
    """Where one endpoint's requests and tokens per minute are paced."""

    @property
    @abc.abstractmethod
    def requests_per_minute(self) -> float | None: ...

    @property
    @abc.abstractmethod
    def tokens_per_minute(self) -> float | None: ...

    @abc.abstractmethod
    async def wait_turn(self, estimated_tokens: int) -> None:
        """Return when a request estimated at ``estimated_tokens`` may be sent."""

    @abc.abstractmethod
    def settle(self, delta_tokens: int) -> None:
        """Book the difference between a request's real and estimated token count."""


class _LocalRates(RateBudget):
    """The rates paced in this process (the default budget)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rpm: Pace | None = None
        self._tpm: Pace | None = None

    @property
    def requests_per_minute(self) -> float | None:
        return self._rpm.per_minute if self._rpm else None

    @property
    def tokens_per_minute(self) -> float | None:
        return self._tpm.per_minute if self._tpm else None

    def tighten(self, requests_per_minute: float | None, tokens_per_minute: float | None) -> None:
        with self._lock:
            if requests_per_minute is not None:
                self._rpm = _tighter(self._rpm, requests_per_minute)
            if tokens_per_minute is not None:
                self._tpm = _tighter(self._tpm, tokens_per_minute)

    async def wait_turn(self, estimated_tokens: int) -> None:
        if self._rpm is None and self._tpm is None:
            return
        with self._lock:
            now = time.monotonic()
            start = now
            if self._rpm is not None:
                start = max(start, self._rpm.reserve(now, 1))
            if self._tpm is not None:
                start = max(start, self._tpm.reserve(now, estimated_tokens))
        await _sleep_until(start)

    def settle(self, delta_tokens: int) -> None:
        with self._lock:
            if self._tpm is not None:
                self._tpm.adjust(delta_tokens)


class EndpointLimiter:
    """Admission control for one endpoint; see the module docstring."""

    def __init__(self, endpoint: str, limits: Limits | None = None) -> None:
        self.endpoint = endpoint
        self._slots = Slots(DEFAULT_MAX_CONCURRENCY)
        self._explicit_concurrency = False
        self._local_rates = _LocalRates()
        self._rates: RateBudget = self._local_rates
        self._lock = threading.Lock()
        self._paused_until = 0.0
        if limits is not None:
            self.tighten(limits)

    @property
    def max_concurrency(self) -> int:
        return self._slots.limit

    @property
    def requests_per_minute(self) -> float | None:
        return self._rates.requests_per_minute

    @property
    def tokens_per_minute(self) -> float | None:
        return self._rates.tokens_per_minute

    @property
    def in_flight(self) -> int:
        return self._slots.in_use

    @property
    def concurrency_chosen(self) -> bool:
        """Whether a client of this endpoint asked for a concurrency (else it is the default)."""
        return self._explicit_concurrency

    def tighten(self, limits: Limits) -> None:
        """Apply `limits` where they are tighter than this limiter's (a concurrency asked for
        replaces the default of 16 even when larger)."""
        concurrency = limits.max_concurrency
        with self._lock:
            if concurrency is not None:
                if not self._explicit_concurrency or concurrency < self._slots.limit:
                    self._slots.set_limit(concurrency)
                self._explicit_concurrency = True
        self._local_rates.tighten(limits.requests_per_minute, limits.tokens_per_minute)

    def share_rates(self, budget: RateBudget | None) -> None:
        """Pace this endpoint's rates with ``budget`` (None: this process's own limits again)."""
        self._rates = budget if budget is not None else self._local_rates

    def pause(self, seconds: float) -> None:
        """Hold back every new request to this endpoint for ``seconds`` (the server said so)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    @asynccontextmanager
    async def request(self, estimated_tokens: int) -> AsyncIterator[None]:
        """Hold a slot for one HTTP request, after any pause and rate pacing (shared by every
        run and client of the endpoint: in the order they came)."""
        while True:
            await _sleep_until(self._paused_until)
            await self._slots.acquire()
            if time.monotonic() >= self._paused_until:
                break
            self._slots.release()
        try:
            await self._rates.wait_turn(estimated_tokens)
            yield
        finally:
            self._slots.release()

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token budget once the server reported what a request really used."""
        if actual_tokens != estimated_tokens:
            self._rates.settle(actual_tokens - estimated_tokens)

    def __repr__(self) -> str:
        return (
            f"EndpointLimiter({self.endpoint!r}, max_concurrency={self.max_concurrency}, "
            f"requests_per_minute={self.requests_per_minute}, "
            f"tokens_per_minute={self.tokens_per_minute})"
        )


# Weak: a limiter lives as long as some client of its endpoint does, so settings from clients
# that are gone (or from an earlier server on a reused local port) do not linger.
_REGISTRY: weakref.WeakValueDictionary[str, EndpointLimiter] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def endpoint_limiter(endpoint: str, limits: Limits | None = None) -> EndpointLimiter:
    """The process-wide limiter of ``endpoint`` (a normalised base URL), tightened to `limits`."""
    with _REGISTRY_LOCK:
        limiter = _REGISTRY.get(endpoint)
        if limiter is None:
            limiter = _REGISTRY[endpoint] = EndpointLimiter(endpoint, limits)
            return limiter
    if limits is not None:
        limiter.tighten(limits)
    return limiter


def _tighter(current: Pace | None, per_minute: float) -> Pace:
    if current is None:
        return Pace(per_minute)
    current.per_minute = min(current.per_minute, _positive(per_minute))
    return current


def _positive(value: float) -> float:
    if not value > 0:
        raise ValueError(f"a rate limit must be > 0, got {value}")
    return float(value)


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
