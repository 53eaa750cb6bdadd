"""What belongs to one run and to none of the objects the user built: the run's budget, the
Batch API queue each endpoint sends through in batch mode, the meter that books each call's
usage to the sample being scored (and the one that books remote embeddings' requests to the
run), who is told of each judge call (the run's observers, with the run's id), and whether the
run is stopping (:class:`StopSending`).

A :class:`~rageval.judge.Judge` or an endpoint is the user's, and may serve two runs at once
(a notebook evaluating two datasets, a service reusing one judge): a run never sets anything on
it. The runner enters a :func:`run_scope` instead, and the judge and the endpoint read
:func:`current_run` when they send. It is a ``ContextVar``: each asyncio task sees the scope of
the run that started it, so concurrent runs on one judge each see their own, and code outside
any run sees the empty :class:`RunContext` (no budget, no batching, no meter).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rageval._client._budget import SpendingLimit
    from rageval._client._limiter import Slots
    from rageval._client._usage import Usage

__all__ = [
    "BatchSender",
    "JudgeCall",
    "RunContext",
    "ServerSlots",
    "StopSending",
    "UsageMeter",
    "current_run",
    "run_scope",
]


class BatchSender(Protocol):
    """Where a request goes instead of the HTTP endpoint in batch mode (the Batch API queue of
    :mod:`rageval._client._batch`)."""

    async def submit(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...


class UsageMeter(Protocol):
    """Books the usage of a call, by its tags (the runner's meter of the sample being scored)."""

    def add(self, usage: Usage, tags: Mapping[str, str] | None) -> None: ...


@dataclasses.dataclass(frozen=True)
class JudgeCall:
    """One judge call of a run, finished: one question with its retries and re-asks, or its
    answer from the request cache (then ``usage.cache_hits`` is 1 and nothing was sent)."""

    model: str
    #: the API it went to: its backend's kind ("openai" for any OpenAI-compatible endpoint)
    backend: str
    base_url: str | None
    #: wall-clock times (seconds since the epoch) of its start and its end
    started: float
    ended: float
    usage: Usage
    #: what it was asked for: the metric and the sample (``{"metric": ..., "sample": ...}``)
    tags: Mapping[str, str]
    #: why it failed (the error's text), None when it was answered
    error: str | None = None
    #: the run it was made for (:attr:`RunContext.run_id`; "" outside any run)
    run_id: str = ""


@dataclasses.dataclass(frozen=True)
class ServerSlots:
    """How a run drives a llama.cpp server whose slots its probe read: at most `concurrency`
    requests at once (None: as the endpoint's limiter says, a concurrency the user chose),
    `timeout` seconds per attempt (None: the endpoint's, a timeout the user chose), and the
    `context` one slot holds, prompt and reply together (None: not reported): the judge fits
    each reply budget in it, and does not send a prompt that cannot fit."""

    slots: int
    concurrency: int | None
    timeout: float | None
    context: int | None = None


class StopSending:
    """A run's graceful stop (the first Ctrl-C): once :meth:`request` is called, no request of
    the run is sent any more (one waiting for a concurrency slot, the rate limit or a retry
    waits in :meth:`sending` until the run is cancelled), and the requests already sent are
    counted down as they end, each by its own timeout at the latest (one that fails is not
    retried), so that their answers reach the request cache before the run stops.

    One per run, used on the run's loop only."""

    def __init__(self) -> None:
        self.requested = False
        #: requests sent and not yet answered (or failed)
        self.in_flight = 0
        #: requests the stop keeps from being sent, waiting for the run to be cancelled
        self.held_back = 0
        self._idle: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        """Around sending one request: waits for ever (until the run is cancelled) once the
        run is stopping, so the request is never sent; counts it in flight otherwise."""
        if self.requested:
            self.held_back += 1
            try:
                await asyncio.get_running_loop().create_future()  # never done: cancelled
            finally:
                self.held_back -= 1
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            if self._idle is not None and self.in_flight == 0:
                self._idle.set()

    async def request(self) -> None:
        """Send nothing more; returns once no request of the run is in flight."""
        self.requested = True
        if self.in_flight:
            self._idle = asyncio.Event()
            await self._idle.wait()


@dataclasses.dataclass(frozen=True)
class RunContext:
    """The state of the run the current task belongs to."""

    #: the run's id: every event its observers are told carries it, so that one observer
    #: given to two runs at once tells them apart ("" outside any run)
    run_id: str = ""
    #: the run's budget (``evaluate(max_cost=...)``), shared by every judge of the run
    spending: SpendingLimit | None = None
    #: in batch mode, the queue each endpoint sends through, by ``id(endpoint)``
    batch_queues: Mapping[int, BatchSender] = dataclasses.field(default_factory=dict)
    #: where each call's usage is booked besides the judge's own ledger
    meter: UsageMeter | None = None
    #: where remote embeddings book what each of their requests used, besides their own
    #: ledger: a client shared by two runs at once books each request to the run that made it
    embeddings_meter: UsageMeter | None = None
    #: told of every judge call when it ends (the run's observers)
    call_listeners: Sequence[Callable[[JudgeCall], None]] = ()
    #: llama.cpp servers the run follows the slots of, by ``id(endpoint)``
    server_slots: Mapping[int, ServerSlots] = dataclasses.field(default_factory=dict)
    #: the context window (tokens) an endpoint's model list gave for the judge's model
    #: (vLLM's ``max_model_len``), by ``id(endpoint)``
    windows: Mapping[int, int] = dataclasses.field(default_factory=dict)
    #: the run's own limit on each endpoint of its judges, by ``id(endpoint)``: as many of its
    #: requests at once as it drives the endpoint with, the earliest row's first
    gates: Mapping[int, Slots] = dataclasses.field(default_factory=dict)
    #: the run's graceful stop; None: the run stops at once when cancelled
    stop: StopSending | None = None
    #: the row of the sample being scored (set by the scheduler for each sample's task): the
    #: priority of its requests where they wait for a slot, the earliest row first
    row: int = 0

    def batch_queue(self, endpoint: object) -> BatchSender | None:
        """The Batch API queue `endpoint` sends through in this run, if it is batched."""
        return self.batch_queues.get(id(endpoint))

    def book(self, usage: Usage, tags: Mapping[str, str] | None) -> None:
        if self.meter is not None:
            self.meter.add(usage, tags)

    def book_embeddings(self, usage: Usage) -> None:
        if self.embeddings_meter is not None:
            self.embeddings_meter.add(usage, None)

    def judge_call_ended(self, call: JudgeCall) -> None:
        if self.call_listeners:
            call = dataclasses.replace(call, run_id=self.run_id)
            for listener in self.call_listeners:
                listener(call)


#: what code outside any run sees: no budget, no batching, no meter (never changed)
_OUTSIDE_ANY_RUN = RunContext()
_CURRENT: contextvars.ContextVar[RunContext] = contextvars.ContextVar(
    "rageval_run", default=_OUTSIDE_ANY_RUN
)


def current_run() -> RunContext:
    """The context of the run this task belongs to (an empty one outside any run)."""
    return _CURRENT.get()


@contextlib.contextmanager
def run_scope(**changes: Any) -> Iterator[RunContext]:
    """The current run context with `changes` (fields of :class:`RunContext`) while the block
    runs, for this task and every task it starts; the one before is back afterwards."""
    scope = dataclasses.replace(_CURRENT.get(), **changes)
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)
