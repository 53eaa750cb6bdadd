"""The Ray engine: rageval's cell scheduler on a Ray Data job, results in this process's run
directory.

What runs where:

- This process (the driver) does everything the local engine does except scoring: it loads and
  validates the data, writes the manifest, and appends each finished row to ``results.jsonl``
  as the batches come back (it is the only writer), draws the progress line, and writes the
  summary and report. Rows that could not be read are recorded here, without Ray.
- A Ray Data job scores the other rows: ``from_items`` (row, id, sample JSON, and the cells
  the plan skips in the row, with why) in blocks of a
  few rows, ``map_batches`` with :class:`~._ray_worker.ScoreBatch` (one block is one batch) on
  a fixed pool of actors; each actor runs several batches at once on its event loop. An actor
  that only calls endpoints reserves a quarter of a CPU (at one CPU each, a 2-core machine
  has no CPU left for Ray Data's own tasks and the job hangs); one that runs the local
  embedding model reserves a whole CPU and the pool leaves one CPU of the cluster free.
- A named actor paces every endpoint that has a requests/tokens-per-minute limit, for all
  actors together (:class:`~._ray_worker.RateKeeper`); concurrency is split over the actors.
- Request cache shards (one per actor) are merged into each node's cache file: at the start
  (shards left by a run that was killed) and at the end.

Ray itself: an existing connection of this process is used as it is; else ``address`` is
joined (and left at the end); else a private Ray is started on this machine (127.0.0.1, no
dashboard, every core) and stopped at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rageval._client._run import current_run
from rageval.errors import RagevalError
from rageval.judge import FatalJudgeError, Usage, UsageLedger
from rageval.log import Inputs, SampleLine
from rageval.metrics._statements import SHARED_TAG
from rageval.runner._schedule import MIN_WINDOW, ByRow, Plan, Scheduler, spread
from rageval.runner.engines import RayEngineError
from rageval.runner.engines._ray_worker import EMBEDDINGS_USAGE, FATAL, RECORD, WORKER
from rageval.runner.engines._ship import WorkerJob
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.judge import Judge

log = logging.getLogger("rageval.ray")

#: CPU reserved by an actor that only waits on endpoints, and by one that runs the local model
JUDGE_ACTOR_CPUS = 0.25
LOCAL_MODEL_ACTOR_CPUS = 1.0
#: batches an actor scores at once (each a Ray task on a thread of its own, on one event loop)
CALLS_PER_ACTOR = 8
#: at most this many blocks (batches): bigger batches for larger data, not more Ray tasks
MAX_BLOCKS = 20_000
#: how long to wait, at the end, for the actors to exit before merging their cache shards
#: (a shard whose actor is still there then is copied, and deleted by a later merge)
MERGE_WAIT_S = 5.0


@dataclasses.dataclass
class RayRun:
    """One evaluation's scoring on Ray; see the module docstring."""

    plans: Sequence[Plan]
    run_judges: Sequence[Judge]
    samples: ByRow[Sample | None]
    ids: ByRow[str]
    address: str | None = None
    actors: int | None = None
    #: filled in as the job runs: the (Ray node id, pid) of each actor that scored a batch
    worker_pids: set[tuple[str, int]] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        plan = self.plans[0]
        # the embeddings models, in the order of the job's specs (usage comes back by index)
        self._embeddings = WorkerJob.embeddings_order(plan.metrics, plan.embeddings)
        # made now, so that whatever cannot be sent to the workers fails before Ray starts
        self._job = WorkerJob.of(
            plan.metrics,
            self.run_judges,
            plan.embeddings,
            label=f"rageval-{uuid.uuid4().hex[:12]}",
            workers=1,
            rates_actor=None,
            repeats=plan.repeats,
        )

    async def run(self, rows: Sequence[int], on_record: Callable[[SampleLine], None]) -> None:
        """Score `rows`, handing each finished row to `on_record` (on this event loop) as its
        batch comes back; a fatal judge error in any actor stops the job and is raised here."""
        invalid, skipped = self.plans[0].invalid_rows, self.plans[0].skipped_cells
        # rows with a field some metric cannot read too: recorded here, as they were read
        unreadable = [
            r
            for r in rows
            if self.samples[r] is None
            or r in invalid
            or any(c.cause_kind == "invalid_row" for c in skipped.get(r, {}).values())
        ]
        if unreadable:  # recorded without a single request
            await Scheduler(
                self.plans, self.samples, self.ids, window=len(unreadable), on_record=on_record
            ).run(unreadable)
        skip = set(unreadable)
        scorable = [r for r in rows if r not in skip]
        if not scorable:
            return
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def post(kind: str, payload: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
                loop.call_soon_threadsafe(inbox.put_nowait, (kind, payload))

        driver = threading.Thread(
            target=self._drive, args=(scorable, post, stop), name="rageval-ray", daemon=True
        )
        driver.start()
        try:
            while True:
                kind, payload = await inbox.get()
                if kind == "batch":
                    self._take(payload, on_record)
                elif kind == "error":
                    raise payload
                else:
                    break
        finally:
            stop.set()
            # the job is stopped, and the cache shards merged, before evaluate() returns
            await asyncio.to_thread(driver.join)
            nodes = {node for node, _ in self.worker_pids}
            log.info("ray: scored by %d actors on %d nodes", len(self.worker_pids), len(nodes))

    # ------------------------------------------------------------ this event loop

    def _take(
        self, batch: Mapping[str, Sequence[str]], on_record: Callable[[SampleLine], None]
    ) -> None:
        fatal: FatalJudgeError | None = None
        for kind, payload in zip(batch["kind"], batch["payload"], strict=True):
            if kind == RECORD:
                line = SampleLine.model_validate_json(payload)
                line.inputs = Inputs.of(self.samples[line.row])
                self._book(line)
                on_record(line)
            elif kind == EMBEDDINGS_USAGE:
                for index, fields in json.loads(payload).items():
                    ledger = getattr(self._embeddings[int(index)], "usage", None)
                    if isinstance(ledger, UsageLedger):
                        ledger.record(Usage(**fields))
                    current_run().book_embeddings(Usage(**fields))
            elif kind == WORKER:
                node, pid = json.loads(payload)
                self.worker_pids.add((str(node), int(pid)))
            elif kind == FATAL:
                found = json.loads(payload)
                fatal = FatalJudgeError(
                    found["message"], status=found.get("status"), detail=found.get("detail", "")
                )
        if fatal is not None:
            raise fatal

    def _book(self, record: SampleLine) -> None:
        """Book a row's usage in this process's judges, as if they had made its calls (the
        progress line and ``judge.usage`` read them)."""
        plan = self.plans[spread(record.id, len(self.plans))]
        for name, cell in record.cells.items():
            judge = plan.judge_of.get(name)
            if judge is not None and cell.usage.requests + cell.usage.cache_hits:
                judge.usage.record(cell.usage, {"metric": name, "sample": record.id})
        shared = record.shared_usage
        if plan.shared_judge is not None and shared.requests + shared.cache_hits:
            plan.shared_judge.usage.record(shared, {"metric": SHARED_TAG, "sample": record.id})

    # ------------------------------------------------------------ the Ray thread

    def _drive(
        self, rows: Sequence[int], post: Callable[[str, Any], None], stop: threading.Event
    ) -> None:
        """The Ray side, on a thread of its own; it always ends by posting "done" or "error"."""
        outcome: tuple[str, Any] = ("done", None)
        began = time.monotonic()
        try:
            with _quiet_console():
                self._run_job(rows, post, stop)
        except BaseException as e:  # handed to the event loop, which raises it
            outcome = ("error", _as_rageval_error(e))
        finally:
            log.info("ray: done after %.1f s", time.monotonic() - began)
            post(*outcome)

    def _run_job(
        self, rows: Sequence[int], post: Callable[[str, Any], None], stop: threading.Event
    ) -> None:
        import ray

        began = time.monotonic()
        # Ray's own convention: a process inside a Ray job (or told so) has RAY_ADDRESS
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        connected, private = _connect(address)
        where = "a Ray of its own" if private else address if connected else "this process's Ray"
        log.info("ray: connected to %s in %.1f s", where, time.monotonic() - began)
        # Ray's own annotations type what ray.remote(...)(cls).remote() returns as a union of a
        # handle and the class itself; it is an actor handle
        keeper: Any = None
        try:
            # shards a killed run left behind: in the main files before the first lookup
            self._merge_shards(private, label=None, timeout=0.0)
            job, cpus, batch = self._size_job(len(rows))
            limits = job.rate_limits()
            if limits:
                from rageval.runner.engines._ray_worker import RateKeeper

                name = f"{job.label}-rates"
                keeper = ray.remote(num_cpus=0)(RateKeeper).options(name=name).remote(limits)
                job = dataclasses.replace(job, rates_actor=name)
            log.info("ray: %d rows, %d actors at %g CPU, %d rows a batch", len(rows),
                     job.workers, cpus, batch)  # fmt: skip
            for n, batch_out in enumerate(self._batches(job, rows, cpus, batch)):
                if n == 0:
                    log.info("ray: first batch after %.1f s", time.monotonic() - began)
                post("batch", batch_out)
                if stop.is_set():
                    break
        finally:
            # a failure while cleaning up is only logged: the rows are in the run directory
            with _logged("stopping the rate keeper"):
                if keeper is not None:
                    ray.kill(keeper)
            if private:
                with _logged("stopping Ray"):
                    ray.shutdown()  # every actor ends with it
                self._merge_shards(True, self._job.label, MERGE_WAIT_S)
            else:
                self._merge_shards(False, self._job.label, MERGE_WAIT_S)
                if connected:
                    with _logged("leaving the Ray cluster"):
                        ray.shutdown()  # the cluster keeps running

    def _merge_shards(self, here: bool, label: str | None, timeout: float) -> None:
        """Merge the request cache shards whose actors ended: in this process when Ray ran
        here, else by a task on every node (each node has its own cache files)."""
        directories = self._job.cache_dirs()
        if not directories:
            return
        with _logged("merging the request cache shards"):
            if here:
                from rageval._client._cache import merge_shards

                for directory in directories:
                    merge_shards(directory, wait_for=label, timeout=timeout)
            else:
                _merge_on_every_node(directories, label, timeout)

    def _size_job(self, n_rows: int) -> tuple[WorkerJob, float, int]:
        """The job for this cluster: actors, the CPU each reserves, rows per batch."""
        import ray

        job = self._job
        cluster_cpus = float(ray.cluster_resources().get("CPU", 1.0))
        cpus = LOCAL_MODEL_ACTOR_CPUS if job.runs_local_model else JUDGE_ACTOR_CPUS
        if self.actors is not None:
            workers = self.actors
        elif job.runs_local_model:
            workers = max(1, int((cluster_cpus - 1) // cpus))  # a CPU left for Ray Data itself
        else:
            workers = max(1, int(cluster_cpus))  # one per core: a core drives many requests
        if self.actors is None and job.judges:
            # more actors than requests in flight would only hold idle connections
            workers = min(workers, min(j.endpoint.max_concurrency for j in job.judges))
        share = sum(max(1, ep.max_concurrency // workers) for ep in _distinct(job.endpoints()))
        # rows in flight per actor: all actors together hold as many as the local engine would
        window = max(math.ceil(MIN_WINDOW / workers), 2 * share)
        batch = max(math.ceil(window / CALLS_PER_ACTOR), math.ceil(n_rows / MAX_BLOCKS))
        workers = max(1, min(workers, math.ceil(n_rows / batch)))
        return dataclasses.replace(job, workers=workers), cpus, batch

    def _batches(self, job: WorkerJob, rows: Sequence[int], cpus: float, batch: int) -> Any:
        import ray.data

        from rageval.runner.engines._ray_worker import ScoreBatch

        items = []
        for row in rows:
            sample = self.samples[row]
            assert sample is not None
            # the cells the plan skips go with the row: the actors decide nothing of it again
            skipped = self.plans[0].skipped_cells.get(row, {})
            items.append(
                {
                    "row": row,
                    "id": self.ids[row],
                    "sample": sample.model_dump_json(),
                    "skipped": json.dumps(
                        {m: c.model_dump(mode="json") for m, c in skipped.items()}
                    ),
                }
            )
        data = ray.data.from_items(items, override_num_blocks=math.ceil(len(items) / batch))
        # An actor's calls run at once, on threads that hand their batch to its one event loop;
        # it is given no more batches than it runs, so an actor that is ready first does not
        # queue up the batches of those still starting.
        pool_size: dict[str, Any] = {
            "size": job.workers,
            "max_tasks_in_flight_per_actor": CALLS_PER_ACTOR,
        }
        extra: dict[str, Any] = {}
        try:
            pool = ray.data.ActorPoolStrategy(
                **pool_size, max_concurrent_calls_per_actor=CALLS_PER_ACTOR
            )
        except TypeError:  # a Ray without that setting: the actors' own
            pool = ray.data.ActorPoolStrategy(**pool_size)
            extra["max_concurrency"] = CALLS_PER_ACTOR
        scored = data.map_batches(
            ScoreBatch,
            fn_constructor_kwargs={"job": job, "embed_threads": max(1, int(cpus))},
            batch_size=None,  # a block is a batch
            batch_format="numpy",
            compute=pool,
            num_cpus=cpus,
            **extra,
        )
        return scored.iter_batches(batch_size=None, batch_format="numpy")


def _distinct(endpoints: Sequence[Any]) -> list[Any]:
    return list({ep.base_url: ep for ep in endpoints}.values())


def _connect(address: str | None) -> tuple[bool, bool]:
    """(connected here, private Ray started here)."""
    import ray

    if ray.is_initialized():
        if address is not None:
            log.warning("ray: this process is already connected to Ray; %s is not joined", address)
        return False, False
    common: dict[str, Any] = {
        "include_dashboard": False,
        # workers' output stays in Ray's log files, not among the progress line and summary
        "log_to_driver": False,
        # Ray's own notices (start-up, authentication) only when they are errors
        "logging_level": logging.ERROR,
    }
    try:
        if address is not None:
            ray.init(address=address, **common)
            return True, False
        # rageval sends nothing anywhere it was not told to: the Ray it starts reports no usage
        # statistics (Ray's default is to send them) unless the user asked for them
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray runs its workers at nice 15 by default, made for clusters whose nodes do nothing
        # else; on a machine with other work that starves the actors (a run 25 times slower
        # under a 2-core load). The Ray started here does this run's work, which the default
        # engine does at the caller's priority: so do its workers, unless the user set it.
        os.environ.setdefault("RAY_worker_niceness", "0")
        # "local": a Ray of its own, as documented. Without it ray.init() joins the cluster a
        # `ray start` left on this machine, and then refuses the num_cpus given here.
        ray.init("local", num_cpus=_cores(), _node_ip_address="127.0.0.1", **common)
    except Exception as e:
        where = f"join the Ray cluster at {address}" if address else "start a local Ray"
        raise RayEngineError(f"could not {where}: {type(e).__name__}: {e}") from e
    return True, True


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def _quiet_console() -> Iterator[None]:
    """Ray's console notices (start-up, Ray Data's plan and progress) held back while rageval
    drives the job, its errors kept; Ray's log files get everything as usual."""
    import ray.data

    context = ray.data.DataContext.get_current()
    bars, context.enable_progress_bars = context.enable_progress_bars, False
    muted = []
    for name in ("ray.data",):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler
            ):
                muted.append((handler, handler.level))
                handler.setLevel(max(handler.level, logging.ERROR))
    try:
        yield
    finally:
        context.enable_progress_bars = bars
        for handler, level in muted:
            handler.setLevel(level)


def _merge_on_every_node(directories: Sequence[str], label: str | None, timeout: float) -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from rageval.runner.engines._ray_worker import merge_cache_shards

    task = ray.remote(num_cpus=0)(merge_cache_shards)
    pending = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(list(directories), label, timeout)
        for node in ray.nodes()
        if node.get("Alive")
    ]
    ray.get(pending, timeout=timeout + 60)


@contextlib.contextmanager
def _logged(doing: str) -> Iterator[None]:
    """Log a failure of `doing` instead of raising it (the shards stay for a later run)."""
    try:
        yield
    except Exception as e:
        log.warning("ray: failed %s: %s: %s", doing, type(e).__name__, e)


def _as_rageval_error(e: BaseException) -> BaseException:
    if isinstance(e, (RagevalError, FatalJudgeError, KeyboardInterrupt)):
        return e
    text = str(e)
    if len(text) > 3000:  # Ray's message carries the worker's traceback
        text = text[:3000] + " ..."
    return RayEngineError(f"the Ray job failed: {type(e).__name__}: {text}")


__all__ = ["RayEngineError", "RayRun"]
