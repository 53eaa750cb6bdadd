"""The dry run: what an evaluation will cost, before a single request is sent.

:func:`estimate` loads and validates the data exactly as :func:`rageval.evaluate` does (a bad
row is reported the same way), then asks every metric for the judge requests it would make on
every sample (``Metric.planned_requests``: built with the metric's own prompt builders, next
to its scoring code). A request whose text depends on an earlier reply -- the verdicts on the
statements the judge extracts -- is built from a prediction of that reply (the statements of a
text are predicted as its sentences) and marked as predicted. Cells already kept from an
earlier run of the same evaluation (:mod:`rageval.runner._cells`) cost nothing, as in a run.

Tokens: a prompt -- the message texts and the structured-output schema sent beside them (a
provider bills both), in the judge's structured-output mode -- is counted with the judge
model's tokenizer where it is known offline (:mod:`rageval.runner._tokens`: tiktoken with the
encoding's file already in its cache), else by the documented approximation of one token per
:data:`CHARS_PER_TOKEN` characters (English text runs at 3.5 to 4.5 characters per token with
OpenAI's tokenizers); the estimate says which (``tokenizer``). Expected replies are sized by
the metrics, in approximated tokens.

Each figure comes with a range, ``low`` to ``high``: the tokenizer approximation (±15%), a
predicted request's text (-25% to +35%), replies from half to twice the expected length, an
endpoint that ignores ``n`` (one request per generation), and 10% more requests and prompt
tokens at the top for re-asks and retries. Costs use the judge's price table (its batch rates
in batch mode); prompt-cache discounts are not assumed, so a provider that caches prompt
prefixes bills less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_serializer

from rageval.metrics._statements import SHARED_TAG
from rageval.metrics.authoring import PlannedRequest
from rageval.metrics.base import Metric, MetricLike
from rageval.runner._panel import Panel
from rageval.runner._prepare import RunOptions, RunSpec, prepare, spec_of
from rageval.runner._tokens import APPROXIMATION, CHARS_PER_TOKEN, Counters
from rageval.samples import Sample

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.runner._schedule import Plan

__all__ = [
    "CHARS_PER_TOKEN",
    "CostEstimate",
    "Range",
    "UsageEstimate",
    "estimate",
    "plan_cost",
]

#: relative spread of a token count made with the approximation, of a predicted request's
#: prompt, and of a reply around its expected length
_TOKENIZER = (0.85, 1.15)
_PREDICTED = (0.75, 1.35)
_REPLY = (0.5, 2.0)
#: the share of requests (and of their prompt tokens) re-asks and retries may add
_REASKS = 0.10


class Range(BaseModel):
    """An estimated figure and its plausible range."""

    estimate: float
    low: float
    high: float


#: significant digits of a cost in the JSON output: an estimate whose range spans tens of
#: percent needs no more, and float sums would otherwise print as 3299.9999999999905
COST_DIGITS = 6


class UsageEstimate(BaseModel):
    """Requests, tokens and cost of part of an evaluation, each a :class:`Range`.
    ``cost_usd`` is None when the price of a judge model is unknown; ``declared`` is False
    when a metric does not declare its requests (then nothing of it is counted).

    In Python the figures are exact sums (fractions of a request where re-asks are allowed
    for); as JSON, requests and tokens are whole numbers and costs have
    :data:`COST_DIGITS` significant digits."""

    requests: Range
    prompt_tokens: Range
    completion_tokens: Range
    cost_usd: Range | None
    #: cells (or, for shared work, samples) that send at least one request
    cells: int = 0
    declared: bool = True
    #: cells the run will skip (an invalid row, a missing field, no judge), by cause kind:
    #: the plan's decisions, as the run records them
    skipped: dict[str, int] = Field(default_factory=dict)

    @field_serializer("requests", "prompt_tokens", "completion_tokens", when_used="json")
    def _whole(self, r: Range) -> dict[str, int]:
        return {"estimate": round(r.estimate), "low": round(r.low), "high": round(r.high)}

    @field_serializer("cost_usd", when_used="json")
    def _money(self, r: Range | None) -> dict[str, float] | None:
        if r is None:
            return None
        return {k: float(f"{v:.{COST_DIGITS}g}") for k, v in dict(r).items()}


class CostEstimate(UsageEstimate):
    """What :func:`estimate` finds: the whole evaluation, and each metric (``metrics``) and
    piece of shared work (``shared``, e.g. the statement extraction) on its own."""

    metrics: dict[str, UsageEstimate] = Field(default_factory=dict)
    shared: dict[str, UsageEstimate] = Field(default_factory=dict)
    model: str | None = None
    batch: bool = False
    rows: int = 0
    #: cells kept from an earlier run of the same evaluation: no request
    cells_kept: int = 0
    #: how tokens were counted: a tokenizer (``o200k_base (tiktoken)``) or the approximation
    tokenizer: str = APPROXIMATION.label
    notes: list[str] = Field(default_factory=list)

    def table(self) -> str:
        """The estimate as a plain-text table (what ``rageval evaluate --dry-run`` prints)."""
        rows = [("metric", "requests", "prompt tokens", "completion tokens", "cost USD")]
        parts = {**self.metrics, **self.shared}
        for name, part in parts.items():
            if not part.declared:
                rows.append((name, "?", "?", "?", "?"))
                continue
            rows.append((name, *_cells(part)))
        rows.append(("total", *_cells(self)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.insert(1, "-" * len(lines[0]))
        lines.insert(len(lines) - 1, "-" * len(lines[0]))
        head = (
            f"dry run: {self.rows} rows, judge {self.model or '(none)'}"
            + (" (batch prices)" if self.batch else "")
            + f"; nothing was sent. Estimate [low - high]; tokens by {self.tokenizer}."
        )
        if self.cells_kept:
            head += f" {self.cells_kept} cells are kept from an earlier run and cost nothing."
        return "\n".join([head, *lines, *(f"note: {n}" for n in self.notes)])


def _cells(part: UsageEstimate) -> tuple[str, str, str, str]:
    def fmt(r: Range, digits: int = 0) -> str:
        if digits:
            return f"{r.estimate:.{digits}f} [{r.low:.{digits}f} - {r.high:.{digits}f}]"
        return f"{r.estimate:,.0f} [{r.low:,.0f} - {r.high:,.0f}]"

    cost = "unknown" if part.cost_usd is None else fmt(part.cost_usd, 4)
    return fmt(part.requests), fmt(part.prompt_tokens), fmt(part.completion_tokens), cost


@dataclass
class _Tally:
    """Sums of (estimate, low, high) for each figure, and the cost, None once unknown."""

    requests: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    prompt: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    completion: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    cost: list[float] | None = field(default_factory=lambda: [0.0, 0.0, 0.0])
    cells: int = 0
    declared: bool = True
    skipped: dict[str, int] = field(default_factory=dict)
    #: the most one of the requests may cost, as the budget reserves it (its prompt and its
    #: whole reply budget; 0 when unknown)
    largest_request_usd: float = 0.0

    def add(self, other: _Tally) -> None:
        for mine, theirs in (
            (self.requests, other.requests),
            (self.prompt, other.prompt),
            (self.completion, other.completion),
        ):
            for i in range(3):
                mine[i] += theirs[i]
        if self.cost is not None and other.cost is not None:
            for i in range(3):
                self.cost[i] += other.cost[i]
        else:
            self.cost = None
        self.cells += other.cells
        for kind, n in other.skipped.items():
            self.skipped[kind] = self.skipped.get(kind, 0) + n
        self.largest_request_usd = max(self.largest_request_usd, other.largest_request_usd)

    def scale(self, factor: int) -> None:
        """`factor` times as much (the same cells, scored `factor` times)."""
        for values in (self.requests, self.prompt, self.completion, self.cost):
            if values is not None:
                values[:] = [v * factor for v in values]

    def model(self) -> UsageEstimate:
        def r(v: list[float]) -> Range:
            return Range(estimate=v[0], low=v[1], high=v[2])

        return UsageEstimate(
            requests=r(self.requests),
            prompt_tokens=r(self.prompt),
            completion_tokens=r(self.completion),
            cost_usd=None if self.cost is None else r(self.cost),
            cells=self.cells,
            declared=self.declared,
            skipped=dict(self.skipped),
        )


def plan_cost(
    judge: Judge,
    planned: Sequence[PlannedRequest],
    *,
    batch: bool = False,
    counters: Counters | None = None,
) -> _Tally:
    """The requests, tokens and cost of `planned` requests to `judge` (estimate, low, high),
    the prompts counted by the judge model's counter in `counters` (else approximated)."""
    counter = APPROXIMATION if counters is None else counters.of(judge.model)
    tally = _Tally()
    honoured = judge.honours_n()
    for request in planned:
        messages, schema, budget = judge.request_text(
            request.messages, request.response_model, max_tokens=request.max_tokens
        )
        prompt = counter.prompt_tokens(messages, schema)
        worst = judge.prices.cost(
            judge.model, prompt + 4 * len(request.messages), budget * request.n, batch=batch
        )
        tally.largest_request_usd = max(tally.largest_request_usd, worst or 0.0)
        spread = _PREDICTED if request.predicted else _TOKENIZER
        n = request.n
        # requests (each billing the prompt) if the endpoint honours n, and if it does not
        one, each = 1, n
        est = each if honoured is False else one
        high = one if honoured is True else each
        for i, (sent, factor, reply) in enumerate(
            ((est, 1.0, 1.0), (one, spread[0], _REPLY[0]), (high, spread[1], _REPLY[1]))
        ):
            extra = 1 + _REASKS if i == 2 else 1.0
            tally.requests[i] += sent * extra
            tally.prompt[i] += sent * prompt * factor * extra
            tally.completion[i] += n * request.reply_tokens * reply
    tally.cost = _cost(judge, tally, batch)
    return tally


