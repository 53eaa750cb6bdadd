"""Scoring every (sample x metric) cell with a bounded window of samples in flight.

All cells of the samples in the window run at once, so the judge's per-endpoint limiter, not
this module, decides how many requests are in flight; the window only bounds memory. It holds
enough samples to keep at least twice the endpoint's concurrency busy, so the limiter always
has work queued while samples finish and new ones start.

Per-cell usage: judges book every call (retries, re-asks and failures included) in their
ledger under the tags {"metric", "sample"}. The ledger of each judge used by a run is wrapped
once so that it also books each call to the sample being scored, found through a context
variable set by that sample's task (and inherited by every task it starts).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from rageval.errors import BudgetReached
from rageval.judge import FatalJudgeError, JudgeCallFailed, JudgeError, Usage, UsageLedger
from rageval.log import Cell, Inputs, RepeatedScores, SampleLine
from rageval.metrics._statements import SHARED_TAG, SharedStatements
from rageval.metrics.base import Metric, MetricResult, NoJudgeError, ScoringContext
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.runner._cells import CellStore

#: the cause of a skipped cell whose metric needs a judge when none is configured
NO_JUDGE_CAUSE = (
    "needs an LLM judge and none is configured: set RAGEVAL_LLM=<model> with OPENAI_API_KEY "
    "(OpenAI), or also OPENAI_BASE_URL=http://localhost:11434/v1 (Ollama) or "
    "http://<host>:8000/v1 (vLLM); or pass llm= / --llm"
)
MIN_WINDOW = 32
_NO_JUDGE = Cell(status="skipped", cause=NO_JUDGE_CAUSE, cause_kind="no_judge")


class _SampleMeter:
    """Usage of one sample's calls, by metric tag."""

    __slots__ = ("by_metric",)

    def __init__(self) -> None:
        self.by_metric: dict[str, Usage] = {}

    def add(self, usage: Usage, tags: Mapping[str, str] | None) -> None:
        key = (tags or {}).get("metric", "")
        self.by_metric[key] = self.by_metric.get(key, Usage()) + usage

    def take(self, key: str) -> Usage:
        return self.by_metric.get(key, Usage())


_CURRENT: contextvars.ContextVar[_SampleMeter | None] = contextvars.ContextVar(
    "rageval_sample_meter", default=None
)


class MeteredLedger(UsageLedger):
    """A judge's ledger, unchanged, that also books each call to the sample being scored."""

    def __init__(self, inner: UsageLedger) -> None:
        super().__init__()
        self.inner = inner

    def record(self, usage: Usage, tags: Mapping[str, str] | None = None) -> None:
        self.inner.record(usage, tags)
        meter = _CURRENT.get()
        if meter is not None:
            meter.add(usage, tags)

    @property
    def total(self) -> Usage:
        return self.inner.total

    def by_tag(self, name: str) -> dict[str, Usage]:
        return self.inner.by_tag(name)

    def tag_names(self) -> list[str]:
        return self.inner.tag_names()


def meter_judge(judge: Judge) -> None:
    if not isinstance(judge.usage, MeteredLedger):
        judge.usage = MeteredLedger(judge.usage)


@dataclasses.dataclass
class Plan:
    """What to run: metrics, the judge of each, the shared statement judge, embeddings, and
    the reason each invalid row is skipped."""

    metrics: Sequence[Metric]
    judge_of: Mapping[str, Judge | None]
    shared_judge: Judge | None
    embeddings: Embeddings | None
    invalid_rows: Mapping[int, str]
    #: finished cells kept across runs (None: recompute every cell)
    cells: CellStore | None = None
    #: scorings of each judge cell; the repeats after the first bypass every cache
    repeats: int = 1


