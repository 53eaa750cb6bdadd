"""Scoring every (sample x metric) cell with a bounded window of samples in flight.

All cells of the samples in the window run at once, so the judge's per-endpoint limiter, not
this module, decides how many requests are in flight; the window only bounds memory. It holds
enough samples to keep at least twice the endpoint's concurrency busy, so the limiter always
has work queued while samples finish and new ones start.

Several endpoints of one judge model (``llm=[Judge(url1), Judge(url2)]``) each get a `Plan`;
a sample goes to the plan picked by a hash of its id (:func:`spread`), so a re-run sends each
sample to the same endpoint (and finds it in that endpoint's cache). A judge panel
(``llm=Panel([...])``, :mod:`rageval.runner._panel`) is one plan whose seats are a plan per
judge: every seat scores the row's judge metrics, one after the other, the first seat its
other metrics too, and each judge metric's cell is the mean of the seats' values.

Per-cell usage: judges book every call (retries, re-asks and failures included) in their
ledger under the tags {"metric", "sample"}. The ledger of each judge used by a run is wrapped
once so that it also books each call to the sample being scored, found through a context
variable set by that sample's task (and inherited by every task it starts).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from rageval._client._run import current_run, run_scope
from rageval.errors import BudgetReached, NoJudgeError
from rageval.judge import FatalJudgeError, JudgeCallFailed, JudgeError, Usage
from rageval.log import Cell, Inputs, PanelVote, RepeatedScores, SampleLine
from rageval.metrics._statements import SHARED_TAG, SharedStatements
from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.runner._cells import CellStore, KeptCells
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.runner._cost import Admission

#: the cause of a skipped cell whose metric needs a judge when none is configured
NO_JUDGE_CAUSE = (
    "needs an LLM judge and none is configured: set RAGEVAL_LLM=<model> with OPENAI_API_KEY "
    "(OpenAI), or also OPENAI_BASE_URL=http://localhost:11434/v1 (Ollama) or "
    "http://<host>:8000/v1 (vLLM); or pass llm= / --llm"
)
MIN_WINDOW = 32
_NO_JUDGE = Cell(status="skipped", cause=NO_JUDGE_CAUSE, cause_kind="no_judge")

_T_co = TypeVar("_T_co", covariant=True)


class ByRow(Protocol[_T_co]):
    """Rows by their number in the data: a list of all rows, or a mapping of some."""

    def __getitem__(self, row: int, /) -> _T_co: ...


class _SampleMeter:
    """Usage of one sample's calls, and how many calls, by metric tag."""

    __slots__ = ("by_metric", "calls")

    def __init__(self) -> None:
        self.by_metric: dict[str, Usage] = {}
        self.calls: dict[str, int] = {}

    def add(self, usage: Usage, tags: Mapping[str, str] | None) -> None:
        """One judge call's usage (a judge books each call once, when it ends)."""
        key = (tags or {}).get("metric", "")
        self.by_metric[key] = self.by_metric.get(key, Usage()) + usage
        self.calls[key] = self.calls.get(key, 0) + 1

    def take(self, key: str) -> Usage:
        return self.by_metric.get(key, Usage())


def usage_since(now: Usage, base: Usage) -> Usage:
    """What was used between two readings of a ledger's total."""
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


