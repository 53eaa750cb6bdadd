"""What every metric shares: the result type, the scoring context, the base class, the registry.

A metric module defines a `Metric` subclass with its required fields, prompt(s), pydantic
response model(s) and a pure scoring function. Everything that touches a model goes through the
`ScoringContext`, so retries, limits, caching and usage stay in the judge layer.
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import enum
import functools
import hashlib
import inspect
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from rageval._sync import run_sync
from rageval.errors import CauseKind, RagevalError
from rageval.samples import Sample, missing_fields

if TYPE_CHECKING:
    import numpy as np

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.metrics._statements import SharedStatements
    from rageval.metrics.authoring import PlannedRequest

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
    evidence: dict[str, Any] = Field(default_factory=dict)

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
        return cls(value=float(value), status="ok", reason=reason, evidence=evidence)

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
            evidence=evidence,
        )

    @classmethod
    def skipped(cls, cause: str, *, cause_kind: CauseKind) -> MetricResult:
        return cls(status="skipped", cause=cause, cause_kind=cause_kind)

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


class NoJudgeError(RagevalError, RuntimeError):
    """A metric that needs an LLM judge was asked to score without one."""


@dataclass
class ScoringContext:
    """Everything a metric may touch while scoring one sample."""

    judge: Judge | None
    embeddings: Embeddings | None
    statements: SharedStatements
    tags: dict[str, str] = field(default_factory=dict)

    def for_metric(self, name: str) -> ScoringContext:
        return replace(self, tags={**self.tags, "metric": name})

    def require_judge(self) -> Judge:
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
        """One validated reply (see :meth:`rageval.judge.Judge.ask`)."""
        reply = await self.require_judge().ask(
            messages,
            response_model,
            tags=self.tags,
            check=check,
            max_reasks=max_reasks,
            max_tokens=max_tokens,
        )
        return reply.value

    async def ask_n(
        self,
        messages: list[dict[str, str]],
        response_model: type[M],
        n: int,
        *,
        temperature: float,
        max_tokens: int | None = None,
    ) -> list[M]:
        """``n`` independent validated replies (see :meth:`rageval.judge.Judge.ask_n`)."""
        replies = await self.require_judge().ask_n(
            messages,
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
    evidence = {**result.evidence, "truncated": dict(cut)}
    return result.model_copy(update={"reason": reason, "evidence": evidence})


# ---- configuration: captured from the constructor's arguments ------------------------------

#: constructor arguments that are not configuration: the judge and the embeddings are recorded
#: (and keyed on) separately
_NOT_CONFIG = frozenset({"llm", "embeddings"})
#: how params() shows an argument whose value cannot be recorded faithfully
UNCAPTURED = "$uncaptured"


@functools.cache
def source_digest(cls: type) -> str | None:
    """What stands for a class's code in cache keys: "" for rageval's own (covered by the
    digest of rageval's source), the sha256 of its source file for a class defined elsewhere,
    None when that file cannot be read (a class typed into a notebook or REPL)."""
    if cls.__module__.split(".")[0] == "rageval":
        return ""
    try:
        path = inspect.getsourcefile(cls)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except (OSError, TypeError):
        return None


@dataclass
class _Captured:
    """A constructor argument in JSON form, the code digests of the classes it names, and why
    it cannot be recorded faithfully (None when it can)."""

    value: Any
    sources: dict[str, str] = field(default_factory=dict)
    problem: str | None = None


def capture(value: Any) -> _Captured:
    """`value` as plain JSON data that says exactly what it is, or why it cannot be: data
    (numbers, strings, lists, dicts, enums, paths, pydantic models and dataclass instances) is
    recorded as itself; a class as ``"module:QualName"`` plus the digest of its source; a
    function, a lambda or any other object cannot be recorded faithfully (its repr does not
    say what it does), which makes the metric uncacheable."""
    out = _Captured(None)
    out.value = _capture(value, out, 0)
    return out


def _capture(value: Any, out: _Captured, depth: int) -> Any:
    if depth > 32:
        out.problem = out.problem or "a value nested too deep"
        return {UNCAPTURED: "nested too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _capture(value.value, out, depth + 1)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_capture(v, out, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_capture(v, out, depth + 1) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, Mapping):
        return {str(k): _capture(v, out, depth + 1) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return _capture(value.model_dump(mode="json"), out, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _capture(dataclasses.asdict(value), out, depth + 1)
    if isinstance(value, type):
        path = f"{value.__module__}:{value.__qualname__}"
        digest = source_digest(value)
        if digest is None:
            out.problem = out.problem or f"class {path} has no readable source file"
        else:
            out.sources[path] = digest
        return path
    kind = type(value).__name__
    out.problem = out.problem or f"a {kind} ({value!r:.60}) cannot be recorded faithfully"
    return {UNCAPTURED: kind}


def _capturing(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a metric's ``__init__`` so that the arguments it is called with (its defaults
    included) are recorded as the metric's configuration. The outermost constructor's values
    win; the ``**kw`` a subclass passes up is bound again by its parent's constructor."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self: Metric, *args: Any, **kwargs: Any) -> None:
        config: dict[str, _Captured] = self.__dict__.setdefault("_config", {})
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None  # the constructor raises the same TypeError, with its own message
        if bound is not None:
            bound.apply_defaults()
            for name, value in list(bound.arguments.items())[1:]:
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    for key, item in value.items():
                        if key not in _NOT_CONFIG and key not in config:
                            config[key] = capture(item)
                elif name not in _NOT_CONFIG and name not in config:
                    config[name] = capture(
                        list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
                    )
        init(self, *args, **kwargs)

    wrapper._captures_config = True  # type: ignore[attr-defined]
    return wrapper


class Metric(abc.ABC):
    """Base class of every metric. Subclasses set the class variables and implement `_score`.

    A metric's configuration is its constructor's arguments, recorded automatically when it is
    built (see :meth:`params`): a subclass with its own ``__init__(self, *, cutoff=0.5, **kw)``
    needs no ``params()`` of its own, and kept cells, resume checks and run manifests see
    `cutoff`. An argument whose value cannot be recorded faithfully (a function, a lambda, an
    arbitrary object) makes the metric's cells uncacheable (:attr:`uncaptured`).
    """

    name: ClassVar[str]
    required_fields: ClassVar[tuple[str, ...]]
    needs_llm: ClassVar[bool] = False
    needs_embeddings: ClassVar[bool] = False
    #: statement lists this metric reads ("response", "reference"); extracted once per sample
    statement_needs: ClassVar[frozenset[str]] = frozenset()
    summary: ClassVar[str] = ""
    #: part of the default selection when the user names no metrics
    in_default_run: ClassVar[bool] = True

    _config: dict[str, _Captured]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_captures_config", False):
            cls.__init__ = _capturing(init)  # type: ignore[method-assign]

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

    def input_problems(self, sample: Sample) -> list[tuple[str, str]]:
        """(field, message) for each reason this sample cannot be scored; checked before any call."""
        return [
            (f, "missing (required by this metric)")
            for f in missing_fields(sample, self.required_fields)
        ]

    @abc.abstractmethod
    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult: ...

    def planned_requests(self, sample: Sample) -> Sequence[PlannedRequest] | None:
        """The judge requests scoring `sample` takes, built with the metric's own prompt
        builders (:class:`~rageval.metrics.authoring.PlannedRequest`): what the dry run
        (:func:`rageval.estimate`) and the budget (``max_cost``) count. None when the metric
        does not say (a metric that needs no judge makes none); rageval's metrics declare
        theirs next to their scoring code."""
        return None if self.needs_llm else []

    async def score_sample(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """Score one validated sample. A judge call that failed for good becomes a
        `not_measured` cell with its cause; fatal judge errors propagate and stop the run."""
        from rageval.judge import JudgeCallFailed

        try:
            return await self._score(sample, ctx)
        except JudgeCallFailed as e:
            return MetricResult.not_measured(f"judge call failed: {e.cause}", cause_kind=e.kind)

    # ---- the seeds' scorer API ---------------------------------------------------------

    async def single_turn_ascore(self, sample: Sample | Mapping[str, Any]) -> MetricResult:
        from rageval.metrics._statements import SharedStatements

        if not isinstance(sample, Sample):
            sample = Sample.model_validate(dict(sample))
        problems = self.input_problems(sample)
        if problems:
            raise ValueError(
                f"{self.name} cannot score this sample: "
                + "; ".join(f"field {f!r}: {m}" for f, m in problems)
            )
        judge = self.llm
        ctx = ScoringContext(
            judge=judge,
            embeddings=self.embeddings,
            statements=SharedStatements(sample, judge),
            tags={"metric": self.name, "sample": sample.id or "-"},
        )
        return await self.score_sample(sample, ctx)

    def single_turn_score(self, sample: Sample | Mapping[str, Any]) -> MetricResult:
        return run_sync(self.single_turn_ascore(sample))

    async def ascore(self, **fields: Any) -> MetricResult:
        return await self.single_turn_ascore(Sample.model_validate(fields))

    def score(self, **fields: Any) -> MetricResult:
        return run_sync(self.ascore(**fields))


Metric.__init__ = _capturing(Metric.__init__)  # type: ignore[method-assign]


# ---- registry: names used by the CLI and run logs to re-create metrics -------------------

_REGISTRY: dict[str, type[Metric]] = {}
MetricT = TypeVar("MetricT", bound=type[Metric])


def register(cls: MetricT) -> MetricT:
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"metric name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def registered_metrics() -> dict[str, type[Metric]]:
    import rageval.metrics  # noqa: F401  (importing the package registers every metric)

    return dict(sorted(_REGISTRY.items()))


def metric_class(name: str) -> type[Metric]:
    metrics = registered_metrics()
    if name not in metrics:
        close = difflib.get_close_matches(name, list(metrics), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise KeyError(f"unknown metric {name!r}{hint}; known: {', '.join(metrics)}")
    return metrics[name]


def create_metric(name: str, params: Mapping[str, Any] | None = None) -> Metric:
    return metric_class(name)(**dict(params or {}))
