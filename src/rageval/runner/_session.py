"""An evaluation, up to the first request: its plan and its session.

:func:`plan_run` makes what a run of a :class:`RunSpec` executed as a :class:`RunConfig` is
made of -- the resumed run's spec completed from its manifest, batch mode resolved, the data,
metrics, judges and plans (:func:`~rageval.runner._prepare.prepare`), the human label columns,
the budget's prices -- with every check done before anything is written or sent.
:func:`open_session` opens the :class:`Session` the engine then scores in, once: the manifest,
the run directory (created, or resumed with its finished rows), the result the rows go into,
the endpoint check, the progress line and the observers, told of the start. The engine
(:mod:`rageval.runner._evaluate`) runs the session; the session says how each row and the end
are recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval import _progress
from rageval._client._cache import cache_location
from rageval._client._run import StopSending
from rageval._version import __version__
from rageval.errors import RunConfigError
from rageval.judge import BatchSettings, RequestCache, Usage
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
    read_summary,
)
from rageval.metrics.base import metric_import_root, metric_path
from rageval.observers import Observers, RunEnd, RunObserver, RunStart
from rageval.results import EvaluationResult
from rageval.runner._cost import unpriced
from rageval.runner._prepare import (
    Prepared,
    RunSpec,
    checked_options,
    human_label_pairs,
    judge_from_env,
    prepare,
)
from rageval.runner._probe import follow_server_slots, known_server_slots, probe_endpoints
from rageval.runner._runconfig import RunConfig
from rageval.runner._rundir import RunDir, data_fingerprint, json_normal
from rageval.runner._schedule import usage_since
from rageval.runner._stored import read_stored_run
from rageval.samples import rows_json

if TYPE_CHECKING:
    from rageval._client._batch import BatchQueue
    from rageval._client._run import ServerSlots
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge

__all__ = ["Planned", "Session", "open_session", "plan_run"]


@dataclasses.dataclass(frozen=True)
class Planned:
    """A run ready to open: its spec (completed from the manifest when resumed), its config,
    what :func:`prepare` made of them, and the options resolved on the way."""

    spec: RunSpec
    config: RunConfig
    run: Prepared
    #: the Batch API's settings when the run is batched (resuming: as it was)
    batching: BatchSettings | None
    #: (label column, metric) pairs of the human labels
    human_pairs: list[tuple[str, str]]
    on_invalid: str
    repeats: int
    #: the summary the earlier sessions of a resumed run wrote
    earlier: Summary | None
    #: when the run started, counting a resumed run's earlier sessions (time.monotonic())
    started: float
    #: the judges were made here (from a model name or the environment): the run closes them
    own_judge: bool


def plan_run(spec: RunSpec, config: RunConfig) -> Planned:
    """The run of `spec` as `config` says, every check done before anything is written or
    sent (see the module docstring)."""
    run_dir, resume = config.run_dir, config.resume
    own_judge = isinstance(spec.llm, str) or spec.llm is None
    if not config.cache and isinstance(spec.llm, str):
        spec = dataclasses.replace(spec, llm=judge_from_env(spec.llm, cache=False))
    if resume and run_dir is not None:
        spec = read_stored_run(run_dir).complete(spec)
    # checked here as well as in prepare(): the checks below this line need the values
    on_invalid, repeats = checked_options(spec.on_invalid, spec.repeats)
    batching = config.batch_settings  # resuming, as the run was unless given (resumed())
    if config.engine == "ray" and (config.max_cost is not None or batching is not None):
        raise RunConfigError("max_cost and batch work with the local engine, not with engine='ray'")
    # a resumed run's duration and cost are all of its sessions': the earlier ones' (as its
    # summary says) and this one's
    earlier = _earlier_summary(run_dir) if resume else None
    started = time.monotonic() - ((earlier.duration_s or 0.0) if earlier is not None else 0.0)
    run = prepare(spec, resume=resume)
    human_pairs = human_label_pairs(config.human_labels, run.loaded, run.ids, run.metrics)
    missing = unpriced(run.all_judges(), batch=batching is not None)
    if config.max_cost is not None and missing:
        rates = "batch " if batching is not None else ""
        raise RunConfigError(
            f"max_cost needs the {rates}price of the judge model {', '.join(missing)}, which "
            "rageval does not know: give it with --price MODEL=INPUT,OUTPUT[,CACHED_INPUT"
            "[,BATCH_INPUT,BATCH_OUTPUT]] (USD per million tokens) or Judge(..., "
            "prices=PriceTable({'MODEL': ModelPrice(...)}))"
        )
    if config.engine == "ray" and run.panel is not None:
        raise RunConfigError("a judge panel runs with the local engine, not with engine='ray'")
    return Planned(
        spec, config, run, batching, human_pairs, on_invalid, repeats, earlier, started, own_judge
    )


@dataclasses.dataclass
class Session:
    """An opened run: what the engine scores and where each finished row and the end go."""

    planned: Planned
    manifest: Manifest
    rundir: RunDir | None
    result: EvaluationResult
    #: the rows left to score
    todo: list[int]
    #: the llama.cpp servers the run follows the slots of, by id(endpoint)
    server_slots: Mapping[int, ServerSlots]
    #: the progress line (None: none shown) and what feeds it
    line: _progress.ProgressLine | None
    meter: _Progress
    observed: Observers
    #: the run's id, on every event its observers are told
    run_id: str
    embedding_meter: _EmbeddingMeter

    @property
    def run_path(self) -> Path | None:
        return self.planned.config.run_dir

    def on_record(self, line: SampleLine) -> None:
        """A row is finished: its line gets the remote embeddings' usage booked since the line
        before and the run's id, and goes to the run log and the observers."""
        line.embeddings_usage = self.embedding_meter.take()
        line.run_id = self.run_id
        self.observed.sample(line)

    def end(self, error: BaseException | None = None) -> None:
        """Tell the observers (the run log's writer first) that the run ended, `error` saying
        why when it stopped early."""
        self.result.duration_s = time.monotonic() - self.planned.started
        self.observed.end(RunEnd(self.result, self.run_path, error, self.run_id))