@dataclasses.dataclass
class Plan:
    """What to run: metrics, the judge of each, the shared statement judge, embeddings, and
    every cell that is not scored, with why, decided once when the plan is made: the scheduler,
    the dry run and the budget all read :meth:`skipped`."""

    metrics: Sequence[Metric]
    judge_of: Mapping[str, Judge | None]
    shared_judge: Judge | None
    embeddings: Embeddings | None
    #: rows no metric can read, with why (every cell of such a row is skipped)
    invalid_rows: Mapping[int, str]
    #: the skipped cells of each row that has any, by metric: every cell of an invalid row,
    #: else those a bad or missing field of the row stops
    skipped_cells: Mapping[int, Mapping[str, Cell]] = dataclasses.field(default_factory=dict)
    #: finished cells kept across runs (None: recompute every cell)
    cells: CellStore | None = None
    #: scorings of each judge cell; the repeats after the first bypass every cache
    repeats: int = 1
    #: a judge panel's seats, by judge name: a plan per judge (the first is this plan's own
    #: judge), each scoring every judge metric of a row; empty without a panel
    seats: Sequence[tuple[str, Plan]] = ()
    _no_judge: dict[str, Cell] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        # a metric without its judge runs on no row: that is the reason of all its cells
        # (but an invalid row's), whatever else a row lacks
        self._no_judge = {
            m.name: _NO_JUDGE for m in self.metrics if m.needs_llm and self.judge_of[m.name] is None
        }

    def skipped(self, row: int) -> dict[str, Cell]:
        """The cells of `row` that are not scored, by metric, each saying why."""
        if row in self.invalid_rows:
            return dict(self.skipped_cells[row])
        return {**self.skipped_cells.get(row, {}), **self._no_judge}

    def on_panel(self, metric: Metric) -> bool:
        """Whether every seat of the panel scores `metric`: a judge metric asking the run's
        judge (one without a judge, or with its own, is scored once)."""
        return bool(self.seats) and metric.needs_llm and metric.llm is None


def make_plans(
    metrics: Sequence[Metric],
    judges: Sequence[Judge],
    embeddings: Embeddings | None,
    invalid_rows: Mapping[int, str],
    skipped_cells: Mapping[int, Mapping[str, Cell]] | None = None,
    *,
    repeats: int = 1,
    panel: Sequence[str] = (),
) -> list[Plan]:
    """One plan per judge endpoint in `judges` (one plan without a judge when it is empty);
    with `panel`, the names of `judges` as a panel's, one plan whose seats are those plans.

    A metric asks its own judge (``metric.llm``) if it has one, else the run's; the statements
    several metrics share are extracted by the run's judge, or else by the first own judge of a
    metric that reads them. Finished cells are kept in the judges' request caches.
    """
    plans = []
    choices: Sequence[Judge | None] = judges or [None]
    for judge in choices:
        judge_of = {m.name: (m.llm or judge) if m.needs_llm else m.llm for m in metrics}
        shared = judge or next((m.llm for m in metrics if m.statement_needs and m.llm), None)
        cells = CellStore(judge_of, shared, embeddings)
        plans.append(
            Plan(
                metrics,
                judge_of,
                shared,
                embeddings,
                invalid_rows,
                skipped_cells or {},
                cells=cells,
                repeats=repeats,
            )
        )
    if panel:
        return [dataclasses.replace(plans[0], seats=tuple(zip(panel, plans, strict=True)))]
    return plans


def spread(sample_id: str, n: int) -> int:
    """Which of `n` endpoints scores the sample `sample_id` (stable across runs and hosts)."""
    if n == 1:
        return 0
    return int.from_bytes(hashlib.sha256(sample_id.encode()).digest()[:8], "big") % n


