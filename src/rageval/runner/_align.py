"""align() / aalign(): make a judge metric agree with people, and say by how much on rows it
never saw.

The labelled rows of each label column are split by label (stratified), deterministically by a
seed: a training share, the rest held out. On the training rows a greedy search tries a few
configurations of the metric (:class:`~rageval.metrics.authoring.GuidedMetric`), each scored
through the normal evaluation (validation, the request cache: a re-run costs nothing), in steps
that each keep the best so far:

1. the metric as configured (its defaults, or the `metric_params` given);
2. ``instructions``: each guideline text the metric offers (``guideline_variants``: more
   lenient, stricter) and the user's own;
3. ``examples``: `shots` labelled training rows shown in the prompt, stratified by label and
   drawn first among the rows the configured metric got wrong (they show the judge where
   people differ); these rows are then left out of every training score;
4. ``reasons``: the judge's reasoning before its verdict, or not (the other way from the
   metric's default).

``threshold`` costs nothing: for binary labels each configuration is read at the decision
threshold that gives it its best κ on the same scores. The objective is the κ calibrate
reports (Cohen's for binary labels, the weighted κ for ordinal ones). Then the held-out rows
are scored twice, with the metric as configured and as chosen, each in a run directory of its
own, and :mod:`rageval.calibration` measures both agreements, with the paired change
(:func:`rageval.stats.agreement_difference`). ``align.json`` (:class:`~rageval.log.AlignReport`)
and ``aligned.toml`` (the chosen ``[params.METRIC]``) are written to `run_dir`.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval._client._usage import sum_usage
from rageval._rundir_lock import one_writer
from rageval._sync import synchronous
from rageval._version import __version__
from rageval.calibration._agreement import judge_levels
from rageval.errors import RunConfigError, RunDirError
from rageval.judge import Judge
from rageval.labels import LabelColumn, LabelKind
from rageval.log import (
    ALIGN_FILE,
    ALIGNED_CONFIG_FILE,
    AlignCandidate,
    Alignment,
    AlignReport,
    StatisticResult,
    Usage,
    write_atomic,
)
from rageval.metrics.authoring import GuidedMetric
from rageval.metrics.base import Metric
from rageval.runner._calibrate import (
    AgreementOptions,
    LabelledData,
    labelled_spec,
    read_labels,
)
from rageval.runner._cost import limit_spending
from rageval.runner._evaluate import aevaluate
from rageval.runner._panel import Panel
from rageval.runner._prepare import (
    LabelsArg,
    OnInvalid,
    RunSpec,
    cell_problems,
    label_pairs,
    resolve_metrics,
    run_judges,
)
from rageval.runner._runconfig import (
    RunConfig,
    RunKeywords,
    refuse_unknown_keywords,
    run_config,
)
from rageval.samples import InvalidDataError
from rageval.stats import KappaWeights, agreement_difference, cohen_kappa

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rageval.embeddings import Embeddings

#: what the search may try, in the order it tries them (the threshold with every one)
SEARCH_STEPS: tuple[str, ...] = ("threshold", "instructions", "examples", "reasons")
#: the rows --limit keeps are drawn with this seed, whatever the split's: the rows
#: `rageval calibrate --dataset ... --limit N` takes
LIMIT_SEED = 0


@dataclass(frozen=True)
class _Variant:
    """A configuration the search scores: the metric's parameters but the threshold."""

    params: dict[str, Any]
    step: str
    description: str
    n_examples: int = 0


@dataclass
class _Scored:
    variant: _Variant
    candidate: AlignCandidate


@dataclass
class _Task:
    """One (label column, metric) pair to align, and what its runs need."""

    column: LabelColumn
    metric: GuidedMetric
    levels: list[float]
    before_threshold: float | None
    usage: list[Usage] = field(default_factory=list)


