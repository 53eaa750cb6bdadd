"""evaluate() / aevaluate(): load, validate, plan, score, record, summarise.

``aevaluate``'s keyword arguments make a :class:`RunSpec` (what is scored) and a
:class:`RunConfig` (how the run executes); then the run is planned, its session opened and
its engine run (:mod:`rageval.runner._session`): the data is loaded and every (row, metric) is
validated before the first judge request, so a bad row costs nothing; the session writes the
manifest, creates the run directory (or resumes an interrupted run) and tells the observers;
the engine scores the samples not yet finished, each finished sample appended to the run log
at once. The engine is the scheduler here (``engine="local"``: :class:`_LocalEngine`) or the
actors of a Ray Data job (``engine="ray"``, :mod:`rageval.runner.engines`); either way this
process writes the run directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rageval._client._run import StopSending, run_scope
from rageval._rundir_lock import one_writer
from rageval._sync import first_interrupt, stop_main_now, synchronous
from rageval.errors import BudgetReached, RunConfigError, RunDirError
from rageval.judge import RequestCache, Usage, endpoint_limiter
from rageval.metrics.base import MetricLike
from rageval.results import EvaluationResult
from rageval.runner._cost import (
    Admission,
    RunBatchJournal,
    limit_spending,
    send_in_batches,
)
from rageval.runner._estimate import row_cost
from rageval.runner._panel import Panel
from rageval.runner._prepare import (
    LabelsArg,
    OnInvalid,
    RunOptions,
    RunSpec,
    embeddings_from_spec,
    judge_from_env,
    label_pairs,
    resolve_metrics,
    spec_of,
)
from rageval.runner._probe import reported_windows, run_gates
from rageval.runner._runconfig import RunConfig, RunKeywords, run_config
from rageval.runner._schedule import (
    MIN_WINDOW,
    Plan,
    Scheduler,
    spread,
)
from rageval.runner._session import (
    Planned,
    Session,
    _Progress,
    _write_report as _write_report,  # calibrate's, too
    open_session,
    plan_run,
)
from rageval.samples import LoadedData

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rageval._client._batch import BatchQueue
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge

#: rows in flight at once in batch mode (each waits on its batch, holding no connection)
BATCH_WINDOW = 10_000


class EvaluateKeywords(RunOptions, RunKeywords, total=False):
    """The keyword arguments of :func:`aevaluate` beside the data, metrics, judge and
    embeddings: those of its :class:`RunSpec` and those of its :class:`RunConfig`."""


_SPEC_KEYS = RunOptions.__required_keys__ | RunOptions.__optional_keys__
_FIELDS: frozenset[str] = frozenset(RunKeywords.__annotations__)
_KEYWORDS = _SPEC_KEYS | _FIELDS


def _window(judges: Sequence[Judge]) -> int:
    """Samples in flight: enough to keep twice the endpoints' concurrency busy."""
    endpoints = {j.base_url for j in judges}
    concurrency = sum(endpoint_limiter(url).max_concurrency for url in endpoints)
    return max(MIN_WINDOW, 2 * concurrency)


#: loop turns the run waits, once its last request in flight is answered, so that what that
#: answer completes (its cell, its row) is recorded before the run is cancelled
_SETTLE_TURNS = 20


class _GracefulStop:
    """The first Ctrl-C (or SIGTERM) of a run on the main thread: the run sends nothing more
    and starts no row (:class:`StopSending`), waits for the requests it sent, whose answers go
    into the request cache and finish their rows, then stops as the second Ctrl-C would have
    stopped it at once (:func:`rageval._sync.stop_main_now`). The wait is bounded by the
    requests' own timeout: one that times out or fails is not sent again."""

    def __init__(self, stop: StopSending, meter: _Progress) -> None:
        self.stop = stop
        self.meter = meter
        self.draining: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self.draining = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        n = self.stop.in_flight
        said = (
            f"stopping: waiting for {n} request{'' if n == 1 else 's'} in flight; "
            "Ctrl-C again to stop now"
        )
        self.meter.stop = self.stop
        if self.meter.line is not None:
            self.meter.line.note(said)
        else:
            print(f"rageval: {said}", file=sys.stderr, flush=True)
        await self.stop.request()
        for _ in range(_SETTLE_TURNS):
            await asyncio.sleep(0)
        stop_main_now()

    def close(self) -> None:
        if self.draining is not None:
            self.draining.cancel()