def _cost(judge: Judge, tally: _Tally, batch: bool) -> list[float] | None:
    out = []
    for i in range(3):
        cost = judge.prices.cost(
            judge.model, round(tally.prompt[i]), round(tally.completion[i]), batch=batch
        )
        if cost is None:
            return None
        out.append(cost)
    return out


@dataclass
class SamplePlan:
    """The planned requests of one sample: per metric, and the shared ones once each."""

    by_metric: dict[str, list[PlannedRequest]] = field(default_factory=dict)
    shared: dict[str, PlannedRequest] = field(default_factory=dict)
    undeclared: set[str] = field(default_factory=set)


def plan_sample(sample: Sample, metrics: Sequence[Metric]) -> SamplePlan:
    """What `metrics` (the cells of `sample` that will run) ask the judge for."""
    plan = SamplePlan()
    for metric in metrics:
        found = metric.plan(sample)
        if found is None:
            plan.undeclared.add(metric.name)
            continue
        own = []
        for request in found:
            if request.shared is None:
                own.append(request)
            else:
                plan.shared.setdefault(request.shared, request)
        plan.by_metric[metric.name] = own
    return plan


@dataclass
class SampleCost:
    """The planned usage of one sample: per metric, per piece of shared work, and the metrics
    that do not declare their requests."""

    by_metric: dict[str, _Tally] = field(default_factory=dict)
    shared: dict[str, _Tally] = field(default_factory=dict)
    undeclared: set[str] = field(default_factory=set)

    @property
    def cost_usd(self) -> float:
        """The estimated cost (0 for parts of unknown price)."""
        parts = (*self.by_metric.values(), *self.shared.values())
        return sum(p.cost[0] for p in parts if p.cost is not None)

    @property
    def largest_request_usd(self) -> float:
        """The most one of its requests may cost, as the budget reserves it."""
        parts = (*self.by_metric.values(), *self.shared.values())
        return max((p.largest_request_usd for p in parts), default=0.0)

    def add_requests(self, other: SampleCost) -> None:
        """What another judge of a panel asks for the same cells (they are not counted again)."""
        for mine, theirs in ((self.by_metric, other.by_metric), (self.shared, other.shared)):
            for name, part in theirs.items():
                part.cells = 0
                mine.setdefault(name, _Tally()).add(part)
        self.undeclared |= other.undeclared


