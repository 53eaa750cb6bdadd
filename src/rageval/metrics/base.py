"""What every metric shares: the result type, the scoring context, the base class, the registry.

A metric module defines a `Metric` subclass with its required fields, prompt(s), pydantic
response model(s) and a pure scoring function. Everything that touches a model goes through the
`ScoringContext`, so retries, limits, caching and usage stay in the judge layer.
"""

from __future__ import annotations

import abc
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from rageval._sync import run_sync
from rageval.errors import RagevalError
from rageval.samples import Sample, missing_fields

if TYPE_CHECKING:
    import numpy as np

    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.metrics._statements import SharedStatements

CellStatus = Literal["ok", "not_measured", "skipped"]
M = TypeVar("M", bound=BaseModel)


class MetricResult(BaseModel):
    """The outcome of one metric on one sample: a finite value, or an explicit status and cause.

    Never NaN: a metric that cannot be computed says so (`not_measured`), and a cell whose
    sample lacks a required field is `skipped`.
    """

    value: float | None = None
    status: CellStatus = "ok"
    cause: str | None = None
    reason: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> MetricResult:
        if self.status == "ok":
            if self.value is None or not math.isfinite(self.value):
                raise ValueError(f"an ok result needs a finite value, got {self.value!r}")
        elif self.value is not None or not self.cause:
            raise ValueError(f"a {self.status} result has no value and must state its cause")
        return self

    @classmethod
    def ok(cls, value: float, reason: str | None = None, **evidence: Any) -> MetricResult:
        return cls(value=float(value), status="ok", reason=reason, evidence=evidence)

    @classmethod
    def not_measured(cls, cause: str, reason: str | None = None, **evidence: Any) -> MetricResult:
        return cls(status="not_measured", cause=cause, reason=reason, evidence=evidence)

    @classmethod
    def skipped(cls, cause: str) -> MetricResult:
        return cls(status="skipped", cause=cause)

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
    ) -> M:
        reply = await self.require_judge().ask(
            messages, response_model, tags=self.tags, check=check, max_reasks=max_reasks
        )
        return reply.value

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.embeddings is None:
            from rageval.embeddings import embedding_factory

            self.embeddings = embedding_factory("local")
        return await self.embeddings.aembed_texts(list(texts))


class Metric(abc.ABC):
    """Base class of every metric. Subclasses set the class variables and implement `_score`."""

    name: ClassVar[str]
    required_fields: ClassVar[tuple[str, ...]]
    needs_llm: ClassVar[bool] = False
    needs_embeddings: ClassVar[bool] = False
    #: statement lists this metric reads ("response", "reference"); extracted once per sample
    statement_needs: ClassVar[frozenset[str]] = frozenset()
    summary: ClassVar[str] = ""
    #: part of the default selection when the user names no metrics
    in_default_run: ClassVar[bool] = True

    def __init__(self, *, llm: Judge | None = None, embeddings: Embeddings | None = None) -> None:
        self.llm = llm
        self.embeddings = embeddings

    def params(self) -> dict[str, Any]:
        """Constructor parameters that, with `name`, re-create this metric (run manifests)."""
        return {}

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

    async def score_sample(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """Score one validated sample. A judge call that failed for good becomes a
        `not_measured` cell with its cause; fatal judge errors propagate and stop the run."""
        from rageval.judge import JudgeCallFailed

        try:
            return await self._score(sample, ctx)
        except JudgeCallFailed as e:
            return MetricResult.not_measured(f"judge call failed: {e.cause}")

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
            statements=SharedStatements(sample, judge, self.statement_needs),
            tags={"metric": self.name, "sample": sample.id or "-"},
        )
        return await self.score_sample(sample, ctx)

    def single_turn_score(self, sample: Sample | Mapping[str, Any]) -> MetricResult:
        return run_sync(self.single_turn_ascore(sample))

    async def ascore(self, **fields: Any) -> MetricResult:
        return await self.single_turn_ascore(Sample.model_validate(fields))

    def score(self, **fields: Any) -> MetricResult:
        return run_sync(self.ascore(**fields))


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
