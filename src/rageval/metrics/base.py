"""What every metric shares: the result type, the scoring context, the base class, the registry.

A metric module defines a `Metric` subclass with its required fields, prompt(s), pydantic
response model(s) and a pure scoring function. Everything that touches a model goes through the
`ScoringContext`, so retries, limits, caching and usage stay in the judge layer.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import inspect
import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, Field, model_validator

from rageval._sync import run_sync
from rageval.errors import CauseKind, NoJudgeError
from rageval.metrics._capture import Captured, capture, capturing
from rageval.metrics._names import unknown_metric
from rageval.metrics._prompting import in_language
from rageval.metrics.evidence import Evidence, EvidenceBase, FreeformEvidence, scoring_notes
from rageval.samples import Conversation, Sample, missing_fields, sample_language, sample_of

if TYPE_CHECKING:
    import numpy as np

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, JudgeReply, ReplyScoring
    from rageval.metrics._prompting import PlannedRequest
    from rageval.metrics._statements import SharedStatements

CellStatus = Literal["ok", "not_measured", "skipped"]
M = TypeVar("M", bound=BaseModel)


class MetricResult(BaseModel):
    """The outcome of one metric on one sample: a finite value, or an explicit status and cause.

    Never NaN: a metric that cannot be computed says so (`not_measured`), and a cell whose
    sample lacks a required field is `skipped`. Such a cell carries the human-readable
    `cause` and its stable code `cause_kind` (see :data:`rageval.errors.CAUSE_KINDS`).
    """

    value: float | None = None
    status: CellStatus = "ok"
    cause: str | None = None
    cause_kind: CauseKind | None = None
    reason: str | None = None
    #: why the value is what it is: one of the typed kinds of :mod:`rageval.metrics.evidence`
    #: (a plain dict is read as free-form evidence)
    evidence: Evidence = Field(default_factory=FreeformEvidence)

    #: whether a result without a value must name its cause's kind: always for a metric's
    #: result; a cell read back from a run log written before kinds existed has none
    kind_required: ClassVar[bool] = True

    @model_validator(mode="after")
    def _consistent(self) -> MetricResult:
        if self.status == "ok":
            if self.value is None or not math.isfinite(self.value):
                raise ValueError(f"an ok result needs a finite value, got {self.value!r}")
            if self.cause_kind is not None:
                raise ValueError("an ok result has no cause_kind")
        elif self.value is not None or not self.cause:
            raise ValueError(f"a {self.status} result has no value and must state its cause")
        elif self.cause_kind is None and self.kind_required:
            raise ValueError(f"a {self.status} result must state the kind of its cause")
        return self

    @classmethod
    def ok(cls, value: float, reason: str | None = None, **evidence: Any) -> MetricResult:
        """A value, with free-form `evidence` (typed evidence: :meth:`with_evidence`)."""
        return cls(
            value=float(value),
            status="ok",
            reason=reason,
            evidence=FreeformEvidence.of(evidence),
        )

    @classmethod
    def not_measured(
        cls,
        cause: str,
        reason: str | None = None,
        *,
        cause_kind: CauseKind = "undefined",
        **evidence: Any,
    ) -> MetricResult:
        """The metric ran but has no value: by default because it is not defined for this
        sample (``undefined``); a failed judge call passes its own kind."""
        return cls(
            status="not_measured",
            cause=cause,
            cause_kind=cause_kind,
            reason=reason,
            evidence=FreeformEvidence.of(evidence),
        )

    @classmethod
    def skipped(cls, cause: str, *, cause_kind: CauseKind) -> MetricResult:
        return cls(status="skipped", cause=cause, cause_kind=cause_kind)

    def with_evidence(self, evidence: EvidenceBase) -> MetricResult:
        """This result with `evidence` (a typed kind of :mod:`rageval.metrics.evidence`)."""
        return self.model_copy(update={"evidence": evidence})

    @property
    def measured(self) -> bool:
        return self.status == "ok"

    def __float__(self) -> float:
        if self.value is None:
            raise ValueError(f"{self.status.replace('_', ' ')}: {self.cause}")
        return self.value

    def __str__(self) -> str:
        if self.value is not None:
            return str(round(self.value, 6))
        return f"{self.status.replace('_', ' ')}: {self.cause}"


@dataclass(frozen=True)
class BlankRule:
    """What a blank `field` makes of a metric's cell, decided before any model call: a value
    (0.0) with `reason` as its explanation, or not measured with `reason` as its cause when
    `value` is None. Text is blank when it is empty or whitespace; a list of texts (the
    contexts) when none of its texts is not blank (:func:`~rageval.metrics.authoring.nonblank`).
    Make one with :func:`zero_if_blank` or :func:`not_measured_if_blank`."""

    field: str
    reason: str
    value: float | None = None
    evidence: Mapping[str, Any] | EvidenceBase = dataclasses.field(default_factory=dict)

    def applies_to(self, sample: Sample) -> bool:
        found = getattr(sample, self.field)
        if isinstance(found, (list, tuple)):
            return not any(isinstance(t, str) and t.strip() for t in found)
        return not sample.text(self.field).strip()

    def result(self) -> MetricResult:
        if self.value is None:
            return MetricResult.not_measured(self.reason)
        if isinstance(self.evidence, EvidenceBase):  # immutable: shared safely
            return MetricResult.ok(self.value, reason=self.reason).with_evidence(self.evidence)
        return MetricResult.ok(self.value, reason=self.reason, **copy.deepcopy(dict(self.evidence)))


def zero_if_blank(field: str, reason: str, **evidence: Any) -> BlankRule:
    """A blank `field` scores 0.0 with `reason` (and `evidence`): e.g. an empty response
    answers nothing."""
    return BlankRule(field, reason, 0.0, evidence)


def not_measured_if_blank(field: str, cause: str) -> BlankRule:
    """A blank `field` leaves the metric undefined (not measured, kind ``undefined``): e.g. an
    empty reference gives nothing to compare with."""
    return BlankRule(field, cause)


@dataclass
class ScoringContext:
    """Everything a metric may touch while scoring one sample (given to :meth:`Metric.measure`).

    :meth:`ask` and :meth:`ask_n` put chat messages to the judge and return validated replies
    (the response model's JSON schema is the contract, see :mod:`rageval.metrics.authoring`);
    :meth:`embed` returns embedding vectors (the run's model, by default the local one);
    ``await ctx.statements.get("response")`` (or ``"reference"``) is the text's list of atomic
    statements, extracted once per sample and shared by every metric that reads it (a metric
    that reads it declares ``statement_needs``). Requests are tagged with the metric and the
    sample, so usage is booked per metric; retries, limits and the request cache are the
    judge's.
    """

    judge: Judge | None
    embeddings: Embeddings | None
    statements: SharedStatements
    tags: dict[str, str] = field(default_factory=dict)
    #: how the choices of each reply with verdicts or ratings the metric read were scored
    #: (:meth:`ask_scored`; :meth:`ask` reads sampled values): the cell's ``scoring`` note
    scorings: list[ReplyScoring] = field(default_factory=list)

    @classmethod
    def for_sample(
        cls,
        sample: Sample,
        judge: Judge | None,
        embeddings: Embeddings | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> ScoringContext:
        """A context of its own for scoring `sample` outside an evaluation (``score()``, a
        metric's own evaluator API): the statements are extracted by `judge` when read."""
        from rageval.metrics._statements import SharedStatements

        return cls(judge, embeddings, SharedStatements(sample, judge), dict(tags or {}))

    def for_metric(self, name: str) -> ScoringContext:
        return replace(self, tags={**self.tags, "metric": name}, scorings=[])

    def require_judge(self) -> Judge:
        """The judge, or :class:`NoJudgeError` (the cell is skipped with a hint) without one."""
        if self.judge is None:
            metric = self.tags.get("metric", "this metric")
            raise NoJudgeError(
                f"{metric} needs an LLM judge: pass llm=llm_factory('MODEL', client=...) "
                "or set RAGEVAL_LLM (and OPENAI_BASE_URL / OPENAI_API_KEY)"
            )
        return self.judge

    async def ask(
        self,
        messages: list[dict[str, str]],
        response_model: type[M],
        *,
        check: Callable[[M], None] | None = None,
        max_reasks: int | None = None,
        max_tokens: int | None = None,
    ) -> M:
        """The judge's reply to `messages`, validated against `response_model`: a reply that
        does not validate (or fails `check`, which raises ``ValueError``) is re-asked with the
        error shown, up to `max_reasks`; `max_tokens` asks for a larger reply budget than the
        judge's own. Raises ``JudgeCallFailed`` when no usable reply came: let it propagate
        (the cell is not measured, with the cause). See :meth:`rageval.judge.Judge.ask`."""
        reply = await self._reply(messages, response_model, check, max_reasks, max_tokens, False)
        return reply.value

    async def ask_scored(
        self,
        messages: list[dict[str, str]],
        response_model: type[M],
        *,
        check: Callable[[M], None] | None = None,
        max_reasks: int | None = None,
        max_tokens: int | None = None,
    ) -> JudgeReply[M]:
        """:meth:`ask`, with how the reply's choices were scored: ``reply.value`` is the
        validated reply, ``reply.scoring.probability("s1", "supported")`` a verdict's
        probability of being true and ``reply.scoring.expected("rating")`` a rating's expected
        value, read from the token log-probabilities where the judge's ``scoring`` asked for
        them and the endpoint gave them, else from the sampled values
        (docs/judge-probabilities.md). The scoring is recorded for the cell's evidence."""
        return await self._reply(messages, response_model, check, max_reasks, max_tokens, True)

    async def _reply(
        self,
        messages: list[dict[str, str]],
        response_model: type[M],
        check: Callable[[M], None] | None,
        max_reasks: int | None,
        max_tokens: int | None,
        scored: bool,
    ) -> JudgeReply[M]:
        """The judge's reply, its scoring recorded for the cell: the reply's, or (not `scored`:
        the metric reads the values written) sampled."""
        reply = await self.require_judge().ask(
            in_language(messages, self.statements.language),
            response_model,
            tags=self.tags,
            check=check,
            max_reasks=max_reasks,
            max_tokens=max_tokens,
        )
        if reply.scoring.choices:
            self.scorings.append(reply.scoring if scored else type(reply.scoring)("sampled"))
        return reply

    async def ask_n(
        self,
        messages: list[dict[str, str]],
        response_model: type[M],
        n: int,
        *,
        temperature: float,
        max_tokens: int | None = None,
    ) -> list[M]:
        """``n`` independent validated replies at `temperature` (one request with ``n`` where
        the endpoint honours it, else one per reply); see :meth:`rageval.judge.Judge.ask_n`."""
        replies = await self.require_judge().ask_n(
            in_language(messages, self.statements.language),
            response_model,
            n,
            tags=self.tags,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        return replies.values

    def truncated(self, named: Mapping[str, str]) -> dict[str, int]:
        """Which of the named texts the embedding model cut (reading only its first
        ``max_tokens`` tokens), each with its whole length in tokens: a metric puts this in
        its evidence as ``truncated`` (see :func:`note_truncation`)."""
        if self.embeddings is None:
            return {}
        cut = self.embeddings.truncated(list(named.values()))
        return {name: cut[text] for name, text in named.items() if text in cut}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text, as rows of a float32 array (compare them with
        :func:`rageval.embeddings.cosine`); with no embeddings configured, the local model."""
        if self.embeddings is None:
            from rageval.embeddings import embedding_factory

            self.embeddings = embedding_factory("local")
        return await self.embeddings.aembed_texts(list(texts))


def note_truncation(
    result: MetricResult, cut: Mapping[str, int], limit: int | None
) -> MetricResult:
    """`result` with evidence ``truncated`` ({name: tokens}) and a note in its reason when the
    embedding model read only the first `limit` tokens of some texts."""
    if not cut or not result.measured:
        return result
    which = ", ".join(f"{name} ({n} tokens)" for name, n in cut.items())
    note = f"embedded from its first {limit} tokens only: {which}"
    reason = f"{result.reason}; {note}" if result.reason else note
    evidence = result.evidence.noted(truncated=dict(cut))
    return result.model_copy(update={"reason": reason, "evidence": evidence})


class Metric(abc.ABC):
    """Base class of every metric (docs/writing-metrics.md shows two, tested as written).

    A subclass sets `name` and `required_fields` (and `needs_llm`, `needs_embeddings`,
    `statement_needs` when it uses them), implements :meth:`measure`, and is decorated with
    :func:`register` to be usable by name (``evaluate(metrics=["name"])``, ``rageval evaluate
    -m name``, re-created from a run log). Everything that touches a model goes through the
    :class:`ScoringContext` given to :meth:`measure`; the prompt and response-model helpers are
    in :mod:`rageval.metrics.authoring`.

    A metric's configuration is its constructor's arguments, recorded automatically when it is
    built (see :meth:`params`): a subclass with its own ``__init__(self, *, cutoff=0.5, **kw)``
    needs no ``params()`` of its own, and kept cells, resume checks and run manifests see
    `cutoff`. An argument whose value cannot be recorded faithfully (a function, a lambda, an
    arbitrary object) makes the metric's cells uncacheable (:attr:`uncaptured`).
    """

    #: what the metric reports under (columns, run log, report); the registry name of its
    #: class unless an instance is given its own (e.g. a customised ContextEvaluation)
    name: str
    required_fields: ClassVar[tuple[str, ...]]
    #: columns of the data the metric needs beside the sample's fields (kept in its metadata,
    #: checked by the metric's own :meth:`input_problems`): listed with the required fields
    required_columns: ClassVar[tuple[str, ...]] = ()
    needs_llm: ClassVar[bool] = False
    needs_embeddings: ClassVar[bool] = False
    #: statement lists this metric reads ("response", "reference"); extracted once per sample
    statement_needs: ClassVar[frozenset[str]] = frozenset()
    summary: ClassVar[str] = ""
    #: part of the default selection when the user names no metrics
    in_default_run: ClassVar[bool] = True
    #: the documented range of the metric's values (low, high), or None when not declared;
    #: a --fail-under threshold outside it is refused (it could never pass, or never fail)
    value_range: ClassVar[tuple[float, float] | None] = None
    #: what blank inputs make of a cell, checked in order before :meth:`measure` (and before
    #: :meth:`planned_requests`: such a cell asks nothing); see :class:`BlankRule`
    blank_rules: ClassVar[tuple[BlankRule, ...]] = ()
    #: whether the metric takes a cutoff `k`, named ``<name>_at_<k>`` (ndcg_at_10: ndcg, k=10)
    takes_cutoff: ClassVar[bool] = False
    #: other names the registry knows the metric by (ragas' names for it)
    aliases: ClassVar[tuple[str, ...]] = ()

    _config: dict[str, Captured]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        legacy = cls.__dict__.get("_score")
        if legacy is not None and "measure" not in cls.__dict__:
            # a subclass written before the hook was public: its _score is its measure
            warnings.warn(
                f"{cls.__qualname__} defines _score(); the scoring hook is now the public "
                "measure(sample, ctx): rename the method (_score is deprecated)",
                DeprecationWarning,
                stacklevel=3,  # the class statement (this runs under ABCMeta.__new__)
            )
            cls.measure = legacy  # type: ignore[method-assign]
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_captures_config", False):
            cls.__init__ = capturing(init)  # type: ignore[method-assign]

    def __init__(self, *, llm: Judge | None = None, embeddings: Embeddings | None = None) -> None:
        self.llm = llm
        self.embeddings = embeddings

    def params(self) -> dict[str, Any]:
        """The constructor arguments (defaults included) as JSON data: with `name`, they
        re-create this metric (run manifests, ``create_metric``). Recorded automatically."""
        return {name: c.value for name, c in self._config.items()}

    def record_config(self, name: str, value: Any) -> None:
        """Record what the metric actually uses for argument `name`, when that says more than
        the argument did (e.g. the class a "module:QualName" string resolved to)."""
        self._config[name] = capture(value)

    @property
    def uncaptured(self) -> dict[str, str]:
        """Arguments whose value cannot be recorded faithfully, with why: such a metric's
        cells are never kept across runs, and a run using it cannot be resumed."""
        return {n: c.problem for n, c in self._config.items() if c.problem is not None}

    def config_identity(self) -> dict[str, Any] | None:
        """Everything about this metric's configuration that its values depend on — the
        parameters and the code of the classes they name — or None when it cannot be recorded
        faithfully (then nothing may be cached under it)."""
        if self.uncaptured:
            return None
        sources: dict[str, str] = {}
        for captured in self._config.values():
            sources.update(captured.sources)
        return {"params": self.params(), "sources": dict(sorted(sources.items()))}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    @property
    def scores_conversations(self) -> bool:
        """Whether this metric scores conversations rather than single-turn samples: each
        refuses the other kind of row (see :func:`scores_conversations`)."""
        return scores_conversations(type(self))

    def input_problems(self, sample: Sample) -> list[tuple[str, str]]:
        """(field, message) for each reason this sample cannot be scored; checked before any
        call. A conversation is refused by a metric that scores single-turn samples, and a
        single-turn sample by a metric that scores conversations."""
        if isinstance(sample, Conversation) and not self.scores_conversations:
            return [("turns", _conversation_refused(self.name))]
        return [
            (f, _missing_message(self.name, f))
            for f in missing_fields(sample, self.required_fields)
        ]

    @abc.abstractmethod
    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """This metric on one sample: the hook every metric implements.

        `sample` has every field in `required_fields` (checked by :meth:`input_problems` for
        every row before the first model call) and none of the blank fields `blank_rules`
        rule on; any other blank text is the metric's to rule on. `ctx` reaches the judge (:meth:`ScoringContext.ask`,
        :meth:`~ScoringContext.ask_n`), the embeddings (:meth:`~ScoringContext.embed`) and
        the work shared per sample (``ctx.statements``); retries, limits, caching and usage
        accounting happen there, never in the metric.

        Return ``MetricResult.ok(value, reason=..., **evidence)``, or
        ``MetricResult.not_measured(cause)`` when the value is not defined for this sample
        (never NaN, never a 0 in disguise). Let judge errors propagate: a call that gave no
        usable reply becomes a not-measured cell with its cause and kind
        (:meth:`score_sample`), a fatal one stops the run. Any other exception is raised by
        ``score()``; in an evaluation it becomes a not-measured cell of kind ``metric_error``.
        """

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """Deprecated name of :meth:`measure`, kept for subclasses written before it: their
        ``super()._score(...)`` reaches their parent's :meth:`measure`."""
        # The deepest class that defines _score is the one whose super() call got here.
        owner = next(
            (c for c in reversed(type(self).__mro__) if c is not Metric and "_score" in vars(c)),
            None,
        )
        if owner is None:
            return await self.measure(sample, ctx)
        parent: Metric = super(owner, self)  # type: ignore[assignment]
        return await parent.measure(sample, ctx)

    def planned_requests(self, sample: Sample) -> Sequence[PlannedRequest] | None:
        """The judge requests scoring `sample` takes, built with the metric's own prompt
        builders (:class:`~rageval.metrics.authoring.PlannedRequest`): what the dry run
        (:func:`rageval.estimate`) and the budget (``max_cost``) count. None when the metric
        does not say (a metric that needs no judge makes none); rageval's metrics declare
        theirs next to their scoring code. Asked, like :meth:`measure`, only about samples
        `blank_rules` let through (:meth:`plan`)."""
        return None if self.needs_llm else []

    def blank_result(self, sample: Sample) -> MetricResult | None:
        """The cell the first of `blank_rules` that applies to `sample` makes, if any."""
        rule = next((r for r in self.blank_rules if r.applies_to(sample)), None)
        return None if rule is None else rule.result()

    def plan(self, sample: Sample) -> Sequence[PlannedRequest] | None:
        """The requests scoring `sample` takes: none when a blank rule decides the cell, else
        :meth:`planned_requests`."""
        if self.blank_result(sample) is not None:
            return []
        planned, language = self.planned_requests(sample), sample_language(sample)
        # the prompts state the row's language as ScoringContext's asks do
        return planned and [replace(r, messages=in_language(r.messages, language)) for r in planned]

    async def score_sample(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """Score one validated sample: the cell a blank rule decides, else :meth:`measure`. A
        judge call that failed for good becomes a `not_measured` cell with its cause; fatal
        judge errors propagate and stop the run."""
        from rageval.judge import JudgeCallFailed

        blank = self.blank_result(sample)
        if blank is not None:
            return blank
        try:
            result = await self.measure(sample, ctx)
        except JudgeCallFailed as e:
            result = MetricResult.not_measured(f"judge call failed: {e.cause}", cause_kind=e.kind)
        if not ctx.scorings:
            return result
        return result.with_evidence(result.evidence.noted(**scoring_notes(ctx.scorings)))

    # ---- the ragas-compatible scorer API ----------------------------------------------

    async def single_turn_ascore(self, sample: Sample | Mapping[str, Any]) -> MetricResult:
        """This metric on one sample (a :class:`~rageval.samples.Conversation` for a metric
        that scores conversations; a mapping with `turns` is read as one)."""
        if not isinstance(sample, Sample):
            sample = sample_of(dict(sample))
        problems = self.input_problems(sample)
        if problems:
            raise ValueError(
                f"{self.name} cannot score this sample: "
                + "; ".join(f"field {f!r}: {m}" for f, m in problems)
            )
        ctx = ScoringContext.for_sample(
            sample,
            self.llm,
            self.embeddings,
            tags={"metric": self.name, "sample": sample.id or "-"},
        )
        return await self.score_sample(sample, ctx)

    def single_turn_score(self, sample: Sample | Mapping[str, Any]) -> MetricResult:
        return run_sync(self.single_turn_ascore(sample))

    async def ascore(self, **fields: Any) -> MetricResult:
        return await self.single_turn_ascore(sample_of(fields))

    def score(self, **fields: Any) -> MetricResult:
        return run_sync(self.ascore(**fields))


Metric.__init__ = capturing(Metric.__init__)  # type: ignore[method-assign]


def scores_conversations(cls: type[Metric]) -> bool:
    """Whether a metric class scores conversations: it reads their `turns`."""
    return "turns" in cls.required_fields


def _conversation_refused(metric: str) -> str:
    """Why a metric of single-turn samples cannot score a conversation row, and what can."""
    can = sorted(n for n, c in _REGISTRY.items() if scores_conversations(c))
    instead = f"; the metrics that score conversations: {', '.join(can)}" if can else ""
    return (
        f"this row is a conversation (it has turns) and {metric} scores single-turn samples "
        f"(user_input, response, ...): it is not evaluated per turn{instead}"
    )


def _missing_message(metric: str, field: str) -> str:
    if field == "turns":
        return f"missing: this row is a single-turn sample and {metric} scores conversations"
    return "missing (required by this metric)"


# ---- registry: names used by the CLI and run logs to re-create metrics -------------------

_REGISTRY: dict[str, type[Metric]] = {}
#: another name of a registered metric -> its registry name
_ALIASES: dict[str, str] = {}
MetricT = TypeVar("MetricT", bound=type[Metric])
#: a metric with a cutoff, as users type it: ``precision_at_5``
_AT_K = re.compile(r"(?P<name>[a-z0-9_]+?)_at_(?P<k>[1-9][0-9]*)")


def register(cls: MetricT) -> MetricT:
    """Class decorator: make a metric usable by its `name` (``evaluate(metrics=["name"])``,
    ``rageval evaluate -m name``, ``create_metric``) and part of the default selection when
    ``in_default_run`` and the data has its fields. A class defined again under the same
    module and name (a notebook cell run twice, a reloaded module) replaces the first."""
    known = _REGISTRY.get(cls.name)
    if known is not None and known is not cls and _path(known) != _path(cls):
        raise ValueError(
            f"metric name {cls.name!r} registered twice ({_path(known)} and {_path(cls)})"
        )
    _REGISTRY[cls.name] = cls
    _ALIASES.update(dict.fromkeys(cls.aliases, cls.name))
    return cls


def named_metric(name: str) -> tuple[type[Metric], dict[str, Any]] | None:
    """The registered metric `name` stands for, with the arguments the name implies: a
    registry name or alias alone, ``ndcg_at_10`` the metric ndcg with ``k=10`` (for a metric
    that :attr:`~Metric.takes_cutoff`); None when it names none."""
    metrics = registered_metrics()
    name = _ALIASES.get(name, name)
    if name in metrics:
        return metrics[name], {}
    cut = _AT_K.fullmatch(name)
    found = metrics.get(cut["name"]) if cut else None
    if cut is None or found is None or not found.takes_cutoff:
        return None
    return found, {"k": int(cut["k"])}


def _path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def registered_metrics() -> dict[str, type[Metric]]:
    """Every registered metric class by name (rageval's own and those registered since)."""
    import rageval.metrics  # noqa: F401  (importing the package registers every metric)

    return dict(sorted(_REGISTRY.items()))


def metric_class(name: str) -> type[Metric]:
    """The metric class registered under `name` (KeyError naming close matches if none), or
    found at the import path ``"package.module:ClassName"`` -- how the command line
    (``-m my_metrics:ContextUtilization``) and a run's manifest name a metric of your own;
    importing it registers it."""
    if ":" in name:
        return _imported_metric(name)
    found = named_metric(name)
    if found is None:
        metrics = registered_metrics()
        cutoffs = {n for n, c in metrics.items() if c.takes_cutoff}
        raise unknown_metric(name, list(metrics), cutoffs, _ALIASES)
    return found[0]


def _imported_metric(path: str) -> type[Metric]:
    import importlib

    module_name, _, qualname = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise KeyError(f"cannot import metric {path!r}: {e}") from None
    if not (isinstance(found, type) and issubclass(found, Metric)) or inspect.isabstract(found):
        raise KeyError(f"{path!r} is not a metric class (a concrete Metric subclass)")
    if _REGISTRY.get(found.name) is not found:
        try:
            register(found)
        except ValueError as e:  # its name is another metric's
            raise KeyError(f"cannot use metric {path!r}: {e}") from None
    return found


def metric_path(cls: type[Metric]) -> str | None:
    """Where a run's manifest finds `cls` again: its ``"module:ClassName"`` when it is defined
    outside rageval in a module that can be imported again (not ``__main__``), else None."""
    module = cls.__module__
    if (
        module == "__main__"
        or module.partition(".")[0] == "rageval"
        or "<locals>" in cls.__qualname__
    ):
        return None
    return _path(cls)


def metric_import_root(cls: type[Metric]) -> str | None:
    """For a class :func:`metric_path` names, the directory its module was imported from: the
    ``sys.path`` entry under which ``import`` finds the module (``/project`` for
    ``/project/my_metrics.py``, and for ``/project/pkg/mod.py`` as ``pkg.mod``); None when the
    module has no file."""
    if metric_path(cls) is None:
        return None
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    depth = cls.__module__.count(".") + (2 if path.stem == "__init__" else 1)
    return str(path.parents[depth - 1])


def create_metric(name: str, params: Mapping[str, Any] | None = None) -> Metric:
    """The metric registered under `name`, built with `params` (what :meth:`Metric.params`
    recorded): with a run manifest's ``MetricSpec``,
    ``create_metric(spec.registered_name or spec.name, spec.params)``. A name that implies
    arguments (``ndcg_at_10``) is built with them; `params` may repeat them, not change them."""
    cls, given = metric_class(name), dict(params or {})
    found = named_metric(name) if ":" not in name else None
    for key, value in (found[1] if found else {}).items():
        if given.setdefault(key, value) != value:
            raise ValueError(f"{name} means {key}={value}, not {key}={given[key]!r}")
    return cls(**given)


# ---- a metric module stands for its metric -------------------------------------------------

#: what the user may attach to a metric module, ragas style (``faithfulness.llm = judge``)
_ATTACHABLE = ("llm", "embeddings")


def module_metric(module: ModuleType) -> type[Metric]:
    """The metric a module defines: the one concrete :class:`Metric` subclass whose code is in
    it (``rageval.metrics.faithfulness`` → ``Faithfulness``; an alias such as
    ``ContextEvaluation`` is the same class). TypeError for a module with none or several."""
    found = {
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, Metric)
        and v.__module__ == module.__name__
        and not inspect.isabstract(v)
    }
    if len(found) != 1:
        names = ", ".join(sorted(c.__name__ for c in found))
        what = f"several metrics ({names})" if found else "no metric"
        raise TypeError(
            f"module {module.__name__} defines {what}: pass a Metric instance, class or "
            "registry name instead"
        )
    return found.pop()


def module_default(module: ModuleType, params: Mapping[str, Any] | None = None) -> Metric:
    """The metric a metric module stands for: its class with default settings (or `params`,
    constructor arguments) and the ``llm`` / ``embeddings`` set on the module, if any. Any
    other setting made on the module
    (``answer_relevancy.strictness = 5``) would be ignored, so it is refused (ValueError):
    configuration goes through the class, ``AnswerRelevancy(strictness=5)``. A value equal to
    the default is let through (what monkeypatch leaves behind after undoing a change)."""
    cls = module_metric(module)
    attached = vars(module)
    metric = cls(**{k: attached[k] for k in _ATTACHABLE if k in attached}, **dict(params or {}))
    ignored = sorted(
        n
        for n, value in vars(metric).items()
        if n in attached
        and not n.startswith("_")
        and n not in _ATTACHABLE
        and attached[n] is not value
        and attached[n] != value
    )
    if ignored:
        settings = ", ".join(f"{n}=..." for n in ignored)
        raise ValueError(
            f"{', '.join(f'{module.__name__}.{n}' for n in ignored)} was set on the module, "
            f"which stands for {cls.__name__}() with default settings: use {cls.__name__}"
            f"({settings}) instead"
        )
    return metric


def forward_to_metric(module_name: str) -> Callable[[str], Any]:
    """A metric module's ``__getattr__`` (PEP 562): a public name the module lacks is read from
    :func:`module_default`, so ``faithfulness.score(...)``, ``faithfulness.name`` work as when
    the package bound an instance over the module's name."""

    def __getattr__(name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        metric = module_default(sys.modules[module_name])
        try:
            return getattr(metric, name)
        except AttributeError:
            raise AttributeError(
                f"module {module_name!r} has no attribute {name!r}, "
                f"nor has {type(metric).__name__}()"
            ) from None

    return __getattr__


#: what evaluate() takes as a metric
MetricLike: TypeAlias = "Metric | str | type[Metric] | ModuleType"


def as_metric(spec: MetricLike, params: Mapping[str, Mapping[str, Any]] | None = None) -> Metric:
    """A metric object for `spec`: an instance as it is; a registry name, a class or a metric
    module (:func:`module_default`) built here, with the constructor arguments `params` holds
    under its registry name, else with default settings. TypeError / ValueError / KeyError say
    what is wrong with `spec` or its arguments."""
    given = params or {}
    if isinstance(spec, Metric):
        return spec
    if isinstance(spec, str):
        return create_metric(spec, given.get(spec))
    if isinstance(spec, ModuleType):
        return module_default(spec, given.get(module_metric(spec).name))
    if isinstance(spec, type) and issubclass(spec, Metric):
        if inspect.isabstract(spec):
            raise TypeError(f"{spec.__name__} is an abstract metric class")
        return spec(**dict(given.get(spec.name) or {}))
    raise TypeError(
        "a metric is a Metric instance, a Metric class, a metric module "
        f"(rageval.metrics.faithfulness) or a registry name, got {type(spec).__name__}"
    )