def sample_cost(
    sample: Sample,
    metrics: Sequence[Metric],
    judge_of: Mapping[str, Judge | None],
    shared_judge: Judge | None,
    *,
    batch: bool = False,
    repeats: int = 1,
    counters: Counters | None = None,
) -> SampleCost:
    """What `metrics` (the cells of `sample` that will be scored, each `repeats` times)
    cost, as planned (prompts counted as :func:`plan_cost` counts them)."""
    plan = plan_sample(sample, metrics)
    out = SampleCost(undeclared=plan.undeclared)
    for name, requests in plan.by_metric.items():
        judge = judge_of.get(name)
        if requests and judge is not None:
            out.by_metric[name] = plan_cost(judge, requests, batch=batch, counters=counters)
    if shared_judge is not None:
        # several pieces of shared work book under one name (each turn's statements)
        by_name: dict[str, list[PlannedRequest]] = {}
        for key, request in plan.shared.items():
            by_name.setdefault(_shared_name(key), []).append(request)
        for name, requests in by_name.items():
            out.shared[name] = plan_cost(shared_judge, requests, batch=batch, counters=counters)
    for part in (*out.by_metric.values(), *out.shared.values()):
        part.cells = 1
        part.scale(repeats)  # a repeat asks everything again, the statements too
    return out


