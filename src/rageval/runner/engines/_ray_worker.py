"""What runs inside the Ray cluster: the scorer of a batch of rows, the pacer of each rate-limited
endpoint, and the merge of request cache shards.

:class:`ScoreBatch` is a Ray Data callable class: Ray makes one per actor, and calls it on each
batch of rows from one event loop per actor (several batches at once). Its constructor builds
the job's judges, embeddings and metrics once (the local embedding model is loaded there, and
the openai SDK imported); each call runs rageval's cell scheduler on the batch's rows, exactly as
the local engine does, and returns one JSON line per finished row. A fatal judge error (bad
key, unknown model) is returned as a row of its own, after the rows that finished, so that the
driver stops the run with the same error the local engine raises.

:class:`RateKeeper` is a named actor, one per job, that hands out send times for each endpoint
with a requests- or tokens-per-minute limit; every worker's limiter asks it before each request
(:class:`SharedRates`), so the limit holds for the whole job. Backing off after a 429 stays with
each worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rageval._client._cache import merge_shards
from rageval._client._limiter import Pace, RateBudget, endpoint_limiter
from rageval._version import __version__
from rageval.judge import FatalJudgeError, Usage, UsageLedger
from rageval.log import Cell, Inputs, SampleLine, model_json
from rageval.runner._schedule import Scheduler, make_plans, usage_since
from rageval.runner.engines._ship import WorkerJob, build
from rageval.samples import Sample, sample_of

#: how late after its slot a request may leave a worker (event loop lag); a later one takes a
#: new slot instead
MAX_LATENESS_S = 0.25
#: ...at most this many times, then it is sent (a worker whose loop lags this much is
#: overloaded; the warning says so)
MAX_SLOT_ATTEMPTS = 3
#: each minute of a shared rate is paced as 60 s plus this much, so that requests that leave
#: up to MAX_LATENESS_S after their slot, and reach the server a little later still, never put
#: more than the limit into any 60-second window at the server
ALLOWANCE_S = 2 * MAX_LATENESS_S

log = logging.getLogger("rageval.ray")

# kinds of the rows a batch returns
RECORD, EMBEDDINGS_USAGE, FATAL, WORKER = "record", "embeddings_usage", "fatal", "worker"


class RateKeeper:
    """Paces each rate-limited endpoint for all the workers of a job (a named Ray actor).

    Slots are wall-clock times (``time.time()``): on one machine every process reads the same
    clock, so a worker knows exactly how late it sends; across machines their clocks are
    assumed in step (NTP), and what they differ by counts against ALLOWANCE_S. Methods run one
    at a time (a plain actor), so the pacing needs no lock.
    """

    def __init__(self, limits: Mapping[str, tuple[float | None, float | None]]) -> None:
        scale = 60.0 / (60.0 + ALLOWANCE_S)
        self._paces = {
            url: (
                Pace(rpm * scale) if rpm is not None else None,
                Pace(tpm * scale) if tpm is not None else None,
            )
            for url, (rpm, tpm) in limits.items()
        }

    def reserve(self, endpoint: str, estimated_tokens: int, earliest: float) -> float:
        """Book one request, not before the wall-clock time `earliest`; its slot (wall clock)."""
        requests, tokens = self._paces[endpoint]
        now = max(time.time(), earliest)
        slot = now
        if requests is not None:
            slot = max(slot, requests.reserve(now, 1))
        if tokens is not None:
            slot = max(slot, tokens.reserve(now, estimated_tokens))
        return slot

    def settle(self, endpoint: str, delta_tokens: int) -> None:
        tokens = self._paces[endpoint][1]
        if tokens is not None:
            tokens.adjust(delta_tokens)


class SharedRates(RateBudget):
    """An endpoint's rates, paced by the job's :class:`RateKeeper`."""

    def __init__(self, keeper: Any, endpoint: str, rpm: float | None, tpm: float | None) -> None:
        self._keeper = keeper
        self._endpoint = endpoint
        self._rpm = rpm
        self._tpm = tpm
        # a slot is asked for this far ahead (twice the keeper's recent answer time), so that
        # it has not gone by when the answer arrives
        self._lead = 0.01
        self._warned = False

    @property
    def requests_per_minute(self) -> float | None:
        return self._rpm

    @property
    def tokens_per_minute(self) -> float | None:
        return self._tpm

    async def wait_turn(self, estimated_tokens: int) -> None:
        for _ in range(MAX_SLOT_ATTEMPTS):
            asked = time.time()
            slot: float = await self._keeper.reserve.remote(
                self._endpoint, estimated_tokens, asked + self._lead
            )
            answered = time.time()
            self._lead = min(1.0, max(0.005, 0.8 * self._lead + 0.4 * (answered - asked)))
            if slot > answered:
                await asyncio.sleep(slot - answered)
            if time.time() - slot <= MAX_LATENESS_S:
                return
            # the slot went by while this worker was busy: sending now could crowd the next
            # slots together, so this one is left unused
        if not self._warned:
            self._warned = True
            log.warning(
                "ray: this worker's event loop lags more than %.2f s; requests to %s may "
                "exceed the shared rate limit a little",
                MAX_LATENESS_S,
                self._endpoint,
            )

    def settle(self, delta_tokens: int) -> None:
        self._keeper.settle.remote(self._endpoint, delta_tokens)


class ScoreBatch:
    """Scores batches of rows (columns ``row``, ``id``, ``sample``: the sample's JSON,
    ``skipped``: the row's skipped cells as the driver's plan decided them) with
    every metric of the job; see the module docstring."""

    def __init__(self, job: WorkerJob, embed_threads: int = 1) -> None:
        if job.rageval_version != __version__:
            raise RuntimeError(
                f"rageval {__version__} is installed on this Ray node (pid {os.getpid()}), "
                f"but the driver runs rageval {job.rageval_version}: install the same version "
                "on every node"
            )
        import ray

        self._worker = json.dumps([ray.get_runtime_context().get_node_id(), os.getpid()])
        self._built = build(job, embed_threads=embed_threads)
        self._plans = make_plans(
            self._built.metrics,
            self._built.run_judges,
            self._built.run_embeddings,
            {},
            repeats=job.repeats,
        )
        if job.rates_actor is not None:
            keeper = ray.get_actor(job.rates_actor)
            for url, (rpm, tpm) in job.rate_limits().items():
                endpoint_limiter(url).share_rates(SharedRates(keeper, url, rpm, tpm))
        for embeddings in self._built.embeddings:
            load = getattr(embeddings, "load", None)
            if load is not None:
                load()  # the local model: read and checked once per actor, not per batch
        if self._built.judges or any(e.endpoint for e in job.embeddings):
            import openai  # noqa: F401  (a second or more on a slow machine: not in a batch)
        # remote embeddings (by their index in the job) and what was reported of their usage
        self._embedding_ledgers: dict[int, UsageLedger] = {}
        for index, model in enumerate(self._built.embeddings):
            ledger = getattr(model, "usage", None)
            if isinstance(ledger, UsageLedger):
                self._embedding_ledgers[index] = ledger
        self._embedding_reported = dict.fromkeys(self._embedding_ledgers, Usage())

    async def __call__(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[str]]:
        rows = [int(r) for r in batch["row"]]
        ids = {row: str(sid) for row, sid in zip(rows, batch["id"], strict=True)}
        samples: dict[int, Sample | None] = {
            row: sample_of(json.loads(text))
            for row, text in zip(rows, batch["sample"], strict=True)
        }
        # the driver's plan decided which cells of these rows are skipped, and why
        skipped = {
            row: {m: Cell.model_validate(c) for m, c in json.loads(text).items()}
            for row, text in zip(rows, batch["skipped"], strict=True)
        }
        plans = [dataclasses.replace(plan, skipped_cells=skipped) for plan in self._plans]
        finished: list[SampleLine] = []
        scheduler = Scheduler(plans, samples, ids, window=len(rows), on_record=finished.append)
        fatal: FatalJudgeError | None = None
        try:
            await scheduler.run(rows)
        except FatalJudgeError as e:
            fatal = e
        # what this batch's requests taught the cache is on disk before its rows are reported
        await asyncio.to_thread(self._flush_caches)
        kinds: list[str] = [WORKER]
        payloads: list[str] = [self._worker]
        # first, so that the driver books it on this batch's first line, as the local engine
        # books remote embeddings on the line written next
        spent = self._embeddings_usage_since_last_batch()
        if spent:
            kinds.append(EMBEDDINGS_USAGE)
            payloads.append(json.dumps({i: dataclasses.asdict(u) for i, u in spent.items()}))
        for line in finished:
            kinds.append(RECORD)
            # the driver has the rows' inputs already
            payloads.append(model_json(line.model_copy(update={"inputs": Inputs()})))
        if fatal is not None:
            kinds.append(FATAL)
            payloads.append(
                json.dumps({"message": str(fatal), "status": fatal.status, "detail": fatal.detail})
            )
        return {"kind": kinds, "payload": payloads}

    def _embeddings_usage_since_last_batch(self) -> dict[int, Usage]:
        """What each remote embeddings model used since the last report (by its index)."""
        spent = {}
        for index, ledger in self._embedding_ledgers.items():
            total, base = ledger.total, self._embedding_reported[index]
            if total != base:
                spent[index] = usage_since(total, base)
                self._embedding_reported[index] = total
        return spent

    def _flush_caches(self) -> None:
        for cache in self._built.caches.values():
            cache.flush()


def merge_cache_shards(directories: Sequence[str], label: str | None, timeout: float) -> int:
    """Merge the finished cache shards on this node (run on each node of the cluster)."""
    return sum(merge_shards(d, wait_for=label, timeout=timeout) for d in directories)