@one_writer  # held from the first training run to align.json
async def aalign(
    data: Any,
    labels: LabelsArg,
    llm: Judge | str | Sequence[Judge] | Panel | None = None,
    embeddings: Embeddings | str | None = None,
    *,
    split: float = 0.5,
    seed: int = 0,
    limit: int | None = None,
    shots: int = 4,
    instructions: Sequence[str] = (),
    search: Sequence[str] = SEARCH_STEPS,
    metric_params: Mapping[str, Mapping[str, Any]] | None = None,
    label_kinds: Mapping[str, LabelKind] | None = None,
    label_levels: Mapping[str, Sequence[float]] | None = None,
    threshold: float = 0.5,
    kappa_weights: KappaWeights = "quadratic",
    column_map: Mapping[str, str] | None = None,
    on_invalid: OnInvalid | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    config: RunConfig | None = None,
    **run: Unpack[RunKeywords],
) -> AlignReport:
    """Choose, on a training split of the labelled rows, the configuration of each judge metric
    that agrees best with the people, and measure it against the metric as configured on the
    held-out rows; see the module docstring and docs/calibration.md.

    Args:
        data: the rows with their label columns, as :func:`rageval.calibrate` takes them.
        labels: label columns paired with the metrics they judge, as :func:`rageval.calibrate`
            takes them (one label column per metric: a metric gets one configuration); each
            metric is a :class:`~rageval.metrics.authoring.GuidedMetric` (answer_accuracy,
            answer_correctness, faithfulness).
        llm: the judge, as :func:`rageval.evaluate` takes it.
        embeddings: the embeddings, as :func:`rageval.evaluate` takes them.
        split: the training share of each label's rows.
        seed: fixes the split and the examples.
        limit: keeps a random sample of that many labelled rows first (the same every time).
        shots: how many examples are drawn for the examples step.
        instructions: guideline texts to try besides the metric's own variants.
        search: the steps to run (:data:`SEARCH_STEPS`).
        metric_params: the metrics' parameters, by name, as :func:`rageval.evaluate`'s.
        label_kinds: as :func:`rageval.calibrate`'s.
        label_levels: as :func:`rageval.calibrate`'s.
        threshold: the decision threshold of the metric as configured (when its parameters set
            none).
        kappa_weights: as :func:`rageval.calibrate`'s.
        column_map: as :func:`rageval.evaluate`'s.
        on_invalid: as :func:`rageval.evaluate`'s.
        confidence: as :func:`rageval.calibrate`'s.
        n_resamples: as :func:`rageval.calibrate`'s.
        config: how its runs execute, one :class:`~rageval.runner.RunConfig`, as
            :func:`rageval.evaluate` takes it (`run_dir`, `overwrite`, `engine`, `batch`,
            `observers`, `progress`, `probe`...). With `run_dir` the held-out runs go into
            ``<metric>-before`` and ``<metric>-after`` under it, next to ``align.json`` and
            ``aligned.toml``; `max_cost` is the budget of the whole alignment, which its runs
            spend from in turn: the run that would pass it stops the alignment with
            BudgetReached.
        **run: the RunConfig's fields as keywords, instead of `config`.
    """
    refuse_unknown_keywords(aalign, run)
    config = run_config(config, run)
    if config.resume:
        raise RunConfigError(
            "align starts afresh (resume=True continues one run): run it again, and the "
            "request cache answers what was asked before"
        )
    run_dir, overwrite = config.run_dir, config.overwrite
    unknown_steps = sorted(set(search) - set(SEARCH_STEPS))
    if unknown_steps:
        raise RunConfigError(
            f"search steps are {', '.join(SEARCH_STEPS)}; unknown: {', '.join(unknown_steps)}"
        )
    if not 0.0 < split < 1.0:
        raise RunConfigError(f"split (the training share) must be in (0, 1), got {split}")
    if shots < 0:
        raise RunConfigError(f"shots must be >= 0, got {shots}")
    if limit is not None and limit < 2:
        raise RunConfigError(f"limit must be at least 2 rows (one to train, one to test): {limit}")
    if not 0.0 <= threshold <= 1.0:
        raise RunConfigError(f"threshold must be in [0, 1], got {threshold}")
    options = AgreementOptions(kappa_weights, confidence, n_resamples, seed)
    extra = [t.strip() for t in instructions]
    if any(not t for t in extra):
        raise RunConfigError("an instructions text to try is empty")
    pairs = label_pairs(labels)
    names = [m if isinstance(m, str) else m.name for _, m in pairs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RunConfigError(
            f"{', '.join(twice)}: one label column per metric (align chooses one "
            "configuration for each metric)"
        )
    if run_dir is not None and (Path(run_dir) / ALIGN_FILE).exists() and not overwrite:
        raise RunDirError(
            f"{run_dir} already holds an alignment ({ALIGN_FILE}); choose another directory "
            "or overwrite it"
        )
    metrics_named = [m for _, m in pairs]
    spec = labelled_spec(
        RunSpec(data, metrics_named, llm, embeddings, column_map, metric_params, on_invalid)
    )
    labelled = read_labels(spec, pairs, label_kinds, label_levels)
    metrics = resolve_metrics(spec.metrics, labelled.loaded, spec.metric_params)
    tasks = [
        _task(labelled, column, metric, label_levels, threshold)
        for (column, _), metric in zip(pairs, metrics, strict=True)
    ]
    keep = _limited(labelled, [t.column.name for t in tasks], limit)
    _check_rows(labelled, metrics, keep, on_invalid)
    if isinstance(llm, Panel):
        raise RunConfigError(
            "align tunes one judge's configuration, not a judge panel's: align with one of its "
            "judges (then calibrate the panel with that configuration)"
        )
    judges = run_judges(llm)
    if not judges:
        raise RunConfigError(
            "align needs a judge: pass llm= (a Judge or a model name) or set RAGEVAL_LLM"
        )
    # every run of the alignment scores rows already read (no column map) with one metric
    # object, made here, and the judges made once (one request cache, one usage ledger)
    run_spec = dataclasses.replace(spec, llm=judges, column_map=None, metric_params=None)
    runs = _Runs(labelled, run_spec, config)
    alignments = []
    with limit_spending(config.max_cost):  # one budget for every run of the alignment
        for task in tasks:
            rows = [i for i in keep if task.column.values[i] is not None]
            train, heldout = stratified_split(rows, task.column.values, split, seed)
            if not train or not heldout:
                raise RunConfigError(
                    f"{task.column.name}: {len(rows)} labelled rows cannot be split into training "
                    "and held-out rows; give more rows or another split"
                )
            if runs.show:
                print(
                    f"rageval align: {task.metric.name} vs {task.column.name}: {len(train)} "
                    f"training rows, {len(heldout)} held out",
                    file=sys.stderr,
                )
            alignments.append(
                await _align_one(
                    task,
                    runs,
                    train,
                    heldout,
                    shots=shots,
                    extra_instructions=extra,
                    search=search,
                    options=options,
                )
            )
    report = AlignReport(
        rageval_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        data_source=labelled.loaded.source,
        n_rows=len(labelled.loaded.samples),
        judge=judges[0].describe(),
        embeddings=runs.embeddings_name,
        run_dir=str(run_dir) if run_dir is not None else None,
        split=split,
        seed=seed,
        shots=shots,
        search=[s for s in SEARCH_STEPS if s in search],
        confidence=confidence,
        interval_method=(
            f"percentile bootstrap over the held-out rows, {n_resamples} resamples, seed {seed}; "
            "the change: paired (both configurations on the same resampled rows)"
        ),
        alignments=alignments,
        usage=sum_usage(runs.usage),
    )
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        write_atomic(Path(run_dir) / ALIGN_FILE, report)
        (Path(run_dir) / ALIGNED_CONFIG_FILE).write_text(report.toml(), encoding="utf-8")
    return report


align = synchronous(
    aalign,
    "align",
    """Synchronous :func:`aalign`. Inside a running event loop (Jupyter) it runs on a private
    loop in a worker thread.""",
)


# ---------------------------------------------------------------------- set-up


def _task(
    labelled: LabelledData,
    column: str,
    metric: Metric,
    label_levels: Mapping[str, Sequence[float]] | None,
    threshold: float,
) -> _Task:
    if not isinstance(metric, GuidedMetric):
        raise RunConfigError(
            f"{metric.name} cannot be aligned: align tunes judge metrics that take guidance "
            "(instructions, examples, reasons, threshold), such as answer_accuracy, "
            "answer_correctness and faithfulness"
        )
    if metric.uncaptured:
        why = "; ".join(f"{k}: {v}" for k, v in metric.uncaptured.items())
        raise RunConfigError(f"{metric.name}'s configuration cannot be recorded ({why})")
    labels = labelled.columns[column]
    if labels.kind == "continuous":
        raise RunConfigError(
            f"{column}: align needs binary or ordinal labels (their agreement has a κ); these "
            "are continuous"
        )
    levels = sorted({*labels.levels, *(label_levels or {}).get(column, ())})
    before = metric.threshold if metric.threshold is not None else threshold
    return _Task(labels, metric, levels, before if labels.kind == "binary" else None)


def _limited(labelled: LabelledData, columns: Sequence[str], limit: int | None) -> list[int]:
    """The rows an alignment reads: those labelled in one of `columns`, or a random sample of
    `limit` of them (drawn as :meth:`LabelledSet.sample` draws)."""
    rows = [
        i
        for i, sample in enumerate(labelled.loaded.samples)
        if sample is not None and any(labelled.columns[c].values[i] is not None for c in columns)
    ]
    if limit is None or limit >= len(rows):
        return rows
    return [rows[k] for k in sorted(random.Random(LIMIT_SEED).sample(range(len(rows)), limit))]


def _check_rows(
    labelled: LabelledData,
    metrics: Sequence[Metric],
    keep: Sequence[int],
    on_invalid: OnInvalid | None,
) -> None:
    """Every row the alignment will score, checked before the first request (the evaluation
    of each split checks only its own rows)."""
    problems, _, _ = cell_problems(labelled.loaded, labelled.ids, metrics)
    kept = set(keep)
    stopping = [p for p in problems if p.row is None or p.row in kept]
    if stopping and on_invalid != "skip":
        raise InvalidDataError(stopping, source=labelled.loaded.source)


def stratified_split(
    rows: Sequence[int], labels: Sequence[float | None], share: float, seed: int
) -> tuple[list[int], list[int]]:
    """(training rows, held-out rows) of `rows`: of each label's rows, `share` of them
    (rounded half up) train, drawn at random with `seed`; both lists in row order."""
    rng = random.Random(seed)
    train: list[int] = []
    for level in sorted({label for i in rows if (label := labels[i]) is not None}):
        group = [i for i in rows if labels[i] == level]
        rng.shuffle(group)
        train += group[: int(share * len(group) + 0.5)]
    chosen = set(train)
    return sorted(train), [i for i in rows if i not in chosen]


class _Runs:
    """Scores a metric configuration on some rows through the normal evaluation, and keeps
    what every run used."""

    def __init__(
        self,
        labelled: LabelledData,
        spec: RunSpec,
        config: RunConfig,
    ) -> None:
        self.labelled = labelled
        #: what every run shares: the judges, the embeddings, `on_invalid`
        self.spec = spec
        #: how every run executes (each with its own run directory, or none)
        self.config = config
        self.usage: list[Usage] = []
        self.embeddings_name: str | None = None

    @property
    def show(self) -> bool:
        """Whether to say each step, a line on stderr: plain lines, so a log file gets them too
        (each evaluation's own progress is a redrawn line on a terminal, a plain line a minute
        elsewhere)."""
        return self.config.progress is not False

    async def scores(
        self,
        metric: GuidedMetric,
        params: Mapping[str, Any],
        rows: Sequence[int],
        run_dir: Path | None = None,
    ) -> tuple[list[float | None], Usage]:
        """The metric built with `params`: its value on each of `rows` (None: no value)."""
        configured = type(metric)(**dict(params))
        configured.name = metric.name
        samples = self.labelled.loaded.samples
        data = []
        for i in rows:
            sample = samples[i]
            assert sample is not None  # rows are labelled, so they were read
            data.append({**sample.model_dump(exclude_none=True), "id": self.labelled.ids[i]})
        result = await aevaluate(
            dataclasses.replace(self.spec, data=data, metrics=[configured]),
            config=self.config.part(run_dir),
        )
        self.usage.append(result.usage)
        self.embeddings_name = self.embeddings_name or result.embeddings
        return list(result[metric.name]), result.usage


# ---------------------------------------------------------------------- the search


async def _align_one(
    task: _Task,
    runs: _Runs,
    train: list[int],
    heldout: list[int],
    *,
    shots: int,
    extra_instructions: Sequence[str],
    search: Sequence[str],
    options: AgreementOptions,
) -> Alignment:
    metric, labels = task.metric, task.column
    binary = labels.kind == "binary"
    kappa_statistic = "cohen_kappa" if binary else f"weighted_kappa_{options.kappa_weights}"
    tune_threshold = binary and "threshold" in search
    base_params = {**metric.params(), "threshold": None}

    def judged(rows: Sequence[int], values: Sequence[float | None]) -> AlignCandidate:
        """The training κ of some values, at their best threshold (binary labels)."""
        human = [labels.values[i] for i in rows]
        kappa, cut = _best_kappa(
            human, values, task.levels, options.kappa_weights, task.before_threshold, tune_threshold
        )
        return AlignCandidate(
            step="",
            description="",
            params={},
            threshold=cut,
            kappa=kappa,
            n_rows=len(rows),
            n_pairs=sum(
                h is not None and v is not None for h, v in zip(human, values, strict=True)
            ),
        )

    def scored(variant: _Variant, found: AlignCandidate, usage: Usage) -> _Scored:
        shown = {k: v for k, v in variant.params.items() if k not in ("examples", "threshold")}
        return _Scored(
            variant,
            found.model_copy(
                update={
                    "step": variant.step,
                    "description": variant.description,
                    "params": shown,
                    "n_examples": variant.n_examples,
                    "usage": usage,
                }
            ),
        )

    def say(text: str) -> None:
        if runs.show:
            print(f"rageval align: {metric.name}: {text}", file=sys.stderr)

    # the metric as configured, on every training row: it also tells which rows it misjudges
    base = _Variant(base_params, "as configured", "as configured")
    say("scoring the metric as configured on the training rows")
    base_values, base_usage = await runs.scores(metric, base_params, train)
    by_row = dict(zip(train, base_values, strict=True))
    first = judged(train, base_values)
    examples: list[int] = []
    if "examples" in search and shots:
        wrong = {
            i
            for i, v in by_row.items()
            if v is not None and _level(v, first.threshold, task.levels, binary) != labels.values[i]
        }
        # at most half the training rows: the others score the configurations
        examples = _draw_examples(
            train, labels.values, wrong, min(shots, len(train) // 2), options.seed, metric, runs
        )
    selection = [i for i in train if i not in set(examples)]
    current = scored(base, judged(selection, [by_row[i] for i in selection]), base_usage)
    tried = [current]
    steps: list[tuple[str, list[_Variant]]] = []
    if "instructions" in search:
        texts = [*metric.guideline_variants.items()]
        texts += [(f"your text {n}", t) for n, t in enumerate(extra_instructions, start=1)]
        steps.append(("instructions", [
            _Variant({**base_params, "instructions": text}, "instructions",
                     f"instructions: {name}")
            for name, text in texts
            if text != base_params.get("instructions")
        ]))  # fmt: skip
    if examples:
        shown = [_example(metric, runs.labelled, labels, task.levels, i) for i in examples]
        steps.append(("examples", [
            _Variant({**base_params, "examples": shown}, "examples",
                     f"examples: {len(shown)} from the training labels", len(shown))
        ]))  # fmt: skip
    if "reasons" in search:
        flipped = not metric.reasons
        steps.append(("reasons", [
            _Variant({**base_params, "reasons": flipped}, "reasons",
                     f"reasons: {'on' if flipped else 'off'}")
        ]))  # fmt: skip
    for step, variants in steps:
        best = current
        for variant in variants:
            # each step changes its own parameter on top of what the steps before kept
            kept_so_far = {k: v for k, v in current.variant.params.items() if k != step}
            params = {**kept_so_far, step: variant.params[step]}
            variant = replace(variant, params=params,
                              n_examples=len(params.get("examples") or ()))  # fmt: skip
            say(f"trying {variant.description}")
            values, usage = await runs.scores(metric, params, selection)
            attempt = scored(variant, judged(selection, values), usage)
            tried.append(attempt)
            if _better(attempt.candidate.kappa, best.candidate.kappa):
                best = attempt
        if best is not current:
            best.candidate.kept = True
            current = best
    chosen = current
    after_threshold = chosen.candidate.threshold if binary else None

    say("scoring the held-out rows as configured and as chosen")
    run_dir = runs.config.run_dir
    before_values, before_usage = await runs.scores(
        metric, base_params, heldout, _held_out_dir(run_dir, metric.name, "before")
    )
    after_values, after_usage = await runs.scores(
        metric, chosen.variant.params, heldout, _held_out_dir(run_dir, metric.name, "after")
    )
    held = LabelColumn(labels.name, [labels.values[i] for i in heldout], labels.kind)

    def agreement(values: list[float | None], cut: float | None, usage: Usage) -> Any:
        threshold = cut if cut is not None else 0.5
        return options.measure(
            held, metric.name, values, levels=task.levels, threshold=threshold, usage=usage
        )

    # in the order the metric takes its parameters (the steps moved their own to the end)
    chosen_params = {
        k: after_threshold if k == "threshold" else chosen.variant.params[k] for k in base_params
    }
    defaults = type(metric)().params()
    return Alignment(
        label_column=labels.name,
        metric=metric.name,
        kind=labels.kind,
        kappa_statistic=kappa_statistic,
        train_ids=[runs.labelled.ids[i] for i in train],
        example_ids=[runs.labelled.ids[i] for i in examples],
        heldout_ids=[runs.labelled.ids[i] for i in heldout],
        candidates=[t.candidate for t in tried],
        before_params=metric.params(),
        before_threshold=task.before_threshold,
        chosen_params=chosen_params,
        config={k: v for k, v in chosen_params.items() if v is not None and v != defaults.get(k)},
        before=agreement(before_values, task.before_threshold, before_usage),
        after=agreement(after_values, after_threshold, after_usage),
        change=_change(
            held.values,
            before_values,
            after_values,
            (task.before_threshold, after_threshold),
            task.levels,
            kappa_statistic,
            options,
        ),
        usage=sum_usage(
            [base_usage, *(t.candidate.usage for t in tried[1:]), before_usage, after_usage]
        ),
    )


def _held_out_dir(run_dir: Path | None, metric: str, which: str) -> Path | None:
    return None if run_dir is None else run_dir / f"{metric}-{which}"


def _better(kappa: float | None, than: float | None) -> bool:
    """A strictly higher κ (an undefined κ is never better): ties keep the simpler
    configuration, found first."""
    return kappa is not None and (than is None or kappa > than)


def _level(score: float, cut: float | None, levels: Sequence[float], binary: bool) -> float:
    """The judge's verdict (binary labels: score ≥ cut) or level (ordinal) for a score."""
    if binary:
        return 1.0 if score >= (cut if cut is not None else 0.5) else 0.0
    return judge_levels([score], levels)[0]


def _best_kappa(
    human: Sequence[float | None],
    values: Sequence[float | None],
    levels: Sequence[float],
    kappa_weights: KappaWeights,
    default: float | None,
    tune: bool,
) -> tuple[float | None, float | None]:
    """(κ, threshold): for binary labels the κ at the threshold that gives the highest (the
    default's when `tune` is off; among equal κs the threshold nearest the default), for
    ordinal ones the weighted κ of the judge's levels (no threshold)."""
    pairs = [(h, v) for h, v in zip(human, values, strict=True) if h is not None and v is not None]
    if not pairs:
        return None, default
    truth = [h for h, _ in pairs]
    scores = [v for _, v in pairs]
    if default is None:  # ordinal labels
        graded = judge_levels(scores, levels)
        return cohen_kappa(truth, graded, weights=kappa_weights, levels=levels), None
    cuts = [default]
    if tune:
        distinct = sorted(set(scores))
        cuts += [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    best: tuple[float | None, float] = (None, default)
    for cut in sorted(cuts, key=lambda c: (abs(c - default), c)):
        verdicts = [1.0 if s >= cut else 0.0 for s in scores]
        kappa = cohen_kappa(truth, verdicts, levels=[0.0, 1.0])
        if _better(kappa, best[0]):
            best = (kappa, cut)
    return best


def _draw_examples(
    train: Sequence[int],
    labels: Sequence[float | None],
    wrong: set[int],
    shots: int,
    seed: int,
    metric: GuidedMetric,
    runs: _Runs,
) -> list[int]:
    """`shots` training rows to show as examples: spread over the labels in turn (lowest
    first), each label's rows those the configured metric misjudged first, at random (`seed`)
    among equals; only rows that have every field an example shows."""
    fields = metric.example_fields or metric.required_fields
    samples = runs.labelled.loaded.samples
    rng = random.Random(seed)
    queues: list[list[int]] = []
    for level in sorted({label for i in train if (label := labels[i]) is not None}):
        group = [
            i
            for i in train
            if labels[i] == level and all(getattr(samples[i], f, None) is not None for f in fields)
        ]
        rng.shuffle(group)
        group.sort(key=lambda i: i not in wrong)  # stable: the misjudged rows first
        queues.append(group)
    chosen: list[int] = []
    while len(chosen) < shots and any(queues):
        for queue in queues:
            if queue and len(chosen) < shots:
                chosen.append(queue.pop(0))
    return sorted(chosen)


def _example(
    metric: GuidedMetric,
    labelled: LabelledData,
    labels: LabelColumn,
    levels: Sequence[float],
    row: int,
) -> dict[str, Any]:
    """A training row as the metric's `examples` parameter holds it: the fields an example
    shows and people's label on the 0..1 scale (an ordinal level spread evenly over it)."""
    sample = labelled.loaded.samples[row]
    assert sample is not None
    fields = metric.example_fields or metric.required_fields
    label = labels.values[row]
    assert label is not None
    low, high = min(levels), max(levels)
    scaled = (label - low) / (high - low) if high > low else 1.0
    return {**{f: getattr(sample, f) for f in fields}, "label": scaled}


def _change(
    human: Sequence[float | None],
    before: Sequence[float | None],
    after: Sequence[float | None],
    cuts: tuple[float | None, float | None],
    levels: Sequence[float],
    kappa_statistic: str,
    options: AgreementOptions,
) -> dict[str, StatisticResult]:
    """after − before of the κ, the balanced accuracy and the ranking statistic (AUROC for
    binary labels, Spearman for ordinal ones) on the rows both configurations scored."""
    rows = [
        (h, b, a)
        for h, b, a in zip(human, before, after, strict=True)
        if h is not None and b is not None and a is not None
    ]
    truth = [h for h, _, _ in rows]
    binary = cuts[0] is not None
    raw = ([b for _, b, _ in rows], [a for _, _, a in rows])
    graded = tuple(
        [_level(v, cut, levels, binary) for v in side] for side, cut in zip(raw, cuts, strict=True)
    )
    ranking = "auroc" if binary else "spearman"
    out: dict[str, StatisticResult] = {}
    for name, sides in (
        (kappa_statistic, graded),
        ("balanced_accuracy", graded),
        (ranking, raw),
    ):
        estimate = agreement_difference(
            name,
            truth,
            sides[0],
            sides[1],
            levels=None if name == ranking else ([0.0, 1.0] if binary else levels),
            confidence=options.confidence,
            n_resamples=options.n_resamples,
            seed=options.seed,
        )
        out[name] = StatisticResult.model_validate(estimate, from_attributes=True)
    return out


__all__ = ["SEARCH_STEPS", "aalign", "align", "stratified_split"]
