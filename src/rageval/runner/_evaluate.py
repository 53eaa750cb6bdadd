"""evaluate() / aevaluate(): load, validate, plan, score, record, summarise.

Order of work: the data is loaded and every (row, metric) is validated before the first judge
request, so a bad row costs nothing. Then the run directory is created (or an interrupted run
is resumed), and the samples not yet finished are scored by the scheduler, each finished
sample being appended to the run log at once. The scheduler runs here (``engine="local"``) or
in the actors of a Ray Data job (``engine="ray"``, :mod:`rageval.runner.engines`); either way
this process writes the run directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval import _progress
from rageval._client._cache import cache_location
from rageval._client._run import StopSending, run_scope
from rageval._rundir_lock import one_writer
from rageval._sync import first_interrupt, stop_main_now, synchronous
from rageval._version import __version__
from rageval.errors import BudgetReached, RunConfigError, RunDirError
from rageval.judge import BatchSettings, RequestCache, Usage, endpoint_limiter
from rageval.log import (
    ROWS_FILE,
    UNFINISHED_USAGE,
    DataInfo,
    EmbeddingsInfo,
    HumanLabels,
    JudgeInfo,
    Manifest,
    MetricSpec,
    PanelJudge,
    RunLogError,
    SampleLine,
    Summary,
    read_manifest,
    read_summary,
)
from rageval.metrics.base import (
    Metric,
    MetricLike,
    metric_import_root,
    metric_path,
)
from rageval.observers import Observers, RunEnd, RunObserver, RunStart
from rageval.results import EvaluationResult
from rageval.runner._cost import (
    Admission,
    RunBatchJournal,
    limit_spending,
    send_in_batches,
    unpriced,
)
from rageval.runner._estimate import row_cost
from rageval.runner._panel import Panel
from rageval.runner._prepare import (
    LabelsArg,
    OnInvalid,
    RunOptions,
    RunSpec,
    checked_options,
    embeddings_from_spec,
    human_label_pairs,
    judge_from_env,
    label_pairs,
    prepare,
    resolve_metrics,
    spec_of,
)
from rageval.runner._probe import (
    follow_server_slots,
    known_server_slots,
    probe_endpoints,
    reported_windows,
    run_gates,
)
from rageval.runner._runconfig import RunConfig, RunKeywords, run_config
from rageval.runner._rundir import RunDir, data_fingerprint, json_normal
from rageval.runner._schedule import (
    MIN_WINDOW,
    Plan,
    Scheduler,
    spread,
    usage_since,
)
from rageval.runner._stored import read_stored_run
from rageval.samples import (
    LoadedData,
    rows_json,
)

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
_KEYWORDS = _SPEC_KEYS | RunKeywords.__required_keys__ | RunKeywords.__optional_keys__


def _manifest(
    loaded: LoadedData,
    metrics: Sequence[Metric],
    judges: Sequence[Judge],
    judge_of: Mapping[str, Judge | None],
    embeddings: Embeddings | None,
    on_invalid: str,
    column_map: Mapping[str, str] | None,
    language: str | None,
    human_labels: Sequence[tuple[str, str]],
    repeats: int,
    config: RunConfig,
    batching: BatchSettings | None,
    panel: Panel | None,
) -> Manifest:
    judge = judges[0] if judges else None
    specs = []
    for m in metrics:
        own = judge_of.get(m.name)
        specs.append(
            MetricSpec(
                name=m.name,
                params=json_normal(m.params()),
                registered_name=metric_path(type(m))
                or (type(m).name if type(m).name != m.name else None),
                judge=json_normal(own.describe()) if own is not None and own is not judge else None,
                uncaptured=m.uncaptured,
                import_root=metric_import_root(type(m)),
            )
        )
    return Manifest(
        rageval_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metrics=specs,
        # a panel's first judge is the run's judge (its other judges are the panel's)
        judge=_judge_info(judges if panel is None else judges[:1]),
        panel=[
            PanelJudge(name=name, judge=JudgeInfo(**json_normal(j.describe())))
            for name, j in panel or ()
        ],
        embeddings=_embeddings_info(embeddings) if embeddings is not None else None,
        data=DataInfo(
            source=loaded.source,
            # where `--resume DIR` alone finds the data again
            path=str(loaded.path.resolve()) if loaded.path is not None else None,
            rows_file=ROWS_FILE if loaded.rows is not None else None,
            column_map=dict(column_map) if column_map else None,
            language=language,
            fingerprint=data_fingerprint(loaded),
            n_rows=len(loaded.samples),
        ),
        on_invalid=on_invalid,
        human_labels=[HumanLabels(column=c, metric=m) for c, m in human_labels],
        repeats=repeats,
        engine=config.engine,
        batch=batching is not None,
        batch_settings=dataclasses.asdict(batching) if batching is not None else None,
        run_config=config.record(),
    )


def _embeddings_info(embeddings: Embeddings) -> EmbeddingsInfo:
    base_url = getattr(embeddings, "base_url", None)
    if base_url is None:  # the local model: no endpoint, no request cache
        return EmbeddingsInfo(name=embeddings.name)
    cache = getattr(embeddings, "cache", None)
    located = cache_location(cache) if isinstance(cache, RequestCache) else None
    return EmbeddingsInfo(name=embeddings.name, base_url=base_url, cache=located or False)


def _judge_info(judges: Sequence[Judge]) -> JudgeInfo | None:
    if not judges:
        return None
    described: dict[str, Any] = json_normal(judges[0].describe())
    if len(judges) > 1:  # rows spread over these endpoints of the same model
        described["base_urls"] = [j.base_url for j in judges]
    return JudgeInfo(**described)


class _EmbeddingMeter:
    """What remote embeddings were paid for by this run since its previous finished sample.
    They book each request to the run that made it (``RunContext.embeddings_meter``), not by
    the difference of their ledger, which another run sharing the client adds to as well; their
    batches mix samples and metrics, so each line of the log carries what was booked since the
    line before, and the lines add up to the run's embedding usage."""

    def __init__(self) -> None:
        self._since = _NOTHING

    def add(self, usage: Usage, tags: Mapping[str, str] | None) -> None:
        self._since = self._since + usage

    def take(self) -> Usage | None:
        spent, self._since = self._since, _NOTHING
        return None if spent == _NOTHING else spent