async def open_session(planned: Planned) -> Session:
    """Open the run `planned` describes (see the module docstring): nothing has been sent when
    this returns but the endpoint check, and the observers have been told of the start."""
    config, run = planned.config, planned.run
    run_dir, resume = config.run_dir, config.resume
    loaded, ids, metric_objs = run.loaded, run.ids, run.metrics
    rundir = RunDir(run_dir) if run_dir is not None else None
    if rundir is not None and not resume and not config.overwrite:
        rundir.check_vacant()
    manifest = _manifest(planned)
    # the same run as the one stored? A local check, so before the endpoint check (the
    # manifest's servers, which only the check finds, play no part in it)
    stored = rundir.check_same_run(manifest) if rundir is not None and resume else None
    judges = run.all_judges()
    # after every local check (bad data or a run directory taken cost nothing), and only when
    # something may be left to score: a run its summary says finished resumes without its
    # endpoints
    earlier = planned.earlier
    finished = earlier is not None and earlier.n_rows == earlier.n_finished == len(ids)
    if config.probe and ids and not finished:
        await probe_endpoints(judges, run.embedder)
    # what this run's probe found, else an earlier one's (the pytest plugin probes once)
    server_slots = follow_server_slots(run.judges, known_server_slots())
    manifest.servers = _servers(run.judges, server_slots)
    result = EvaluationResult(
        [m.name for m in metric_objs],
        ids,
        loaded.samples,
        run_dir=run_dir,
        metric_params={m.name: m.params for m in manifest.metrics},
        judge=manifest.judge.model_dump() if manifest.judge is not None else None,
        embeddings=run.embedder.name if run.embedder is not None else None,
        human_labels=planned.human_pairs,
        repeats=planned.repeats,
        metrics_left_out=run.left_out,
    )
    if rundir is not None and stored is not None:
        for offset, record in rundir.finished_samples(ids):
            result.add(record, offset=offset)
        if earlier is not None:
            result.unfinished_usage = earlier.shared_usage.get(UNFINISHED_USAGE, Usage())
        rundir.resume(stored, manifest)
    elif rundir is not None:
        copy = rows_json(loaded.rows) if loaded.rows is not None else None
        rundir.create(manifest, overwrite=config.overwrite, rows_json=copy)
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
        line.counters.budget_usd = config.max_cost
    meter = _Progress(line, judges)
    observed = Observers([_RunLog(rundir, result), meter], config.observers)
    run_id = uuid.uuid4().hex
    observed.start(RunStart(manifest, run_dir, len(ids), len(ids) - len(todo), run_id))
    return Session(
        planned,
        manifest,
        rundir,
        result,
        todo,
        server_slots,
        line,
        meter,
        observed,
        run_id,
        _EmbeddingMeter(),
    )


def _servers(
    judges: Sequence[Judge], server_slots: Mapping[int, ServerSlots]
) -> dict[str, dict[str, Any]]:
    """How this session drives each llama.cpp server its probe found, by URL."""
    return {
        judge.base_url: {
            "server": "llama.cpp",
            "slots": followed.slots,
            "max_concurrency": followed.concurrency or judge.endpoint.limiter.max_concurrency,
            "timeout": followed.timeout or judge.endpoint.timeout,
            "context": followed.context,
        }
        for judge in judges
        if (followed := server_slots.get(id(judge.endpoint))) is not None
    }


def _manifest(planned: Planned) -> Manifest:
    """The run's manifest, made once from what was planned: what it scores and how it
    executes (its RunConfig whole); how its servers are driven is added once its endpoint
    check has found them."""
    run, config, batching = planned.run, planned.config, planned.batching
    judges, judge_of, loaded, panel = run.judges, run.plans[0].judge_of, run.loaded, run.panel
    judge = judges[0] if judges else None
    specs = []
    for m in run.metrics:
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
    column_map = planned.spec.column_map
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
        embeddings=_embeddings_info(run.embedder) if run.embedder is not None else None,
        data=DataInfo(
            source=loaded.source,
            # where `--resume DIR` alone finds the data again
            path=str(loaded.path.resolve()) if loaded.path is not None else None,
            rows_file=ROWS_FILE if loaded.rows is not None else None,
            column_map=dict(column_map) if column_map else None,
            language=planned.spec.language,
            fingerprint=data_fingerprint(loaded),
            n_rows=len(loaded.samples),
        ),
        on_invalid=planned.on_invalid,
        human_labels=[HumanLabels(column=c, metric=m) for c, m in planned.human_pairs],
        repeats=planned.repeats,
        engine=config.engine,
        batch=batching is not None,
        batch_settings=dataclasses.asdict(batching) if batching is not None else None,
        metrics_left_out=run.left_out,
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


def _earlier_summary(run_dir: str | os.PathLike[str] | None) -> Summary | None:
    """The summary the earlier sessions of the run in `run_dir` wrote (None: a run killed
    before it wrote one, or a summary that cannot be read, which this run's end rewrites)."""
    if run_dir is None:
        return None
    try:
        return read_summary(run_dir)
    except (OSError, RunLogError):
        return None


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