@one_writer  # the run directory has one writer, from before the first step to the report
async def aevaluate(
    data: Any,
    metrics: Sequence[MetricLike] | None = None,
    llm: Judge | str | Sequence[Judge] | Panel | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    config: RunConfig | None = None,
    show_progress: bool | None = None,
    **options: Unpack[EvaluateKeywords],
) -> EvaluationResult:
    """Score every sample of `data` with every metric; see the module docstring.

    Args:
        data: anything :func:`rageval.load_samples` reads, or a whole
            :class:`~rageval.runner.RunSpec` (then the arguments it holds are not given again).
        metrics: Metric instances, and registry names, classes or metric modules
            (``from rageval.metrics import faithfulness``) for a metric built here (default:
            every metric whose required fields the data has).
        llm: a Judge or a model name (default: RAGEVAL_LLM from the environment, else no judge:
            metrics that need one are skipped with a hint); a list of Judges of one model on
            several endpoints spreads the rows over them (each row always to the same one); a
            :class:`~rageval.runner.Panel` of judges has every judge score every judge cell, the
            cell keeping their mean, and the summary their agreement (Krippendorff's α;
            docs/panels.md).
        embeddings: an Embeddings, ``"local"`` or ``"openai:MODEL"`` (default: the local model,
            if a metric needs one).
        config: how the run executes, whole: a :class:`~rageval.runner.RunConfig` (then none
            of its keywords below is given); calibrate() and align() take the same.
        show_progress: an alias of ``progress``.
        **options: what to score beside the arguments above (``metric_params``,
            ``column_map``, ``on_invalid``, ``repeats``) and the :class:`RunConfig`'s fields
            as keywords (the others), each below.

    Keyword Args:
        metric_params: the constructor arguments of the metrics built here, by registry name
            (``{"answer_correctness": {"weights": [0.5, 0.5]}}``), else default settings.
        column_map: your column -> rageval's field.
        language: the language of every row without a ``language`` column of its own, which
            every judge prompt states (a code, ``"de"``, or a name; None: detected per row;
            docs/languages.md).
        on_invalid: ``"skip"`` turns rows a metric cannot score into skipped cells instead of
            an :class:`InvalidDataError` (default ``"raise"``).
        repeats: scores every judge cell K times (default 1), bypassing the request cache for
            the repeats; a cell's value is the mean of its scores and the summary reports how
            much of the interval the judge's own noise makes.
        run_dir: writes the run log there.
        resume: continues the run in `run_dir`; then whatever is not given (None: `data` too,
            the metrics, the judge, the embeddings, `column_map`, `on_invalid`, `repeats`) is
            what the run was started with, as its manifest records it; so are `engine`,
            `max_cost`, `batch`, `probe`, `human_labels` and `cache` (a keyword given wins for
            this session and is the run's from then on).
        overwrite: replaces a run already in `run_dir` (by default that is an error).
        progress: None shows a progress line redrawn in place when stderr is a terminal and
            elsewhere (a CI log, a notebook) a plain line a minute once the run has lasted one;
            True the redrawn line wherever stderr goes; False none.
        probe: (on by default, as on the command line) first checks, with one quick request
            each and no tokens, that every endpoint is there and takes its key, and reads a
            llama.cpp server's slots (see :mod:`rageval.runner._probe`); False skips it.
        human_labels: pairs label columns of the data (people's scores, on the metric's scale;
            empty where a row is not labelled) with metrics: ``{"human_faithful":
            "faithfulness"}``; the summary then gives each label's PPI++ mean, the judge's
            scores on every row rectified by the labelled rows (docs/calibration.md).
        engine: ``"ray"`` scores on Ray Data (the ``rageval[ray]`` extra): it joins the cluster
            at `ray_address` (or the one this process is connected to), else starts a local
            Ray; `ray_actors` overrides the number of actors (see docs/ray.md).
        ray_address: the Ray cluster to join.
        ray_actors: the number of Ray actors.
        max_cost: (USD) caps what the judges may spend in this call: a request is sent only if
            its worst case fits beside what was spent and what is in flight; when the next
            request cannot fit, the run stops with :class:`~rageval.errors.BudgetReached` (its
            ``result`` holds what finished, kept in `run_dir` for a resume). A judge model of
            unknown price is refused up front. See :mod:`rageval._client._budget` (local engine
            only).
        batch: True (or a :class:`~rageval.judge.BatchSettings`) sends the judge requests
            through the endpoint's Batch API, priced at the model's batch rates: every row is in
            flight at once, the requests go out as batches, and `run_dir` keeps what was
            uploaded so that a resumed run re-attaches to a batch in flight
            (:mod:`rageval._client._batch`; local engine only). Resuming, None means as the run
            was started, and True batch mode with the settings the run was batched with.
        observers: are told how the run goes: its start, each finished sample, each judge call
            and its end (:mod:`rageval.observers`: the MLflow and OpenTelemetry sinks, or your
            own).
        cache: False makes the judge of a model name without its request cache.
    """
    unknown = sorted(set(options) - _KEYWORDS)
    if unknown:
        raise TypeError(f"aevaluate() got an unexpected keyword argument {unknown[0]!r}")
    config = run_config(config, options)  # resuming, what is not given is the run's own
    if show_progress is not None and config.progress is None:
        config = dataclasses.replace(config, progress=show_progress)
    given: dict[str, Any] = {k: v for k, v in options.items() if k in _SPEC_KEYS}
    spec = spec_of(RunSpec(data, metrics, llm, embeddings, **given))
    return await _evaluate(spec, config)