_NOTHING = Usage()


def _window(judges: Sequence[Judge]) -> int:
    """Samples in flight: enough to keep twice the endpoints' concurrency busy."""
    endpoints = {j.base_url for j in judges}
    concurrency = sum(endpoint_limiter(url).max_concurrency for url in endpoints)
    return max(MIN_WINDOW, 2 * concurrency)


class _Progress(RunObserver):
    """The progress line fed from the judges' ledgers and the finished samples."""

    def __init__(self, line: _progress.ProgressLine | None, judges: Sequence[Judge]) -> None:
        self.line = line
        self.judges = list({id(j): j for j in judges}.values())
        self._base = self._usage()
        #: the run's Batch API queues, in batch mode
        self.queues: Sequence[BatchQueue] = ()
        #: the run's graceful stop, whose requests in flight the line shows once it stops
        self.stop: StopSending | None = None

    def _usage(self) -> Usage:
        # calls in progress count too: a fault stall's retries show while it lasts
        return sum((j.usage.total + j.pending_usage() for j in self.judges), Usage())

    def on_sample(self, record: SampleLine) -> None:
        if self.line is None:
            return
        self.line.row_done(record.row)
        self.line.counters.not_measured += sum(
            c.status == "not_measured" for c in record.cells.values()
        )
        self.refresh()

    def refresh(self, *, force: bool = False) -> None:
        if self.line is None:
            return
        u = usage_since(self._usage(), self._base)
        c = self.line.counters
        c.requests, c.tokens, c.cache_hits, c.cost_usd = (
            u.requests,
            u.total_tokens,
            u.cache_hits,
            u.cost_usd,
        )
        c.retries, c.reasks = u.retries, u.reasks
        if self.stop is not None and self.stop.requested:
            c.stopping = self.stop.in_flight
        if self.queues:
            waiting = [w for q in self.queues for w in q.waiting_on.values()]
            c.batches = (len(waiting), sum(d for d, _ in waiting), sum(n for _, n in waiting))
        self.line.update(force=force)

    async def tick(self) -> None:
        """Redraw twice a second while requests are in flight and no sample finishes."""
        while True:
            await asyncio.sleep(0.5)
            self.refresh(force=True)


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


