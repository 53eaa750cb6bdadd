"""answer_relevance: how well the response addresses the question, on three judged dimensions.

One judge call rates, each from 0 to 1 and regardless of factual accuracy:
topical_match (the answer's subject is what was asked), completeness (every part of the
question is covered) and conciseness (no irrelevant material), and explains them in
`reasoning`. We compute overall_score = (topical_match + completeness + conciseness) / 3;
the judge is never asked for it. Each rating is sent as an enum of 0.0, 0.1, …, 1.0; a judge
that ignores the schema may give any number from 0 to 1, anything else is re-asked.
Empty response: it addresses nothing and scores 0 without a request. Empty user_input: not
measured. The retrieved contexts are not shown to the default prompt (relevance is judged
on question and answer alone).
Where the judge scores by probabilities (docs/judge-probabilities.md), each dimension counts
its expected value over the tenths, Σ_v v·P(v), from the same reply's token
log-probabilities, in place of the value written: overall_score is the mean of those
(evidence ``expected_scores``; the fields keep the values written), and a dimension whose
probabilities could not be read counts its written value. A tenth is read digit by digit, so
an alternative first digit ``0`` (which begins every tenth below 1) cannot say which tenth it
leads to: beside a written 1.0 its probability is left out, and a written 1.0 stays near 1.
Judge requests: 1 (more only for re-asks).

Customising (an evaluator is a prompt plus a pydantic response model)::

    CustomRelevance = ContextEvaluation(prompt="...", response_model=RelevanceScore)
    result = CustomRelevance.grade(question=q, answer=a, context=c, client=openai.OpenAI())

A customised evaluator reports under its own name: `name=` (``ContextEvaluation(prompt=...,
response_model=..., name="tone")``), by default ``custom_relevance`` — never
``answer_relevance``, which is the built-in prompt and model. Its registry name stays
``answer_relevance``: with the recorded params (name included) it is re-created from a run log.
The custom prompt replaces our instructions; the question, the answer and the context (when
given: `context=` in grade, retrieved_contexts in an evaluation) are appended in tags. The
judge fills every field of the response model except `overall_score`; the *score fields* are
the model's fields annotated `float` other than `overall_score`; the schema sent makes each an
enum of 0.0, 0.1, …, 1.0 (a judge that ignores the schema may give any number from 0 to 1;
anything else is re-asked), and their mean is the metric's value and, if the model has the field, its
`overall_score`. A response model needs at least one score field.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from rageval import _env
from rageval._sync import synchronous
from rageval.errors import NoJudgeError
from rageval.metrics.authoring import (
    PlannedRequest,
    UnitScore,
    messages,
    not_measured_if_blank,
    numbered,
    tagged,
    zero_if_blank,
)
from rageval.metrics.base import Metric, MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import FreeformEvidence
from rageval.samples import Sample

if TYPE_CHECKING:
    import openai

    from rageval.judge import Judge

OVERALL = "overall_score"
#: the evidence key of the score fields' expected values (the judge scored by probabilities)
EXPECTED = "expected_scores"
#: what a customised evaluator (its own prompt or response model) reports under without name=
CUSTOM_NAME = "custom_relevance"
#: judge model used by grade() when it is given a raw openai client, no `model=` and no
#: RAGEVAL_LLM
FALLBACK_MODEL = "gpt-4o-mini"


class RelevanceScore(BaseModel):
    """The evaluator's result: three dimensions in [0, 1], their mean and the judge's reasoning."""

    overall_score: float = Field(description="mean of the three dimensions (computed, not judged)")
    topical_match: float = Field(description="0-1: the answer's subject matches what was asked")
    completeness: float = Field(description="0-1: the answer covers every part of the question")
    conciseness: float = Field(description="0-1: the answer is focused, with nothing irrelevant")
    reasoning: str = Field(description="a short explanation of the three ratings")


DEFAULT_PROMPT = (
    "Rate how well the answer addresses the question, whether or not it is factually correct, "
    "on three scales from 0 to 1: topical_match (its subject is what was asked), completeness "
    "(it covers every part of the question), conciseness (it is focused, with nothing "
    "irrelevant). Explain the ratings briefly in reasoning."
)


def overall_score(scores: Sequence[float]) -> float:
    """The mean of the score fields."""
    if not scores:
        raise ValueError("overall_score needs at least one score")
    return sum(scores) / len(scores)


def score_fields(model: type[BaseModel]) -> list[str]:
    """Fields of `model` annotated `float`, other than overall_score, in declaration order."""
    return [n for n, f in model.model_fields.items() if n != OVERALL and f.annotation is float]


@functools.cache
def judged_model(model: type[BaseModel]) -> type[BaseModel]:
    """What the judge fills: a copy of `model` without overall_score (we compute it), whose
    score fields are :data:`~rageval.metrics.authoring.UnitScore` (in the schema an enum of
    0.0, 0.1, …, 1.0; on our side any number from 0 to 1) and which forbids other keys."""
    scores = score_fields(model)
    # the other fields (the reasoning) first: the judge explains before it rates
    fields: dict[str, Any] = {
        name: (info.annotation, info)
        for name, info in model.model_fields.items()
        if name != OVERALL and name not in scores
    }
    for name in scores:
        info = model.model_fields[name]
        fields[name] = (UnitScore, FieldInfo.merge_field_infos(info, annotation=UnitScore))
    return create_model(
        f"{model.__name__}Judgement", __config__=ConfigDict(extra="forbid"), **fields
    )


def _resolve_model(spec: type[BaseModel] | str) -> type[BaseModel]:
    """A response model, or its "module:QualName" path (how params() records it)."""
    if isinstance(spec, str):
        module, _, qualname = spec.partition(":")
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        spec = found
    if not (isinstance(spec, type) and issubclass(spec, BaseModel)):
        raise TypeError(f"response_model must be a pydantic BaseModel subclass, got {spec!r}")
    return spec


P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E", bound="AnswerRelevance")


class _OnInstanceOrClass(Generic[E, P, R]):
    """A method that also works when called on the class, then on a default instance: the
    evaluator API calls `AnswerRelevance.grade(...)` on the evaluator class itself."""

    def __init__(self, method: Callable[Concatenate[E, P], R]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    def __get__(self, obj: E | None, owner: type[E]) -> Callable[P, R]:
        return functools.partial(self._method, obj if obj is not None else owner())


@register
class AnswerRelevance(Metric):
    """Relevance on three judged dimensions (see the module). ``ContextEvaluation(prompt=...,
    response_model=..., name=...)`` customises it; `name` (an identifier) is what a customised
    evaluator reports under, by default ``custom_relevance``."""

    name = "answer_relevance"
    required_fields = ("user_input", "response")
    needs_llm = True
    value_range = (0.0, 1.0)
    summary = "judge rates topical match, completeness, conciseness (0-1); their mean"
    blank_rules = (
        not_measured_if_blank("user_input", "the user input is empty: no question to address"),
        zero_if_blank("response", "the response is empty: it addresses nothing"),
    )

    def __init__(
        self,
        *,
        prompt: str | None = None,
        response_model: type[BaseModel] | str = RelevanceScore,
        **kw: Any,
    ) -> None:
        # name=: recorded in params() only when given (its default follows from the others)
        name = kw.pop("name", None)
        super().__init__(**kw)
        if prompt is not None and not prompt.strip():
            raise ValueError("prompt must be a non-empty instruction (or None for the default)")
        self.prompt = prompt
        self.response_model = _resolve_model(response_model)
        if name is not None:
            if not (isinstance(name, str) and name.isidentifier()):
                raise ValueError(f"name must be an identifier such as 'tone', got {name!r}")
            self.name = name
        elif type(self).name == AnswerRelevance.name and (
            prompt is not None or self.response_model is not RelevanceScore
        ):
            # a customised evaluator is another metric: never reported as the built-in one
            self.name = CUSTOM_NAME
        # the class itself, also when given by name: its code is part of what the cells use
        self.record_config("response_model", self.response_model)
        self._scores = score_fields(self.response_model)
        if not self._scores:
            raise ValueError(
                f"response_model {self.response_model.__name__} has no float score field "
                "(fields annotated float other than overall_score) to average"
            )

    # ---- judging -------------------------------------------------------------------

    def build_messages(
        self, question: str, answer: str, context: str | Sequence[str] | None
    ) -> list[dict[str, str]]:
        blocks = [tagged("question", question), tagged("answer", answer)]
        # the default judges relevance to the question alone; a custom prompt may want context
        if self.prompt is not None and context:
            text = context if isinstance(context, str) else numbered(context)
            blocks.append(tagged("context", text))
        wanted = judged_model(self.response_model).model_fields
        fields = ", ".join(f"{n} (0 to 1)" if n in self._scores else n for n in wanted)
        return messages(
            f"{self.prompt or DEFAULT_PROMPT}\n\n" + "\n".join(blocks),
            f"Reply as a JSON object with the fields: {fields}.",
        )

    async def _evaluate(
        self,
        ctx: ScoringContext,
        question: str,
        answer: str,
        context: str | Sequence[str] | None,
    ) -> tuple[BaseModel, float, dict[str, float]]:
        """The response model as judged (overall_score: the value), the value, and each score
        field's expected value where the judge's scoring read it (:attr:`ReplyScoring.read_expected`)."""
        reply = await ctx.ask_scored(
            self.build_messages(question, answer, context), judged_model(self.response_model)
        )
        judged = reply.value
        read = {n: reply.scoring.read_expected(n) for n in self._scores}
        expected = {n: e for n, e in read.items() if e is not None}
        value = overall_score([expected.get(n, getattr(judged, n)) for n in self._scores])
        fields = judged.model_dump()
        if OVERALL in self.response_model.model_fields:
            fields[OVERALL] = value
        return self.response_model.model_validate(fields), value, expected

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        question, answer = sample.text("user_input"), sample.text("response")
        model = judged_model(self.response_model)
        # a few tokens per score; a sentence or two per other field (the reasoning)
        others = len(model.model_fields) - len(self._scores)
        expected = 4 + 8 * len(self._scores) + 40 * others
        messages = self.build_messages(question, answer, sample.retrieved_contexts)
        return [PlannedRequest(messages, model, expected)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        question, answer = sample.text("user_input"), sample.text("response")
        result, value, expected = await self._evaluate(
            ctx, question, answer, sample.retrieved_contexts
        )
        evidence = result.model_dump(mode="json", exclude={OVERALL})
        if expected:
            evidence[EXPECTED] = expected
        parts = ", ".join(
            f"{n} {getattr(result, n):g}"
            + (f" (expected {expected[n]:.3g})" if n in expected else "")
            for n in self._scores
        )
        # not ok(**evidence): a user's model may have fields named like ok()'s own parameters
        return MetricResult(
            value=value, reason=f"mean of {parts}", evidence=FreeformEvidence.of(evidence)
        )

    # ---- the evaluator API (ContextEvaluation) ----------------------------------------

    def _judge_for(
        self, client: Judge | openai.OpenAI | openai.AsyncOpenAI | None, model: str | None
    ) -> Judge:
        from rageval.judge import Judge, llm_factory

        if isinstance(client, Judge):
            if model is not None:
                raise ValueError("model= applies to a raw openai client, not to a Judge")
            return client
        if client is not None:
            return llm_factory(_env.judge_model(model) or FALLBACK_MODEL, client=client)
        if self.llm is None:
            raise NoJudgeError(
                "grade() needs a judge: pass client= (a rageval Judge, openai.OpenAI or "
                "openai.AsyncOpenAI) or build the evaluator with llm="
            )
        return self.llm

    async def _grade(
        self,
        question: str,
        answer: str,
        context: str | Sequence[str] | None = None,
        client: Judge | openai.OpenAI | openai.AsyncOpenAI | None = None,
        *,
        model: str | None = None,
    ) -> BaseModel:
        """Grade one answer; returns an instance of the response model (RelevanceScore by
        default). The four arguments may also be given by position, as rag_evals documents:
        ``grade(question, answer, context, client)``. `model` names the judge model when
        `client` is a raw openai client (default: $RAGEVAL_LLM, else gpt-4o-mini). Judge
        failures raise JudgeError."""
        if not answer.strip():
            raise ValueError("the answer is empty: there is nothing to grade")
        judge = self._judge_for(client, model)
        ctx = ScoringContext.for_sample(Sample(), judge, tags={"metric": self.name, "sample": "-"})
        result, _, _ = await self._evaluate(ctx, question, answer, context)
        return result

    agrade = _OnInstanceOrClass(_grade)
    grade = _OnInstanceOrClass(
        synchronous(
            _grade,
            "grade",
            "Synchronous `agrade` (also inside a running event loop, e.g. Jupyter).\n\n"
            + (_grade.__doc__ or ""),
        )
    )


#: the evaluator API's name for building a customised evaluator:
#: ContextEvaluation(prompt=..., response_model=...)
ContextEvaluation = AnswerRelevance


#: names this module lacks are read from its default metric: ``answer_relevance.score(...)``
__getattr__ = forward_to_metric(__name__)