async def _evaluate(spec: RunSpec, config: RunConfig) -> EvaluationResult:
    """The run of `spec`, executed as `config` says: planned (every check before anything is
    written or sent), its session opened (the manifest, the run directory, the observers),
    then its engine scores the rows left (:mod:`rageval.runner._session`)."""
    planned = plan_run(spec, config)
    engine = _RayEngine(planned) if config.engine == "ray" else _LocalEngine()
    session = await open_session(planned)
    return await _execute(session, engine)


class _LocalEngine:
    """Scores a session's rows in this process: the scheduler, within the budget, in batch
    mode through the endpoints' Batch API."""

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None
        #: the run's Batch API queues once they are open (the progress line shows them)
        self.queues: Sequence[BatchQueue] = ()

    async def run(self, session: Session) -> None:
        planned, run = session.planned, session.planned.run
        config, batching = planned.config, planned.batching
        judges = run.all_judges()
        run_dir = config.run_dir
        journal = RunBatchJournal(run_dir) if batching and run_dir is not None else None
        async with send_in_batches(judges, batching, journal) as queues:
            session.meter.queues = queues
            with limit_spending(config.max_cost) as limit:
                admission = None
                if limit is not None:
                    cost = functools.partial(
                        _row_cost, run.plans, run.loaded, run.ids, batching is not None
                    )
                    admission = Admission(limit, cost)
                # in batch mode a request holds no connection: every row is in flight
                window = _window(judges) if batching is None else BATCH_WINDOW
                line = session.line
                self.scheduler = Scheduler(
                    run.plans,
                    run.loaded.samples,
                    run.ids,
                    window=window,
                    on_record=session.on_record,
                    admission=admission,
                    on_cell=line.cell_done if line is not None else None,
                )
                await self.scheduler.run(session.todo)

    def unfinished_usage(self) -> Usage:
        """What the rows it had begun and not finished used: paid, in no line."""
        return self.scheduler.unfinished_usage() if self.scheduler is not None else Usage()


class _RayEngine:
    """Scores a session's rows in the actors of a Ray Data job (docs/ray.md); this process
    writes the run directory. Made before the session opens: whatever cannot be sent to the
    workers is refused before any work."""

    def __init__(self, planned: Planned) -> None:
        from rageval.runner.engines._ray import RayRun
        from rageval.runner.engines._ship import ShipError

        run, config = planned.run, planned.config
        try:
            self.ray_run = RayRun(
                run.plans,
                run.judges,
                run.loaded.samples,
                run.ids,
                address=config.ray_address,
                actors=config.ray_actors,
            )
        except ShipError as e:
            raise RunConfigError(str(e)) from None

    async def run(self, session: Session) -> None:
        await self.ray_run.run(session.todo, session.on_record)

    def unfinished_usage(self) -> Usage:
        return Usage()  # a worker's rows are recorded whole or not at all