def row_cost(
    plan: Plan,
    row: int,
    sample: Sample | None,
    sid: str,
    *,
    batch: bool = False,
    kept: bool = True,
    counters: Counters | None = None,
) -> tuple[SampleCost, int]:
    """The planned cost of scoring `row` under `plan`, as the scheduler scores it (by every
    judge of a panel), and how many of its cells are kept from an earlier run (those cost
    nothing; looked up only with `kept`)."""
    if sample is None or row in plan.invalid_rows:
        return SampleCost(), 0
    if sample.id is None:  # the run names the sample by its run id (its cells' keys too)
        sample = sample.model_copy(update={"id": sid})
    skipped = plan.skipped(row)
    to_run = [m for m in plan.metrics if m.name not in skipped]
    cost, n_kept = SampleCost(), 0
    judged = [m for m in to_run if plan.on_panel(m)]
    # the first judge scores every cell; the panel's others its judge metrics
    for i, seat in enumerate([plan, *(seat for _, seat in plan.seats[1:])]):
        metrics = to_run if i == 0 else judged
        found: Mapping[str, object] = {}
        if kept and seat.cells is not None:
            found = seat.cells.lookup(sample, [m for m in metrics if m.needs_llm]).results
        planned = sample_cost(
            sample,
            [m for m in metrics if m.name not in found],
            seat.judge_of,
            seat.shared_judge,
            batch=batch,
            repeats=seat.repeats,
            counters=counters,
        )
        if i == 0:
            cost, n_kept = planned, len(found)
        else:
            cost.add_requests(planned)
    return cost, n_kept


def estimate(
    data: Any,
    metrics: Sequence[MetricLike] | None = None,
    llm: Judge | str | Sequence[Judge] | Panel | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    batch: bool = False,
    **options: Unpack[RunOptions],
) -> CostEstimate:
    """What ``evaluate()`` with the same arguments would send, and cost, without sending
    anything (see the module docstring).

    Args:
        data: the rows, as :func:`rageval.evaluate` takes them, or a whole
            :class:`~rageval.runner.RunSpec`.
        metrics: the metrics, as :func:`rageval.evaluate` takes them.
        llm: the judge (a Judge, a model name, several Judges or a Panel).
        embeddings: the embeddings, as :func:`rageval.evaluate` takes them.
        batch: price the requests at the judge model's batch rates (an unknown batch rate
            makes the cost unknown).
        **options: :func:`rageval.evaluate`'s data options (``column_map``, ``on_invalid``,
            ``metric_params``...); ``repeats=K`` counts every judge cell K times, as
            ``evaluate(repeats=K)`` scores it (default 1).
    """
    from rageval.runner._schedule import spread

    spec = spec_of(RunSpec(data, metrics, llm, embeddings, **options))
    run = prepare(spec, keys=False)  # nothing is sent: the missing keys are noted instead
    per_metric = {m.name: _Tally() for m in run.metrics}
    shared: dict[str, _Tally] = {}
    kept = 0
    counters = Counters()
    for row, sample in enumerate(run.loaded.samples):
        sid = run.ids[row]
        plan = run.plans[spread(sid, len(run.plans))]
        for name, cell in plan.skipped(row).items():
            kinds = per_metric[name].skipped
            kind = cell.cause_kind or "unknown"
            kinds[kind] = kinds.get(kind, 0) + 1
        planned, found = row_cost(plan, row, sample, sid, batch=batch, counters=counters)
        kept += found
        for name in planned.undeclared:
            per_metric[name].declared = False
        for name, part in planned.by_metric.items():
            per_metric[name].add(part)
        for name, part in planned.shared.items():
            shared.setdefault(name, _Tally()).add(part)
    total = _Tally()
    for part in (*per_metric.values(), *shared.values()):
        total.add(part)
    notes = [f"not run: {name} ({why})" for name, why in run.left_out.items()]
    notes += [f"the run itself would be refused: {why}" for why in run.missing_keys]
    skipped = [
        f"{name} {n} ({kind})" for name, t in per_metric.items() for kind, n in t.skipped.items()
    ]
    if skipped:
        notes.append(f"cells the run will skip: {', '.join(skipped)}")
    undeclared = sorted(name for name, t in per_metric.items() if not t.declared)
    if undeclared:
        notes.append(
            f"{', '.join(undeclared)} do(es) not declare its judge requests "
            "(Metric.planned_requests): not counted"
        )
    if total.cost is None:
        models = sorted({j.model for j in run.all_judges()})
        notes.append(
            f"the price of {', '.join(models)} is unknown"
            + (" at batch rates" if batch else "")
            + ": give it with --price MODEL=INPUT,OUTPUT (USD per million tokens) or "
            "Judge(prices=PriceTable({...}))"
        )
    summary = total.model()
    return CostEstimate(
        **summary.model_dump(exclude={"cells", "declared"}),
        cells=summary.cells,
        metrics={name: t.model() for name, t in per_metric.items()},
        shared={name: t.model() for name, t in shared.items()},
        model=run.judges[0].model if run.judges else None,
        batch=batch,
        rows=len(run.loaded.samples),
        cells_kept=kept,
        tokenizer=counters.label(),
        notes=notes,
    )


def _shared_name(key: str) -> str:
    """The usage label of shared work, as the run log books it."""
    return SHARED_TAG if key.startswith("statements:") else f"shared:{key}"