class _RunLog(RunObserver):
    """The run's result, and its run directory if it has one: each finished sample appended to
    the log at once (the result keeps where, to read its evidence back), and the summary and
    report when the run ends."""

    def __init__(self, rundir: RunDir | None, result: EvaluationResult) -> None:
        self.rundir = rundir
        self.result = result

    def on_sample(self, line: SampleLine) -> None:
        offset = self.rundir.append(line) if self.rundir is not None else None
        self.result.add(line, offset=offset)

    def on_end(self, end: RunEnd) -> None:
        # interrupted (Ctrl-C, SIGTERM: not an Exception) it stays without a summary, as a run
        # to resume; a run an error stopped says how far it got
        interrupted = end.error is not None and not isinstance(end.error, Exception)
        if self.rundir is not None and not interrupted:
            self.rundir.write_summary(end.summary)
            _write_report(self.rundir)


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
            what the run was started with, as its manifest records it.
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
    config = run_config(config, options)
    if show_progress is not None and config.progress is None:
        config = dataclasses.replace(config, progress=show_progress)
    given: dict[str, Any] = {k: v for k, v in options.items() if k in _SPEC_KEYS}
    spec = spec_of(RunSpec(data, metrics, llm, embeddings, **given))
    return await _evaluate(spec, config)