async def _execute(session: Session, engine: _LocalEngine | _RayEngine) -> EvaluationResult:
    """`engine` scores the rows `session` has left, in the run's context; the session records
    each finished row, and its end however the run ends."""
    planned, result, line = session.planned, session.result, session.line
    run, observers = planned.run, planned.config.observers
    judges = run.all_judges()
    ticker = asyncio.ensure_future(session.meter.tick()) if line is not None else None
    # the judges tell the run's scope of each call they end; only observers of the user's
    # own listen (the run log books usage through the meter already)
    listeners = (session.observed.judge_call,) if observers else ()
    # the local engine stops gracefully on the first Ctrl-C (the Ray engine's requests are
    # its workers', which stop at once)
    stop = StopSending() if isinstance(engine, _LocalEngine) else None
    graceful = _GracefulStop(stop, session.meter) if stop is not None else None
    try:
        with (
            run_scope(
                run_id=session.run_id,
                embeddings_meter=session.embedding_meter,
                call_listeners=listeners,
                server_slots=session.server_slots,
                windows=reported_windows(judges),
                gates=run_gates(run.judges, session.server_slots),
                stop=stop,
            ),
            first_interrupt(graceful.begin) if graceful is not None else contextlib.nullcontext(),
        ):
            await engine.run(session)
    except BaseException as stopped:
        result.unfinished_usage += engine.unfinished_usage()
        if isinstance(stopped, BudgetReached):
            stopped.result = result
        # the run stops (a fatal judge error): the directory still says how far it got, unless
        # that fails too, which must not hide why the run stopped
        try:
            session.end(stopped)
        except Exception as e:
            logging.getLogger("rageval").warning(
                "could not write the summary of the stopped run in %s (%s: %s)",
                session.run_path,
                type(e).__name__,
                e,
            )
        raise
    finally:
        if graceful is not None:
            graceful.close()
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        if line is not None:
            session.meter.refresh(force=True)
            line.close()
        if session.rundir is not None:
            session.rundir.close()
        # a judge made here from the environment is ours to close; pools opened on a loop that
        # evaluate() made are closed when that loop shuts down (rageval._sync.close_with_loop)
        if planned.own_judge:
            for j in run.judges:
                await j.aclose()
        # the request caches write behind: what this run learned is on disk when it returns
        embedders = [run.embedder, *(m.embeddings for m in run.metrics)]
        caches = {id(c): c for c in _caches(judges, embedders)}
        if caches:
            await asyncio.to_thread(_flush, list(caches.values()))
    session.end()
    return result


def _flush(caches: Sequence[RequestCache]) -> None:
    for cache in caches:
        cache.flush()


def _caches(judges: Sequence[Judge], embedders: Sequence[Embeddings | None]) -> list[RequestCache]:
    found = [j.cache for j in judges] + [getattr(e, "cache", None) for e in embedders]
    return [c for c in found if isinstance(c, RequestCache)]


def _row_cost(
    plans: Sequence[Plan], loaded: LoadedData, ids: Sequence[str], batch: bool, row: int
) -> tuple[float, float]:
    """The planned cost of a row and the most one of its requests may cost (without looking
    up kept cells: a row kept costs nothing anyway, and the lookup is the scheduler's)."""

    sid = ids[row]
    plan = plans[spread(sid, len(plans))]
    planned = row_cost(plan, row, loaded.samples[row], sid, batch=batch, kept=False)[0]
    return planned.cost_usd, planned.largest_request_usd


evaluate = synchronous(
    aevaluate,
    "evaluate",
    """Synchronous :func:`aevaluate`. Inside a running event loop (Jupyter, FastAPI,
    pytest-asyncio) the evaluation runs on a private loop in a worker thread.""",
)


__all__ = [
    "LabelsArg",
    "OnInvalid",
    "RunConfigError",
    "RunDirError",
    "aevaluate",
    "embeddings_from_spec",
    "evaluate",
    "judge_from_env",
    "label_pairs",
    "resolve_metrics",
]
