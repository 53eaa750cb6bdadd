"""evaluate() / aevaluate(): load, validate, plan, score, record, summarise.

Order of work: the data is loaded and every (row, metric) is validated before the first judge
request, so a bad row costs nothing. Then the run directory is created (or an interrupted run
is resumed), and the samples not yet finished are scored by the scheduler, each finished
sample being appended to the run log at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rageval import _env, _progress
from rageval._sync import run_sync
from rageval._version import __version__
from rageval.errors import BudgetReached, RagevalError
from rageval.judge import RequestCache, Usage, UsageLedger, endpoint_limiter
from rageval.log import (
    DataInfo,
    EmbeddingsInfo,
    HumanLabels,
    JudgeInfo,
    Manifest,
    MetricSpec,
    SampleLine,
)
from rageval.metrics.base import Metric, create_metric, registered_metrics
from rageval.results import EvaluationResult
from rageval.runner._cells import CellStore
from rageval.runner._cost import limit_spending, unpriced
from rageval.runner._rundir import RunDir, RunDirError, data_fingerprint, json_normal
from rageval.runner._schedule import MIN_WINDOW, Plan, Scheduler, meter_judge
from rageval.samples import (
    SAMPLE_FIELDS,
    InvalidDataError,
    LoadedData,
    RowProblem,
    load_samples,
    sample_ids,
)

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, PriceTable

OnInvalid = Literal["raise", "skip"]


class RunConfigError(RagevalError, ValueError):
    """An evaluation asked for something that cannot run (unknown metric, bad option...)."""


def judge_from_env(
    model: str | None = None,
    *,
    base_url: str | None = None,
    max_concurrency: int | None = None,
    cache: bool = True,
    prices: PriceTable | None = None,
) -> Judge | None:
    """The judge configured by arguments or the environment (see :mod:`rageval._env`): the
    model from `model` or RAGEVAL_LLM, the endpoint from `base_url`, RAGEVAL_BASE_URL or
    OPENAI_BASE_URL (default OpenAI), the key from OPENAI_API_KEY. None when no model is named."""
    model = _env.judge_model(model)
    if model is None:
        return None
    from rageval.judge import Judge

    return Judge(
        model, base_url=base_url, max_concurrency=max_concurrency, cache=cache, prices=prices
    )


def embeddings_from_spec(
    spec: str, *, base_url: str | None = None, cache: bool = True
) -> Embeddings:
    """`local` or `openai:MODEL` (the CLI's --embeddings); an OpenAI-compatible model is
    reached like the judge: `base_url`, else RAGEVAL_BASE_URL or OPENAI_BASE_URL."""
    from rageval.embeddings import embedding_factory

    provider, _, model = spec.partition(":")
    if provider == "local" and not model:
        return embedding_factory("local")
    if provider == "openai":
        return embedding_factory("openai", model=model or None, base_url=base_url, cache=cache)
    raise RunConfigError(f"embeddings must be 'local' or 'openai:MODEL', got {spec!r}")


def resolve_metrics(metrics: Sequence[Metric | str] | None, loaded: LoadedData) -> list[Metric]:
    """Metric objects for `metrics` (instances or registry names); by default every registered
    metric whose required fields appear in the data (except opt-in ones such as rubric_score,
    whose built-in rubric is only a placeholder for the user's own)."""
    if metrics is None:
        present = {
            f
            for s in loaded.samples
            if s is not None
            for f in SAMPLE_FIELDS
            if getattr(s, f) is not None
        }
        chosen: list[Metric] = [
            cls()
            for cls in registered_metrics().values()
            if cls.in_default_run and set(cls.required_fields) <= present
        ]
    else:
        if isinstance(metrics, (str, Metric)):
            metrics = [metrics]
        chosen = []
        for m in metrics:
            if isinstance(m, Metric):
                chosen.append(m)
            elif isinstance(m, str):
                try:
                    chosen.append(create_metric(m))
                except KeyError as e:
                    raise RunConfigError(str(e.args[0])) from None
            else:
                raise RunConfigError(
                    f"metrics must be Metric instances or registry names, got {type(m).__name__}"
                )
    if not chosen:
        raise RunConfigError("no metric to run: name some, or give data with the fields they need")
    names = [m.name for m in chosen]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RunConfigError(f"metric(s) given more than once: {', '.join(dupes)}")
    return chosen


#: (label column, metric) pairs: {column: metric}, {column: [metrics]} or [(column, metric)]
LabelsArg = Mapping[str, str | Metric | Sequence[str | Metric]] | Sequence[tuple[str, str | Metric]]


def label_pairs(labels: LabelsArg) -> list[tuple[str, str | Metric]]:
    """The (label column, metric) pairs of a labels argument, in order, each once."""
    pairs: list[tuple[str, str | Metric]] = []
    if isinstance(labels, Mapping):
        for column, target in labels.items():
            if isinstance(target, (str, Metric)):
                pairs.append((column, target))
            else:
                pairs.extend((column, m) for m in target)
    else:
        pairs = [(column, metric) for column, metric in labels]
    if not pairs:
        raise RunConfigError("the labels name no (label column, metric) pair")
    seen: set[tuple[str, str]] = set()
    for column, metric in pairs:
        key = (column, metric if isinstance(metric, str) else metric.name)
        if key in seen:
            raise RunConfigError(f"label column {column!r} is paired with {key[1]!r} twice")
        seen.add(key)
    return pairs


def _human_labels(
    human_labels: LabelsArg | None,
    loaded: LoadedData,
    ids: Sequence[str],
    metrics: Sequence[Metric],
) -> list[tuple[str, str]]:
    """The (column, metric name) pairs of `human_labels=`, every label checked before spend."""
    if human_labels is None:
        return []
    from rageval.labels import read_label_column

    names = [m.name for m in metrics]
    pairs = [(c, m if isinstance(m, str) else m.name) for c, m in label_pairs(human_labels)]
    for _, metric in pairs:
        if metric not in names:
            raise RunConfigError(
                f"human_labels names {metric!r}, which is not a metric of this run "
                f"({', '.join(names)})"
            )
    problems: list[RowProblem] = []
    for column in dict.fromkeys(c for c, _ in pairs):
        try:
            read_label_column(loaded.samples, ids, column, source=loaded.source)
        except InvalidDataError as e:
            problems.extend(e.problems)
    if problems:
        raise InvalidDataError(problems, source=loaded.source)
    return pairs


def _validate(
    loaded: LoadedData, ids: Sequence[str], metrics: Sequence[Metric]
) -> tuple[list[RowProblem], dict[int, str]]:
    """Every problem that stops a (row, metric) cell, and the reason per unusable row."""
    problems = list(loaded.problems)
    bad_rows: dict[int, list[str]] = {}
    for p in loaded.problems:
        if p.row is not None:
            bad_rows.setdefault(p.row, []).append(_describe(p))
    for row, sample in enumerate(loaded.samples):
        if sample is None or row in bad_rows:
            continue
        for m in metrics:
            for field, message in m.input_problems(sample):
                problems.append(RowProblem(row, field, message, ids[row], m.name))
    return problems, {row: "; ".join(msgs) for row, msgs in bad_rows.items()}


def _describe(p: RowProblem) -> str:
    return f"field {p.field!r}: {p.message}" if p.field else p.message


def _manifest(
    loaded: LoadedData,
    metrics: Sequence[Metric],
    judge: Judge | None,
    judge_of: Mapping[str, Judge | None],
    embeddings: Embeddings | None,
    on_invalid: str,
    human_labels: Sequence[tuple[str, str]],
    repeats: int,
) -> Manifest:
    specs = []
    for m in metrics:
        own = judge_of.get(m.name)
        specs.append(
            MetricSpec(
                name=m.name,
                params=json_normal(m.params()),
                judge=json_normal(own.describe()) if own is not None and own is not judge else None,
                uncaptured=m.uncaptured,
            )
        )
    return Manifest(
        rageval_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metrics=specs,
        judge=JudgeInfo(**json_normal(judge.describe())) if judge is not None else None,
        embeddings=EmbeddingsInfo(name=embeddings.name) if embeddings is not None else None,
        data=DataInfo(
            source=loaded.source,
            fingerprint=data_fingerprint(loaded),
            n_rows=len(loaded.samples),
        ),
        on_invalid=on_invalid,
        human_labels=[HumanLabels(column=c, metric=m) for c, m in human_labels],
        repeats=repeats,
    )


class _EmbeddingMeter:
    """What remote embeddings were paid for since the previous finished sample: their batches
    mix samples and metrics, so each line of the log carries what was booked since the line
    before, and the lines add up to the run's embedding usage."""

    def __init__(self, embedders: Sequence[Embeddings | None]) -> None:
        ledgers = (getattr(e, "usage", None) for e in embedders)
        self._ledgers = list({id(u): u for u in ledgers if isinstance(u, UsageLedger)}.values())
        self._last = self._total()

    def _total(self) -> Usage:
        return sum((ledger.total for ledger in self._ledgers), Usage())

    def take(self) -> Usage | None:
        if not self._ledgers:
            return None
        now = self._total()
        spent, self._last = _since(now, self._last), now
        return None if spent == _NOTHING else spent


_NOTHING = Usage()


def _window(judges: Sequence[Judge]) -> int:
    """Samples in flight: enough to keep twice the endpoints' concurrency busy."""
    endpoints = {j.base_url for j in judges}
    concurrency = sum(endpoint_limiter(url).max_concurrency for url in endpoints)
    return max(MIN_WINDOW, 2 * concurrency)


class _Progress:
    """The progress line fed from the judges' ledgers and the finished samples."""

    def __init__(self, line: _progress.ProgressLine | None, judges: Sequence[Judge]) -> None:
        self.line = line
        self.judges = list({id(j): j for j in judges}.values())
        self._base = self._usage()

    def _usage(self) -> Usage:
        return sum((j.usage.total for j in self.judges), Usage())

    def row_done(self, record: SampleLine) -> None:
        if self.line is None:
            return
        self.line.done += 1
        self.line.counters.not_measured += sum(
            c.status == "not_measured" for c in record.cells.values()
        )
        self.refresh()

    def refresh(self, *, force: bool = False) -> None:
        if self.line is None:
            return
        u = _since(self._usage(), self._base)
        c = self.line.counters
        c.requests, c.tokens, c.cache_hits, c.cost_usd = (
            u.requests,
            u.total_tokens,
            u.cache_hits,
            u.cost_usd,
        )
        self.line.update(force=force)

    async def tick(self) -> None:
        """Redraw twice a second while requests are in flight and no sample finishes."""
        while True:
            await asyncio.sleep(0.5)
            self.refresh(force=True)


@dataclasses.dataclass
class Prepared:
    """An evaluation ready to score: its data (validated), metrics, judges and embeddings."""

    loaded: LoadedData
    ids: list[str]
    metrics: list[Metric]
    #: rows no metric can read, with why (skipped when on_invalid="skip")
    invalid_rows: dict[int, str]
    judge: Judge | None
    judge_of: dict[str, Judge | None]
    shared_judge: Judge | None
    embedder: Embeddings | None


def prepare(
    data: Any,
    metrics: Sequence[Metric | str] | None,
    llm: Judge | str | None,
    embeddings: Embeddings | str | None,
    *,
    column_map: Mapping[str, str] | None,
    on_invalid: OnInvalid,
) -> Prepared:
    """Load and validate the data, make the metrics, the judges and the embeddings: every
    check done before the first request, the same for :func:`aevaluate` and the dry run
    (:func:`rageval.estimate`). Nothing is sent."""
    loaded = load_samples(data, column_map=column_map)
    whole_input = [p for p in loaded.problems if p.row is None]
    if whole_input:
        raise InvalidDataError(whole_input, source=loaded.source)
    ids = sample_ids(loaded.samples)
    metric_objs = resolve_metrics(metrics, loaded)
    problems, invalid_rows = _validate(loaded, ids, metric_objs)
    if problems and on_invalid == "raise":
        raise InvalidDataError(problems, source=loaded.source)
    judge: Judge | None = judge_from_env(llm) if isinstance(llm, str) or llm is None else llm
    judge_of = {m.name: (m.llm or judge) if m.needs_llm else m.llm for m in metric_objs}
    shared_judge = judge or next((m.llm for m in metric_objs if m.statement_needs and m.llm), None)
    needs_embeddings = any(
        m.needs_embeddings and m.embeddings is None and (judge_of[m.name] or not m.needs_llm)
        for m in metric_objs
    )
    embedder: Embeddings | None
    if isinstance(embeddings, str):
        embedder = embeddings_from_spec(embeddings)
    elif embeddings is None and needs_embeddings:
        embedder = embeddings_from_spec("local")
    else:
        embedder = embeddings
    return Prepared(
        loaded, list(ids), metric_objs, invalid_rows, judge, judge_of, shared_judge, embedder
    )


async def aevaluate(
    data: Any,
    metrics: Sequence[Metric | str] | None = None,
    llm: Judge | str | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    column_map: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    run_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: bool | None = None,
    show_progress: bool | None = None,
    human_labels: LabelsArg | None = None,
    repeats: int = 1,
    max_cost: float | None = None,
) -> EvaluationResult:
    """Score every sample of `data` with every metric; see the module docstring.

    `data`: anything :func:`rageval.load_samples` reads. `metrics`: Metric instances or registry
    names (default: every metric whose required fields the data has). `llm`: a Judge or a
    model name (default: RAGEVAL_LLM from the environment, else no judge: metrics that need
    one are skipped with a hint). `embeddings`: an Embeddings, `"local"` or `"openai:MODEL"`
    (default: the local model, if a metric needs one). `on_invalid="skip"` turns rows a metric
    cannot score into skipped cells instead of an :class:`InvalidDataError`. `run_dir` writes
    the run log there; `resume=True` continues the run in `run_dir`. `progress` (alias
    `show_progress`): None shows a progress line only when stderr is a terminal.

    `human_labels` pairs label columns of the data (people's scores, on the metric's scale;
    empty where a row is not labelled) with metrics: ``{"human_faithful": "faithfulness"}``;
    the summary then gives each label's PPI++ mean, the judge's scores on every row rectified
    by the labelled rows (docs/calibration.md). `repeats=K` scores every judge cell K times,
    bypassing the request cache for the repeats; a cell's value is the mean of its scores and
    the summary reports how much of the interval the judge's own noise makes.

    `max_cost` (USD) caps what the judges may spend in this call: a request is sent only if
    its worst case fits beside what was spent and what is in flight; when the next request
    cannot fit, the run stops with :class:`~rageval.errors.BudgetReached` (its ``result`` holds
    what finished, kept in `run_dir` for a resume). A judge model of unknown price is refused
    up front. See :mod:`rageval._client._budget`.
    """
    if on_invalid not in ("raise", "skip"):
        raise RunConfigError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    if resume and run_dir is None:
        raise RunConfigError("resume=True needs the run_dir of the run to continue")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise RunConfigError(f"repeats must be a whole number >= 1, got {repeats!r}")
    if max_cost is not None and not (
        isinstance(max_cost, (int, float)) and not isinstance(max_cost, bool) and max_cost > 0
    ):
        raise RunConfigError(f"max_cost must be a positive number of USD, got {max_cost!r}")
    started = time.monotonic()
    run = prepare(data, metrics, llm, embeddings, column_map=column_map, on_invalid=on_invalid)
    loaded, ids, metric_objs, invalid_rows = run.loaded, run.ids, run.metrics, run.invalid_rows
    judge, judge_of, shared_judge, embedder = (
        run.judge,
        run.judge_of,
        run.shared_judge,
        run.embedder,
    )
    human_pairs = _human_labels(human_labels, loaded, ids, metric_objs)
    own_judge = isinstance(llm, str) or llm is None
    judges = [j for j in (*judge_of.values(), shared_judge) if j is not None]
    if max_cost is not None and unpriced(judges, batch=False):
        models = ", ".join(unpriced(judges, batch=False))
        raise RunConfigError(
            f"max_cost needs the price of the judge model {models}, which rageval does not "
            "know: give it with --price MODEL=INPUT,OUTPUT (USD per million tokens) or "
            "Judge(..., prices=PriceTable({'MODEL': (INPUT, OUTPUT)}))"
        )
    for j in judges:
        meter_judge(j)
    embedding_meter = _EmbeddingMeter([embedder, *(m.embeddings for m in metric_objs)])

    manifest = _manifest(
        loaded, metric_objs, judge, judge_of, embedder, on_invalid, human_pairs, repeats
    )
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
    )
    rundir = RunDir(run_dir) if run_dir is not None else None
    if rundir is not None:
        if resume:
            for offset, record in rundir.resume(manifest, ids):
                result.add(record, offset=offset)
        else:
            rundir.create(manifest)
    todo = [row for row in range(len(ids)) if not result.is_finished(row)]

    show = _progress.wanted(progress if progress is not None else show_progress)
    line = _progress.ProgressLine(len(ids), done=len(ids) - len(todo)) if show else None
    if line is not None:
        line.counters.budget_usd = max_cost
    meter = _Progress(line, judges)

    def on_record(line: SampleLine) -> None:
        line.embeddings_usage = embedding_meter.take()
        offset = rundir.append(line) if rundir is not None else None
        result.add(line, offset=offset)
        meter.row_done(line)

    plan = Plan(
        metric_objs,
        judge_of,
        shared_judge,
        embedder,
        invalid_rows,
        cells=CellStore(judge_of, shared_judge, embedder),
        repeats=repeats,
    )
    scheduler = Scheduler(plan, loaded.samples, ids, window=_window(judges), on_record=on_record)
    ticker = asyncio.ensure_future(meter.tick()) if line is not None else None
    try:
        with limit_spending(judges, max_cost):
            await scheduler.run(todo)
    except Exception as stopped:
        if isinstance(stopped, BudgetReached):
            stopped.result = result
        # the run stops (a fatal judge error): the directory still says how far it got, unless
        # that fails too, which must not hide why the run stopped
        if rundir is not None:
            result.duration_s = time.monotonic() - started
            try:
                _finish(rundir, result)
            except Exception as e:
                logging.getLogger("rageval").warning(
                    "could not write the summary of the stopped run in %s (%s: %s)",
                    rundir.path,
                    type(e).__name__,
                    e,
                )
        raise
    finally:
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
        if own_judge and judge is not None:
            await judge.aclose()
        # the request caches write behind: what this run learned is on disk when it returns
        caches = {
            id(c): c for c in _caches(judges, [embedder, *(m.embeddings for m in metric_objs)])
        }
        if caches:
            await asyncio.to_thread(_flush, list(caches.values()))
    result.duration_s = time.monotonic() - started
    if rundir is not None:
        _finish(rundir, result)
    return result


def _finish(rundir: RunDir, result: EvaluationResult) -> None:
    """summary.json and report.html of what finished."""
    rundir.write_summary(result.summary_model())
    _write_report(rundir)


def _flush(caches: Sequence[RequestCache]) -> None:
    for cache in caches:
        cache.flush()


def _caches(judges: Sequence[Judge], embedders: Sequence[Embeddings | None]) -> list[RequestCache]:
    found = [j.cache for j in judges] + [getattr(e, "cache", None) for e in embedders]
    return [c for c in found if isinstance(c, RequestCache)]


def _since(now: Usage, base: Usage) -> Usage:
    cost = None if now.cost_usd is None or base.cost_usd is None else now.cost_usd - base.cost_usd
    return Usage(
        prompt_tokens=now.prompt_tokens - base.prompt_tokens,
        completion_tokens=now.completion_tokens - base.completion_tokens,
        requests=now.requests - base.requests,
        retries=now.retries - base.retries,
        reasks=now.reasks - base.reasks,
        cache_hits=now.cache_hits - base.cache_hits,
        cost_usd=cost,
        cached_tokens=now.cached_tokens - base.cached_tokens,
    )


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


def evaluate(
    data: Any,
    metrics: Sequence[Metric | str] | None = None,
    llm: Judge | str | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    column_map: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    run_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: bool | None = None,
    show_progress: bool | None = None,
    human_labels: LabelsArg | None = None,
    repeats: int = 1,
    max_cost: float | None = None,
) -> EvaluationResult:
    """Synchronous :func:`aevaluate`. Inside a running event loop (Jupyter, FastAPI,
    pytest-asyncio) the evaluation runs on a private loop in a worker thread."""
    return run_sync(
        aevaluate(
            data,
            metrics,
            llm,
            embeddings,
            column_map=column_map,
            on_invalid=on_invalid,
            run_dir=run_dir,
            resume=resume,
            progress=progress,
            show_progress=show_progress,
            human_labels=human_labels,
            repeats=repeats,
            max_cost=max_cost,
        )
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