class Scheduler:
    def __init__(
        self,
        plans: Plan | Sequence[Plan],
        samples: ByRow[Sample | None],
        ids: ByRow[str],
        *,
        window: int,
        on_record: Callable[[SampleLine], None],
        admission: Admission | None = None,
        on_cell: Callable[[int], None] | None = None,
    ) -> None:
        self.plans = [plans] if isinstance(plans, Plan) else list(plans)
        #: with a budget: which rows may start (see rageval.runner._cost)
        self.admission = admission
        if not self.plans:
            raise ValueError("a scheduler needs at least one plan")
        self.samples = samples
        self.ids = ids
        self.window = max(1, window)
        self.on_record = on_record
        #: told the row of each cell scored as it finishes (the progress line's rate)
        self.on_cell = on_cell
        # the judges the repeats ask: the run's, without their request cache
        self._uncached_views: dict[int, Judge] = {}
        # the usage of each row begun and not finished (see unfinished_usage)
        self._meters: dict[int, _SampleMeter] = {}

    async def run(self, rows: Iterable[int]) -> None:
        """Score `rows`, handing each finished sample to `on_record` as soon as it is done.
        An exception in a sample (a fatal judge error) cancels every sample in flight."""
        pending: set[asyncio.Task[SampleLine]] = set()
        todo = list(rows)
        stop = current_run().stop
        rows_left = False
        try:
            for i, row in enumerate(todo):
                while len(pending) >= self.window or not self._admits(row):
                    if not pending:  # nothing in flight, and the budget has no room
                        assert self.admission is not None
                        raise self.admission.reached(len(todo) - i)
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    self._deliver(done)
                if stop is not None and stop.requested:
                    rows_left = True  # stopping: the rows started finish or wait, no other starts
                    break
                pending.add(asyncio.ensure_future(self.score_row(row)))
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                self._deliver(done)
            if rows_left:
                # the run ends as interrupted, when the stop cancels it (not as a finished run)
                await asyncio.get_running_loop().create_future()
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def _admits(self, row: int) -> bool:
        return self.admission is None or self.admission.admits(row)

    def _deliver(self, done: Iterable[asyncio.Task[SampleLine]]) -> None:
        """Hand over the finished samples, then raise the first failure among `done`."""
        failures = [t.exception() for t in done if t.exception() is not None]
        for task in done:
            if task.exception() is None:
                line = task.result()
                if self.admission is not None:
                    self.admission.finished(line)
                self.on_record(line)
        if failures:
            raise failures[0]  # type: ignore[misc]

    def unfinished_usage(self) -> Usage:
        """What the rows begun and not finished have used (their calls that ended): a run that
        stops before they finish paid for it, and no line of its log holds it."""
        return sum((u for m in self._meters.values() for u in m.by_metric.values()), Usage())

    async def score_row(self, row: int) -> SampleLine:
        sample, sid = self.samples[row], self.ids[row]
        plan = self.plans[spread(sid, len(self.plans))]
        metrics = plan.metrics
        skipped = plan.skipped(row)
        if sample is None or row in plan.invalid_rows:
            return SampleLine(row=row, id=sid, inputs=Inputs.of(sample), cells=skipped)
        if sample.id is None:  # usage tags and evidence name the sample by its run id
            sample = sample.model_copy(update={"id": sid})
        results: dict[str, MetricResult] = dict(skipped)
        to_run = [m for m in metrics if m.name not in skipped]
        meter = self._meters[row] = _SampleMeter()
        # every call made for this sample, in this task and the tasks it starts, books to it
        # the row orders this sample's requests where they wait for a slot: rows finish in order
        with run_scope(meter=meter, row=row):
            results.update(await self._score_plan(plan, to_run, sample, sid, meter, row=row))
            judged = [m for m in to_run if plan.on_panel(m)]
            if judged:
                # the other judges of the panel, one after the other: the meter's calls of each
                # are then its own (what its kept cells stand for)
                votes = {plan.seats[0][0]: dict(results)}
                for name, seat in plan.seats[1:]:
                    votes[name] = await self._score_plan(seat, judged, sample, sid, meter)
                for m in judged:
                    results[m.name] = _combine_panel({n: v[m.name] for n, v in votes.items()})
            line = SampleLine(
                row=row,
                id=sid,
                inputs=Inputs.of(sample),
                cells={m.name: Cell.of(results[m.name], meter.take(m.name)) for m in metrics},
                shared_usage=meter.take(SHARED_TAG),
            )
        del self._meters[row]  # finished: its usage is its line's
        return line

    async def _score_plan(
        self,
        plan: Plan,
        metrics: Sequence[Metric],
        sample: Sample,
        sid: str,
        meter: _SampleMeter,
        *,
        row: int | None = None,
    ) -> dict[str, MetricResult]:
        """The cells of `metrics` on `sample` by `plan`'s judges: those kept across runs, the
        others scored (and kept), each judge cell again for every repeat."""
        scored = [m for m in metrics if m.needs_llm]  # a judge's cells, before any was kept
        cells = plan.cells
        kept = cells.lookup(sample, metrics) if cells is not None and metrics else KeptCells()
        results: dict[str, MetricResult] = dict(kept.results)
        to_run = [m for m in metrics if m.name not in kept.results]
        statements = SharedStatements(sample, plan.shared_judge)
        ctx = ScoringContext(
            judge=plan.shared_judge,
            embeddings=plan.embeddings,
            statements=statements,
            tags={"sample": sid},
        )
        calls_before = dict(meter.calls)
        fresh = await self._score(to_run, sample, ctx, plan.judge_of, row=row)
        results.update(fresh)
        if cells is not None:
            cells.book(sample, kept, statements.asked)
            if fresh:
                calls = {k: n - calls_before.get(k, 0) for k, n in meter.calls.items()}
                cells.keep(sample, to_run, fresh, calls, statements.asked)
        if plan.repeats > 1:
            results.update(await self._repeat(plan, scored, sample, sid, results))
        return results

    async def _score(
        self,
        metrics: Sequence[Metric],
        sample: Sample,
        ctx: ScoringContext,
        judge_of: Mapping[str, Judge | None],
        *,
        row: int | None = None,
    ) -> dict[str, MetricResult]:
        """Every cell of `metrics` on `sample` at once, each metric asking its judge; with
        `row`, `on_cell` hears of each cell as it finishes."""
        tasks = [asyncio.ensure_future(self._cell(m, sample, ctx, judge_of)) for m in metrics]
        if row is not None and self.on_cell is not None:
            tell = self.on_cell
            for task in tasks:
                task.add_done_callback(lambda _: tell(row))
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
        plan: Plan,
        metrics: Sequence[Metric],
        sample: Sample,
        sid: str,
        first: Mapping[str, MetricResult],
    ) -> dict[str, MetricResult]:
        """Score `metrics` repeats − 1 more times on `sample`, every request sent again (the
        shared statements too); each cell becomes the combination of its scorings."""
        if not metrics:
            return {}
        judge_of = {m.name: self._uncached(plan.judge_of[m.name]) for m in metrics}
        shared = self._uncached(plan.shared_judge)
        scorings: dict[str, list[MetricResult]] = {m.name: [first[m.name]] for m in metrics}
        for _ in range(plan.repeats - 1):
            ctx = ScoringContext(
                judge=shared,
                embeddings=plan.embeddings,
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


def _measured(results: Sequence[MetricResult]) -> list[float]:
    return [r.value for r in results if r.measured and r.value is not None]


def _combined(results: Sequence[MetricResult], **record: object) -> Cell:
    """One cell of several results of it: the mean of the measured values with the first
    measured result's reason and evidence; when none was measured, the first result (its cause
    and kind); either way with `record` (what the cell keeps of each result)."""
    measured = _measured(results)
    if not measured:
        return Cell(**{**dict(results[0]), **record})
    base = next(r for r in results if r.measured)
    return Cell(**{**dict(base), "value": sum(measured) / len(measured), **record})


def _combine_repeats(scorings: Sequence[MetricResult]) -> Cell:
    """One cell from the scorings of a cell scored several times, keeping every score
    (``repeats``)."""
    measured = _measured(scorings)
    repeats = RepeatedScores(values=measured, not_measured=len(scorings) - len(measured))
    return _combined(scorings, repeats=repeats)


def _combine_panel(votes: Mapping[str, MetricResult]) -> Cell:
    """One cell from each judge's result of it, keeping each judge's (``panel``; a judge's
    repeats are kept there, not on the cell)."""
    panel = {name: PanelVote.of(result) for name, result in votes.items()}
    return _combined(list(votes.values()), repeats=None, panel=panel)