async def _evaluate(spec: RunSpec, config: RunConfig) -> EvaluationResult:
    """The run of `spec`, executed as `config` says: what :func:`aevaluate` does once its
    arguments are these two objects."""
    run_dir, resume, overwrite = config.run_dir, config.resume, config.overwrite
    engine, max_cost, observers = config.engine, config.max_cost, config.observers
    own_judge = isinstance(spec.llm, str) or spec.llm is None
    if not config.cache and isinstance(spec.llm, str):
        spec = dataclasses.replace(spec, llm=judge_from_env(spec.llm, cache=False))
    if resume and run_dir is not None:
        spec = read_stored_run(run_dir).complete(spec)
    # checked here as well as in prepare(): the checks below this line need the values
    on_invalid, repeats = checked_options(spec.on_invalid, spec.repeats)
    column_map = spec.column_map
    batch = config.batch
    if resume and (batch is None or batch is True) and run_dir is not None:
        # as the run was batched (True: in batch mode, with its settings if it was)
        batch = _stored_batch(run_dir) or batch
    batching = BatchSettings() if batch is True else batch or None
    if engine == "ray" and (max_cost is not None or batching is not None):
        raise RunConfigError("max_cost and batch work with the local engine, not with engine='ray'")
    # a resumed run's duration and cost are all of its sessions': the earlier ones' (as its
    # summary says) and this one's
    earlier = _earlier_summary(run_dir) if resume else None
    started = time.monotonic() - ((earlier.duration_s or 0.0) if earlier is not None else 0.0)
    run = prepare(spec, resume=resume)
    loaded, ids, metric_objs = run.loaded, run.ids, run.metrics
    run_judges, embedder, plans = run.judges, run.embedder, run.plans
    human_pairs = human_label_pairs(config.human_labels, loaded, ids, metric_objs)
    judges = run.all_judges()
    missing = unpriced(judges, batch=batching is not None)
    if max_cost is not None and missing:
        rates = "batch " if batching is not None else ""
        raise RunConfigError(
            f"max_cost needs the {rates}price of the judge model {', '.join(missing)}, which "
            "rageval does not know: give it with --price MODEL=INPUT,OUTPUT[,CACHED_INPUT"
            "[,BATCH_INPUT,BATCH_OUTPUT]] (USD per million tokens) or Judge(..., "
            "prices=PriceTable({'MODEL': ModelPrice(...)}))"
        )
    embedding_meter = _EmbeddingMeter()
    run_id = uuid.uuid4().hex
    ray_run = None
    if engine == "ray" and run.panel is not None:
        raise RunConfigError("a judge panel runs with the local engine, not with engine='ray'")
    if engine == "ray":
        from rageval.runner.engines._ray import RayRun
        from rageval.runner.engines._ship import ShipError

        try:  # whatever cannot be sent to the workers is refused before any work
            ray_run = RayRun(
                plans,
                run_judges,
                loaded.samples,
                ids,
                address=config.ray_address,
                actors=config.ray_actors,
            )
        except ShipError as e:
            raise RunConfigError(str(e)) from None

    manifest = _manifest(
        loaded,
        metric_objs,
        run_judges,
        plans[0].judge_of,
        embedder,
        on_invalid,
        column_map,
        spec.language,
        human_pairs,
        repeats,
        config,
        batching,
        run.panel,
    )
    manifest.metrics_left_out = run.left_out
    rundir = RunDir(run_dir) if run_dir is not None else None
    result = EvaluationResult(
        [m.name for m in metric_objs],
        ids,
        loaded.samples,
        run_dir=Path(run_dir) if run_dir is not None else None,
        metric_params={m.name: m.params for m in manifest.metrics},
        judge=manifest.judge.model_dump() if manifest.judge is not None else None,
        embeddings=embedder.name if embedder is not None else None,
        human_labels=human_pairs,
        repeats=repeats,
        metrics_left_out=run.left_out,
    )
    if rundir is not None and resume:
        for offset, record in rundir.finished_samples(manifest, ids):
            result.add(record, offset=offset)
        if earlier is not None:
            result.unfinished_usage = earlier.shared_usage.get(UNFINISHED_USAGE, Usage())
    elif rundir is not None and not overwrite:
        rundir.check_vacant()
    todo = [row for row in range(len(ids)) if not result.is_finished(row)]
    # after every local check (bad data or the wrong run directory cost nothing), and only
    # when something is left to score: a finished run resumes without its endpoints
    if config.probe and todo:
        await probe_endpoints(judges, embedder)
    # what this run's probe found, else an earlier one's (the pytest plugin probes once)
    server_slots = follow_server_slots(run_judges, known_server_slots())
    manifest.servers = {
        judge.base_url: {
            "server": "llama.cpp",
            "slots": followed.slots,
            "max_concurrency": followed.concurrency or judge.endpoint.limiter.max_concurrency,
            "timeout": followed.timeout or judge.endpoint.timeout,
            "context": followed.context,
        }
        for judge in run_judges
        if (followed := server_slots.get(id(judge.endpoint))) is not None
    }
    if rundir is not None:
        if resume:
            rundir.resume(manifest)
        else:
            copy = rows_json(loaded.rows) if loaded.rows is not None else None
            rundir.create(manifest, overwrite=overwrite, rows_json=copy)
    todo = [row for row in range(len(ids)) if not result.is_finished(row)]

    display = _progress.display(config.progress)
    line = (
        _progress.ProgressLine(
            len(ids),
            done=len(ids) - len(todo),
            cells_per_row=len(metric_objs),
            plain_every=_progress.PLAIN_EVERY_S if display == "plain" else None,
        )
        if display is not None
        else None
    )
    if line is not None:
        line.counters.budget_usd = max_cost
    meter = _Progress(line, judges)
    observed = Observers([_RunLog(rundir, result), meter], observers)
    run_path = Path(run_dir) if run_dir is not None else None
    observed.start(RunStart(manifest, run_path, len(ids), len(ids) - len(todo), run_id))

    def on_record(line: SampleLine) -> None:
        line.embeddings_usage = embedding_meter.take()
        line.run_id = run_id
        observed.sample(line)

    ticker = asyncio.ensure_future(meter.tick()) if line is not None else None
    # the judges tell the run's scope of each call they end; only observers of the user's
    # own listen (the run log books usage through the meter already)
    listeners = (observed.judge_call,) if observers else ()
    # the local engine stops gracefully on the first Ctrl-C (the Ray engine's requests are
    # its workers', which stop at once)
    stop = StopSending() if ray_run is None else None
    graceful = _GracefulStop(stop, meter) if stop is not None else None
    scheduler: Scheduler | None = None
    try:
        with (
            run_scope(
                run_id=run_id,
                embeddings_meter=embedding_meter,
                call_listeners=listeners,
                server_slots=server_slots,
                windows=reported_windows(judges),
                gates=run_gates(run_judges, server_slots),
                stop=stop,
            ),
            first_interrupt(graceful.begin) if graceful is not None else contextlib.nullcontext(),
        ):
            if ray_run is not None:
                await ray_run.run(todo, on_record)
            else:
                journal = RunBatchJournal(run_dir) if batching and run_dir is not None else None
                async with send_in_batches(judges, batching, journal) as queues:
                    meter.queues = queues
                    with limit_spending(max_cost) as limit:
                        admission = None
                        if limit is not None:
                            cost = functools.partial(
                                _row_cost, plans, loaded, ids, batching is not None
                            )
                            admission = Admission(limit, cost)
                        # in batch mode a request holds no connection: every row is in flight
                        window = _window(judges) if batching is None else BATCH_WINDOW
                        scheduler = Scheduler(
                            plans,
                            loaded.samples,
                            ids,
                            window=window,
                            on_record=on_record,
                            admission=admission,
                            on_cell=line.cell_done if line is not None else None,
                        )
                        await scheduler.run(todo)
    except BaseException as stopped:
        if scheduler is not None:  # what the rows it had begun used: paid, in no line
            result.unfinished_usage += scheduler.unfinished_usage()
        if isinstance(stopped, BudgetReached):
            stopped.result = result
        # the run stops (a fatal judge error): the directory still says how far it got, unless
        # that fails too, which must not hide why the run stopped
        result.duration_s = time.monotonic() - started
        try:
            observed.end(RunEnd(result, run_path, stopped, run_id))
        except Exception as e:
            logging.getLogger("rageval").warning(
                "could not write the summary of the stopped run in %s (%s: %s)",
                run_path,
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
            meter.refresh(force=True)
            line.close()
        if rundir is not None:
            rundir.close()
        # a judge made here from the environment is ours to close; pools opened on a loop that
        # evaluate() made are closed when that loop shuts down (rageval._sync.close_with_loop)
        if own_judge:
            for j in run_judges:
                await j.aclose()
        # the request caches write behind: what this run learned is on disk when it returns
        caches = {
            id(c): c for c in _caches(judges, [embedder, *(m.embeddings for m in metric_objs)])
        }
        if caches:
            await asyncio.to_thread(_flush, list(caches.values()))
    result.duration_s = time.monotonic() - started
    observed.end(RunEnd(result, run_path, run_id=run_id))
    return result


def _earlier_summary(run_dir: str | os.PathLike[str] | None) -> Summary | None:
    """The summary the earlier sessions of the run in `run_dir` wrote (None: a run killed
    before it wrote one, or a summary that cannot be read, which this run's end rewrites)."""
    if run_dir is None:
        return None
    try:
        return read_summary(run_dir)
    except (OSError, RunLogError):
        return None


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


def _stored_batch(run_dir: str | os.PathLike[str]) -> BatchSettings | None:
    """How the run in `run_dir` was batched, if it was (None too when it cannot be read: the
    resume reports why)."""
    try:
        stored = read_manifest(run_dir)
    except (OSError, RunLogError):
        return None
    if not stored.batch:
        return None
    try:
        return BatchSettings(**(stored.batch_settings or {}))
    except (TypeError, ValueError):  # settings of another rageval: the defaults
        return BatchSettings()


def _write_report(rundir: RunDir) -> None:
    try:
        rundir.write_report()
    except ImportError:
        return
    except Exception as e:  # the run's data is safe on disk; the report can be rebuilt later
        logging.getLogger("rageval").warning(
            "could not write report.html (%s: %s); rebuild it with: rageval report %s",
            type(e).__name__,
            e,
            rundir.path,
        )


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