class Scheduler:
    def __init__(
        self,
        plan: Plan,
        samples: Sequence[Sample | None],
        ids: Sequence[str],
        *,
        window: int,
        on_record: Callable[[SampleLine], None],
    ) -> None:
        self.plan = plan
        self.samples = samples
        self.ids = ids
        self.window = max(1, window)
        self.on_record = on_record
        # the judges the repeats ask: the run's, without their request cache
        self._uncached_views: dict[int, Judge] = {}

    async def run(self, rows: Iterable[int]) -> None:
        """Score `rows`, handing each finished sample to `on_record` as soon as it is done.
        An exception in a sample (a fatal judge error) cancels every sample in flight."""
        pending: set[asyncio.Task[SampleLine]] = set()
        try:
            for row in rows:
                if len(pending) >= self.window:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    self._deliver(done)
                pending.add(asyncio.ensure_future(self.score_row(row)))
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                self._deliver(done)
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def _deliver(self, done: Iterable[asyncio.Task[SampleLine]]) -> None:
        """Hand over the finished samples, then raise the first failure among `done`."""
        failures = [t.exception() for t in done if t.exception() is not None]
        for task in done:
            if task.exception() is None:
                self.on_record(task.result())
        if failures:
            raise failures[0]  # type: ignore[misc]

    async def score_row(self, row: int) -> SampleLine:
        sample, sid = self.samples[row], self.ids[row]
        metrics = self.plan.metrics
        invalid = self.plan.invalid_rows.get(row)
        if sample is None or invalid is not None:
            cause = f"invalid row: {invalid or 'could not be read'}"
            skipped = Cell(status="skipped", cause=cause, cause_kind="invalid_row")
            return SampleLine(
                row=row, id=sid, inputs=Inputs.of(sample), cells={m.name: skipped for m in metrics}
            )
        if sample.id is None:  # usage tags and evidence name the sample by its run id
            sample = sample.model_copy(update={"id": sid})
        results: dict[str, MetricResult] = {}
        to_run: list[Metric] = []
        for m in metrics:
            problems = m.input_problems(sample)
            if problems:
                cause = "; ".join(f"field {f!r}: {msg}" for f, msg in problems)
                results[m.name] = Cell(status="skipped", cause=cause, cause_kind="missing_field")
            elif m.needs_llm and self.plan.judge_of[m.name] is None:
                results[m.name] = _NO_JUDGE
            else:
                to_run.append(m)
        meter = _SampleMeter()
        _CURRENT.set(meter)  # this task's own context: seen by every task started below
        scored = [m for m in to_run if m.needs_llm]  # a judge's cells, before any was kept
        cells = self.plan.cells
        if cells is not None and to_run:
            kept = cells.lookup(sample, to_run)
            results.update(kept)
            to_run = [m for m in to_run if m.name not in kept]
        ctx = ScoringContext(
            judge=self.plan.shared_judge,
            embeddings=self.plan.embeddings,
            statements=SharedStatements(sample, self.plan.shared_judge),
            tags={"sample": sid},
        )
        fresh = await self._score(to_run, sample, ctx, self.plan.judge_of)
        results.update(fresh)
        if cells is not None and fresh:
            cells.keep(sample, to_run, fresh)
        if self.plan.repeats > 1:
            results.update(await self._repeat(scored, sample, sid, results))
        return SampleLine(
            row=row,
            id=sid,
            inputs=Inputs.of(sample),
            cells={m.name: Cell.of(results[m.name], meter.take(m.name)) for m in metrics},
            shared_usage=meter.take(SHARED_TAG),
        )

    async def _score(
        self,
        metrics: Sequence[Metric],
        sample: Sample,
        ctx: ScoringContext,
        judge_of: Mapping[str, Judge | None],
    ) -> dict[str, MetricResult]:
        """Every cell of `metrics` on `sample` at once, each metric asking its judge."""
        tasks = [asyncio.ensure_future(self._cell(m, sample, ctx, judge_of)) for m in metrics]
        try:
            outcomes = await asyncio.gather(*tasks)
        except BaseException:
            # gather leaves the other cells running when one raises (a fatal judge error)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return dict(zip((m.name for m in metrics), outcomes, strict=True))

    def _uncached(self, judge: Judge | None) -> Judge | None:
        """The view of `judge` that the repeats ask: every request sent again."""
        if judge is None:
            return None
        view = self._uncached_views.get(id(judge))
        if view is None:
            view = self._uncached_views[id(judge)] = judge.uncached()
        return view

    async def _repeat(
        self,
        metrics: Sequence[Metric],
        sample: Sample,
        sid: str,
        first: Mapping[str, MetricResult],
    ) -> dict[str, MetricResult]:
        """Score `metrics` repeats − 1 more times on `sample`, every request sent again (the
        shared statements too); each cell becomes the combination of its scorings."""
        if not metrics:
            return {}
        judge_of = {m.name: self._uncached(self.plan.judge_of[m.name]) for m in metrics}
        shared = self._uncached(self.plan.shared_judge)
        scorings: dict[str, list[MetricResult]] = {m.name: [first[m.name]] for m in metrics}
        for _ in range(self.plan.repeats - 1):
            ctx = ScoringContext(
                judge=shared,
                embeddings=self.plan.embeddings,
                statements=SharedStatements(sample, shared),
                tags={"sample": sid},
            )
            for name, outcome in (await self._score(metrics, sample, ctx, judge_of)).items():
                scorings[name].append(outcome)
        return {name: _combine_repeats(results) for name, results in scorings.items()}

    async def _cell(
        self,
        metric: Metric,
        sample: Sample,
        ctx: ScoringContext,
        judge_of: Mapping[str, Judge | None],
    ) -> MetricResult:
        mctx = dataclasses.replace(
            ctx,
            judge=judge_of[metric.name],
            embeddings=metric.embeddings or ctx.embeddings,
        ).for_metric(metric.name)
        try:
            return await metric.score_sample(sample, mctx)
        except NoJudgeError:
            return _NO_JUDGE
        except (FatalJudgeError, BudgetReached):
            raise
        except JudgeCallFailed as e:  # e.g. from the embeddings endpoint, outside a metric
            cause = f"judge call failed: {e.cause}"
            return Cell(status="not_measured", cause=cause, cause_kind=e.kind)
        except JudgeError as e:
            return Cell(status="not_measured", cause=f"judge error: {e}", cause_kind="transport")
        except Exception as e:
            # A metric that breaks on one sample must not lose the whole run; the cell says so.
            cause = f"{metric.name} raised {type(e).__name__}: {e}"
            return Cell(status="not_measured", cause=cause, cause_kind="metric_error")


def _combine_repeats(scorings: Sequence[MetricResult]) -> Cell:
    """One cell from the scorings of a cell scored several times: the mean of the measured
    values with the first measured scoring's reason and evidence, and every score (``repeats``);
    when none was measured, the first scoring (its cause and kind) with the count."""
    measured = [r.value for r in scorings if r.measured and r.value is not None]
    repeats = RepeatedScores(values=measured, not_measured=len(scorings) - len(measured))
    if not measured:
        return Cell(**{**dict(scorings[0]), "repeats": repeats})
    base = next(r for r in scorings if r.measured)
    mean = sum(measured) / len(measured)
    return Cell(**{**dict(base), "value": mean, "repeats": repeats})
