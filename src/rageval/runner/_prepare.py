"""Everything an evaluation is made of before any request: the judge and embeddings it runs
with, its metrics (named, or the default selection), the rows loaded and every (row, metric)
cell validated, the human-label pairs, and the scheduling plans (:func:`prepare`). Used by
:func:`~rageval.runner.evaluate`, :func:`~rageval.estimate` (the dry run), calibrate and align
alike, so that what is validated and planned is the same whichever of them runs.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from rageval import _env
from rageval.errors import CauseKind, RunConfigError
from rageval.judge import RequestCache
from rageval.log import Cell
from rageval.metrics.base import (
    Metric,
    MetricLike,
    as_metric,
    named_metric,
    registered_metrics,
    scores_conversations,
)
from rageval.runner._panel import Panel
from rageval.runner._probe import check_key
from rageval.runner._schedule import (
    Plan,
    make_plans,
)
from rageval.samples import (
    LEGACY_ALIASES,
    ROW_FIELDS,
    Conversation,
    InvalidDataError,
    LoadedData,
    RowProblem,
    load_samples,
    sample_ids,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge

    #: a run's judge: a Judge, a model name, endpoints of one model (a list), a panel, or none
    JudgeArg: TypeAlias = "Judge | str | Sequence[Judge] | Panel | None"


OnInvalid = Literal["raise", "skip"]


def judge_from_env(model: str | None = None, **settings: Any) -> Judge | None:
    """The judge configured by arguments or the environment (see :mod:`rageval._env`): the
    model from `model` or RAGEVAL_LLM, the endpoint from a `base_url` setting, else
    RAGEVAL_BASE_URL or OPENAI_BASE_URL (default OpenAI), the key from OPENAI_API_KEY;
    `settings` are the Judge's keyword arguments. A model named ``anthropic:MODEL`` is asked
    through Anthropic's Messages API (its key from ANTHROPIC_API_KEY). None when no model is
    named."""
    model = _env.judge_model(model)
    if model is None:
        return None
    from rageval.judge import Judge, split_backend

    backend, model = split_backend(model)
    if backend is not None:
        settings["backend"] = backend
    judge = Judge(model, **settings)
    check_key(judge.describe(), what="judge")
    return judge


def embeddings_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    cache: RequestCache | bool | str | os.PathLike[str] = True,
) -> Embeddings:
    """`local` or `openai:MODEL` (the CLI's --embeddings); an OpenAI-compatible model is
    reached like the judge: `base_url`, else RAGEVAL_BASE_URL or OPENAI_BASE_URL; `cache` is
    its request cache (as OpenAIEmbeddings takes it)."""
    from rageval.embeddings import embedding_factory

    provider, _, model = spec.partition(":")
    if provider == "local" and not model:
        return embedding_factory("local")
    if provider == "openai":
        remote = embedding_factory("openai", model=model or None, base_url=base_url, cache=cache)
        check_key(remote.describe(), what="embeddings model")
        return remote
    raise RunConfigError(f"embeddings must be 'local' or 'openai:MODEL', got {spec!r}")


def default_candidates(loaded: LoadedData) -> dict[str, type[Metric]]:
    """The metrics the default selection (``metrics=None``) chooses from: those in the
    default run that score the kinds of row `loaded` has (conversations, single-turn samples
    or both), by name."""
    kinds = {isinstance(s, Conversation) for s in loaded.samples if s is not None}
    return {
        name: cls
        for name, cls in registered_metrics().items()
        if cls.in_default_run and scores_conversations(cls) in kinds
    }


def left_out_of_default(loaded: LoadedData) -> dict[str, str]:
    """The metrics of the default selection (``metrics=None``) that `loaded` leaves out, each
    with why: the fields it needs that no row gives. A field some row gives is enough to keep
    a metric, even when that row gives it wrongly (its problem is then reported by row)."""
    left_out = {}
    for name, cls in default_candidates(loaded).items():
        lacking = [f for f in cls.required_fields if f not in loaded.given_fields]
        if lacking:
            left_out[name] = f"no row has {_field_names(lacking)}"
    return left_out


def _field_names(fields: Sequence[str]) -> str:
    """Fields as a user may have named them: ``'user_input' (or 'question')``."""
    shown = []
    for f in fields:
        legacy = [k for k, v in LEGACY_ALIASES.items() if v == f]
        shown.append(repr(f) + (f" (or {' / '.join(map(repr, legacy))})" if legacy else ""))
    return ", ".join(shown)


def _nothing_to_run(loaded: LoadedData) -> str:
    """Why the default selection is empty, with the data's columns and how to map them."""
    found = ", ".join(loaded.columns[:30]) + (" ..." if len(loaded.columns) > 30 else "")
    return (
        "no metric to run: no metric has the fields it needs in this data "
        f"(its columns: {found or 'none'}; rageval's fields: {_field_names(ROW_FIELDS)}). "
        "Map your columns to rageval's fields with --column-map YOURS=FIELD (Python: "
        "column_map={'yours': 'field'}), or name metrics (-m / metrics=)"
        + (_TEST_SET_HINT if _unanswered_test_set(loaded.given_fields) else "")
    )


def _unanswered_test_set(fields: frozenset[str]) -> bool:
    """Questions and reference answers, and no answer: a test set not yet answered."""
    return {"user_input", "reference"} <= fields and "response" not in fields


_TEST_SET_HINT = (
    ". The rows have questions and reference answers but no 'response': a test set (rageval "
    "generate's, ragas' Testset) is scored once your system has answered each question "
    "(docs/generate.md, 2. Answer with your system)"
)


def resolve_metrics(
    metrics: Sequence[MetricLike] | MetricLike | None,
    loaded: LoadedData,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Metric]:
    """Metric objects for `metrics`: instances as they are; registry names, classes and metric
    modules (``from rageval.metrics import faithfulness``) built here (see
    :func:`rageval.metrics.as_metric`). By default every registered metric whose required
    fields appear in the data (except opt-in ones such as rubric_score, whose built-in rubric
    is only a placeholder for the user's own), of the kinds of row the data has
    (:func:`default_candidates`). `params` holds, by registry name, the
    constructor arguments of any metric built here (a metric it names that the run does not
    choose is passed over; a name that is no metric is an error)."""
    params = dict(params or {})
    unknown = sorted(name for name in params if named_metric(name) is None)
    if unknown:
        raise RunConfigError(f"parameters for unknown metric(s): {', '.join(unknown)}")

    if metrics is None:
        left_out = left_out_of_default(loaded)
        chosen: list[Metric] = [
            make_metric(name, params) for name in default_candidates(loaded) if name not in left_out
        ]
        if not chosen:
            if loaded.problems and all(sample is None for sample in loaded.samples):
                # no row could be read: its columns are none because of those rows, named here
                raise InvalidDataError(loaded.problems, source=loaded.source)
            raise RunConfigError(_nothing_to_run(loaded))
    else:
        one = isinstance(metrics, (str, Metric, ModuleType, type))
        specs: list[MetricLike] = [metrics] if one else list(metrics)  # type: ignore[list-item,arg-type]
        chosen = []
        for spec in specs:
            if isinstance(spec, Metric) and spec.name in params:
                raise RunConfigError(
                    f"{spec.name} is given as an object: give its parameters to it, not in "
                    "metric_params"
                )
            chosen.append(make_metric(spec, params))
    if not chosen:
        raise RunConfigError("no metric to run: the list of metrics is empty")
    names = [m.name for m in chosen]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RunConfigError(
            f"metric(s) given more than once: {', '.join(dupes)} (a metric reports under its "
            "name: give one of them another, e.g. ContextEvaluation(..., name='tone'))"
        )
    return chosen


def make_metric(spec: MetricLike, params: Mapping[str, Mapping[str, Any]]) -> Metric:
    """The metric `spec` names (see :func:`rageval.metrics.as_metric`), built with its
    constructor arguments in `params`; RunConfigError for an unknown name, a parameter it
    does not take or a value it refuses."""
    try:
        return as_metric(spec, params)
    except KeyError as e:
        raise RunConfigError(str(e.args[0])) from None
    except (TypeError, ValueError) as e:  # not a metric, or an invalid constructor argument
        raise _construction_error(spec, e) from None


def _construction_error(spec: MetricLike, error: Exception) -> RunConfigError:
    """Why `spec` could not be built; for a parameter the metric does not take (-p NAME.KEY),
    the ones it takes instead of Python's 'Metric.__init__() got an unexpected keyword'."""
    unknown = re.search(r"unexpected keyword argument '(\w+)'", str(error))
    if not isinstance(spec, str) or unknown is None or (found := named_metric(spec)) is None:
        return RunConfigError(f"{spec if isinstance(spec, str) else 'metrics'}: {error}")
    takes = ", ".join(found[0]().params()) or "none"
    return RunConfigError(
        f"{spec}: no parameter {unknown[1]!r}; its parameters: {takes} (each with its "
        f"default: rageval metrics {spec})"
    )


#: (label column, metric) pairs: {column: metric}, {column: [metrics]} or [(column, metric)]
LabelsArg = Mapping[str, str | Metric | Sequence[str | Metric]] | Sequence[tuple[str, str | Metric]]


def label_pairs(labels: LabelsArg) -> list[tuple[str, str | Metric]]:
    """The (label column, metric) pairs of a labels argument, in order, each once."""
    pairs: list[tuple[str, str | Metric]] = []
    if isinstance(labels, Mapping):
        for column, target in labels.items():
            if isinstance(target, (str, Metric, ModuleType, type)):
                pairs.append((column, target))  # a module or a class too
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


def human_label_pairs(
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
            read_label_column(loaded.samples, ids, column, source=loaded.source, line=loaded.line)
        except InvalidDataError as e:
            problems.extend(e.problems)
    if problems:
        raise InvalidDataError(problems, source=loaded.source)
    return pairs


def cell_problems(
    loaded: LoadedData, ids: Sequence[str], metrics: Sequence[Metric]
) -> tuple[list[RowProblem], dict[int, str], dict[int, dict[str, Cell]]]:
    """Every problem that stops a (row, metric) cell of this run; the reason for each row no
    metric can read; and the skipped cell of each (row, metric) it stops, by row, saying why
    (all the cells of an unreadable row; a bad field; a field the metric needs that the row
    lacks). A bad field that no metric of the run reads stops nothing. The one place a cell is
    found unfit to score: the plans carry what it decides (:class:`Plan`)."""
    by_row: dict[int, list[RowProblem]] = {}
    for p in loaded.problems:
        if p.row is not None:
            by_row.setdefault(p.row, []).append(p)
    problems: dict[int, RowProblem] = {}  # by id(): each problem once, in order
    invalid_rows: dict[int, str] = {}
    skipped: dict[int, dict[str, Cell]] = {}
    for row, sample in enumerate(loaded.samples):
        found = by_row.get(row, [])
        if sample is None:
            problems.update((id(p), p) for p in found)
            invalid_rows[row] = "; ".join(map(_describe, found)) or "could not be read"
            cell = _skipped(f"invalid row: {invalid_rows[row]}", "invalid_row")
            skipped[row] = {m.name: cell for m in metrics}
            continue
        for m in metrics:
            stopping = [p for p in found if p.blocks(m.required_fields)]
            if stopping:
                problems.update((id(p), p) for p in stopping)
                cause = "invalid row: " + "; ".join(map(_describe, stopping))
                skipped.setdefault(row, {})[m.name] = _skipped(cause, "invalid_row")
                continue
            missing = m.input_problems(sample)
            for field, message in missing:
                problem = RowProblem.of_metric(
                    row, field, message, sample.id, m.name, loaded.line(row)
                )
                problems[id(problem)] = problem
            if missing:
                cause = "; ".join(f"field {f!r}: {msg}" for f, msg in missing)
                skipped.setdefault(row, {})[m.name] = _skipped(cause, "missing_field")
    return list(problems.values()), invalid_rows, skipped


def _skipped(cause: str, kind: CauseKind) -> Cell:
    return Cell(status="skipped", cause=cause, cause_kind=kind)


def _describe(p: RowProblem) -> str:
    return f"field {p.field!r}: {p.message}" if p.field else p.message


def run_judges(llm: JudgeArg) -> list[Judge]:
    """The run's judge: none, one, one per endpoint of the same model (a list), or a panel's."""
    from rageval.judge import Judge

    if isinstance(llm, Panel):
        return list(llm.judges)
    if isinstance(llm, str) or llm is None:
        judge = judge_from_env(llm)
        return [judge] if judge is not None else []
    if isinstance(llm, Judge):
        return [llm]
    judges: list[Judge] = list(llm) if isinstance(llm, (list, tuple)) else []
    if not judges or not all(isinstance(j, Judge) for j in judges):
        raise RunConfigError(
            f"llm must be a Judge, a model name, a Panel or a non-empty list of Judges, got {llm!r}"
        )
    models = sorted({j.model for j in judges})
    if len(models) > 1:
        raise RunConfigError(
            f"a list of judges spreads the rows over endpoints of one model, got {models}"
        )
    urls = [j.base_url for j in judges]
    twice = sorted({u for u in urls if urls.count(u) > 1})
    if twice:
        raise RunConfigError(f"judge endpoint(s) given more than once: {', '.join(twice)}")
    return judges


@dataclasses.dataclass
class Prepared:
    """An evaluation ready to score: its data (validated), metrics, judges, embeddings and
    the plan of each judge endpoint."""

    loaded: LoadedData
    ids: list[str]
    metrics: list[Metric]
    #: the run's judge: none, one, one per endpoint of one model, or a panel's judges
    judges: list[Judge]
    embedder: Embeddings | None
    plans: list[Plan]
    #: metrics of the default selection the data cannot feed, with why (metrics=None only)
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the judge panel, when the run has one (`judges` are its judges)
    panel: Panel | None = None
    #: why a judge would be refused for want of an API key (prepared with keys=False only:
    #: else the first refuses the run)
    missing_keys: list[str] = dataclasses.field(default_factory=list)

    def all_judges(self) -> list[Judge]:
        """Every judge a cell may ask (the run's, a panel's and the metrics' own), each once."""
        plans = [seat for plan in self.plans for _, seat in plan.seats] or self.plans
        found = (j for plan in plans for j in (*plan.judge_of.values(), plan.shared_judge))
        return list({id(j): j for j in found if j is not None}.values())


class RunOptions(TypedDict, total=False):
    """The keyword arguments :func:`aevaluate` and :func:`rageval.estimate` both take for their
    :class:`RunSpec`, beside the data, the metrics, the judge and the embeddings (None, or not
    given: as the spec leaves it); what each means is in :func:`aevaluate`'s docstring."""

    column_map: Mapping[str, str] | None
    metric_params: Mapping[str, Mapping[str, Any]] | None
    on_invalid: OnInvalid | None
    repeats: int | None
    language: str | None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What one run scores and how: the arguments :func:`aevaluate`, :func:`rageval.estimate`,
    calibrate and align were given (None: not given), or the spec given to evaluate or
    estimate in place of the data (:func:`spec_of`), completed from a resumed run's manifest
    (:meth:`rageval.runner._stored.StoredRun.complete`); :func:`prepare` checks it and makes
    the run of it."""

    data: Any = None
    metrics: Sequence[MetricLike] | None = None
    llm: JudgeArg = None
    embeddings: Embeddings | str | None = None
    column_map: Mapping[str, str] | None = None
    metric_params: Mapping[str, Mapping[str, Any]] | None = None
    on_invalid: OnInvalid | None = None
    repeats: int | None = None
    #: the language of every row without a language column of its own (None: detected)
    language: str | None = None


def spec_of(given: RunSpec) -> RunSpec:
    """The run of the arguments :func:`aevaluate` or :func:`rageval.estimate` were `given`:
    the :class:`RunSpec` given in place of the data, if one was (then no other argument of
    the spec may be given: RunConfigError), else `given` itself."""
    whole = given.data
    if not isinstance(whole, RunSpec):
        return given
    twice = [
        f.name
        for f in dataclasses.fields(given)
        if f.name != "data" and getattr(given, f.name) is not None
    ]
    if twice:
        raise RunConfigError(
            f"{', '.join(twice)} given beside a RunSpec: give them in the RunSpec "
            "(dataclasses.replace(spec, ...))"
        )
    return whole


def checked_options(on_invalid: str | None, repeats: int | None) -> tuple[OnInvalid, int]:
    """`on_invalid` and `repeats` as given to :func:`aevaluate` or :func:`rageval.estimate`,
    checked, with their defaults for None."""
    if on_invalid not in (None, "raise", "skip"):
        raise RunConfigError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    repeats = 1 if repeats is None else repeats
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise RunConfigError(f"repeats must be a whole number >= 1, got {repeats!r}")
    return ("skip" if on_invalid == "skip" else "raise"), repeats


def load_data(spec: RunSpec) -> LoadedData:
    """The rows of `spec`'s data, its column map applied; InvalidDataError when the input as a
    whole cannot be read (a bad row is reported with the cells it stops: :func:`cell_problems`)."""
    loaded = load_samples(spec.data, column_map=spec.column_map, language=spec.language)
    whole_input = [p for p in loaded.problems if p.row is None]
    if whole_input:
        raise InvalidDataError(whole_input, source=loaded.source)
    return loaded


def missing_keys(judges: Sequence[Judge]) -> list[str]:
    """Why each of `judges` would be refused for want of an API key (none: every one has what
    its endpoint needs). A Judge built in Python (llm_factory) is checked as the command
    line's is: without a key for OpenAI's own endpoint it is a configuration error, not a
    probe that "cannot reach"; a client object given in Python holds its own key."""
    found = []
    for one in judges:
        if one.probe_key() is not None:
            try:
                check_key(one.describe(), what="judge")
            except RunConfigError as e:
                found.append(str(e))
    return list(dict.fromkeys(found))


def _check_model_files(
    metrics: Sequence[Metric], embedder: Embeddings | None, judge: Judge | None
) -> None:
    """The local embedding model's files, where a judge metric of the run embeds with it:
    found before the first judge request, else each of its cells would fail for want of them
    after its requests were paid for (a metric that only embeds, semantic_similarity, costs
    nothing: its cells say why they have no value, as before)."""
    from rageval.embeddings import LocalEmbeddings, ModelFilesError

    for metric in metrics:
        own = metric.embeddings or embedder
        paid = metric.needs_llm and (metric.llm or judge) is not None
        if metric.needs_embeddings and paid and isinstance(own, LocalEmbeddings):
            try:
                own.find_files()
            except ModelFilesError as e:
                raise RunConfigError(f"{metric.name} embeds with the local model: {e}") from None


def prepare(spec: RunSpec, *, resume: bool = False, keys: bool = True) -> Prepared:
    """Load and validate the data, make the metrics, the judges, the embeddings and the plans
    of a checked `spec`: every check done before the first request, the same for
    :func:`aevaluate` and the dry run (:func:`rageval.estimate`, which sends nothing and so
    needs no key: `keys` False skips :func:`missing_keys`). Nothing is sent."""
    from rageval.embeddings import Embeddings as _Embeddings

    metrics, llm, embeddings = spec.metrics, spec.llm, spec.embeddings
    on_invalid, repeats = checked_options(spec.on_invalid, spec.repeats)
    loaded = load_data(spec)
    ids = sample_ids(loaded.samples)
    metric_objs = resolve_metrics(metrics, loaded, spec.metric_params)
    problems, invalid_rows, skipped = cell_problems(loaded, ids, metric_objs)
    if problems and on_invalid == "raise":
        raise InvalidDataError(problems, source=loaded.source)
    # resuming, no judge by now means the run had none (not one from the environment)
    judges = [] if llm is None and resume else run_judges(llm)
    judge = judges[0] if judges else None
    missing = missing_keys([*judges, *(m.llm for m in metric_objs if m.llm is not None)])
    if keys and missing:
        raise RunConfigError(missing[0])
    needs_embeddings = any(
        m.needs_embeddings and m.embeddings is None and (not m.needs_llm or m.llm or judge)
        for m in metric_objs
    )
    embedder: Embeddings | None
    if isinstance(embeddings, str):
        embedder = embeddings_from_spec(embeddings)
    elif embeddings is None and needs_embeddings:
        embedder = embeddings_from_spec("local")
    elif embeddings is None or isinstance(embeddings, _Embeddings):
        embedder = embeddings
    else:
        raise RunConfigError(
            "embeddings must be an Embeddings object (embedding_factory(...)), 'local' or "
            f"'openai:MODEL', got {embeddings!r}"
        )
    _check_model_files(metric_objs, embedder, judge)
    panel = llm if isinstance(llm, Panel) else None
    plans = make_plans(
        metric_objs,
        judges,
        embedder,
        invalid_rows,
        skipped,
        repeats=repeats,
        panel=panel.names if panel is not None else (),
    )
    left_out = left_out_of_default(loaded) if metrics is None else {}
    return Prepared(
        loaded, list(ids), metric_objs, judges, embedder, plans, left_out, panel, missing
    )
