"""answer_correctness: factual overlap with the reference, blended with semantic similarity.

Both texts are split into atomic statements (the shared extraction: one request for the pair).
One judge request then classifies every response statement as supported by the reference
statements (TP) or not (FP), and every reference statement as covered by the response
statements or not (FN). With `beta`=1 the factuality is the F1 of the statement sets:

    factuality  = (1+β²)·TP / ((1+β²)·TP + β²·FN + FP)     (= TP / (TP + 0.5·(FP+FN)) for β=1)
    similarity  = semantic_similarity(response, reference)  (a cosine, not clipped)
    score       = (w₀·factuality + w₁·similarity) / (w₀ + w₁)      `weights` = (0.75, 0.25)

and with `threshold` set the value becomes 1.0 if score ≥ threshold else 0.0.

Edge cases: a blank reference leaves nothing to compare with → not measured. A blank response
scores 0 with no request at all: an empty answer is wrong, not vacuously right. A response
without statements gives FN = all reference statements, hence factuality 0; a reference
without statements gives FP = all response statements, hence 0; neither needs the
classification request. TP=FP=FN=0 (neither text makes a factual claim) gives factuality 1.
With w₁ = 0 no embedding is computed; with w₀ = 0 no judge request is made.
Judge requests: 1 for the verdicts (+ the shared statement extraction); embeddings: 2 texts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from rageval.metrics._prompting import check_ids, messages, numbered, tagged
from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.metrics.semantic_similarity import semantic_similarity_value
from rageval.samples import Sample


class AnswerVerdict(BaseModel):
    id: int
    reason: str = Field(description="one short sentence")
    supported: bool = Field(description="true if the reference statements state or imply it")


class ReferenceVerdict(BaseModel):
    id: int
    reason: str = Field(description="one short sentence")
    covered: bool = Field(description="true if the answer statements state or imply it")


class CorrectnessVerdicts(BaseModel):
    answer: list[AnswerVerdict]
    reference: list[ReferenceVerdict]


def prompt(
    question: str, answer_statements: Sequence[str], reference_statements: Sequence[str]
) -> list[dict[str, str]]:
    return messages(
        "Compare an answer with a reference answer to the question, statement by statement.\n"
        "For each numbered answer statement: supported = the reference statements state it or "
        "directly imply it. For each numbered reference statement: covered = the answer "
        "statements state it or directly imply it. A statement that conflicts is not "
        "supported/covered.\n\n"
        f"{tagged('question', question)}\n"
        f"{tagged('answer_statements', numbered(answer_statements))}\n"
        f"{tagged('reference_statements', numbered(reference_statements))}\n\n"
        'Reply as {"answer": [{"id": 1, "reason": "...", "supported": true}, ...], '
        '"reference": [{"id": 1, "reason": "...", "covered": false}, ...]} '
        "with one entry per id in each list."
    )


def _answer_items(reply: CorrectnessVerdicts) -> list[AnswerVerdict]:
    return reply.answer


def _reference_items(reply: CorrectnessVerdicts) -> list[ReferenceVerdict]:
    return reply.reference


def check_verdicts(n_answer: int, n_reference: int) -> Callable[[CorrectnessVerdicts], None]:
    """Both lists must carry every id exactly once; all problems are reported together."""
    checks = (
        check_ids(n_answer, _answer_items, "answer statement"),
        check_ids(n_reference, _reference_items, "reference statement"),
    )

    def check(reply: CorrectnessVerdicts) -> None:
        problems = []
        for one in checks:
            try:
                one(reply)
            except ValueError as e:
                problems.append(str(e))
        if problems:
            raise ValueError("; ".join(problems))

    return check


def fbeta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """F-beta of statement counts; 1.0 when there is nothing on either side (TP=FP=FN=0)."""
    b2 = beta * beta
    denominator = (1 + b2) * tp + b2 * fn + fp
    return (1 + b2) * tp / denominator if denominator else 1.0


def answer_correctness_score(
    factuality: float | None, similarity: float | None, weights: Sequence[float]
) -> float:
    """Weighted mean of the parts; a part whose weight is 0 may be None (it was not computed)."""
    w_fact, w_sim = weights
    total = w_fact * (factuality or 0.0) + w_sim * (similarity or 0.0)
    return total / (w_fact + w_sim)


def _is_number(x: object) -> bool:
    """A finite int or float (True/False and NaN are not accepted as numbers)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _validate_weights(weights: Sequence[float]) -> tuple[float, float]:
    values = tuple(weights) if isinstance(weights, (list, tuple)) else ()
    if len(values) != 2 or not all(_is_number(w) and w >= 0 for w in values):
        raise ValueError(
            f"weights must be two non-negative numbers (factuality, similarity), got {weights!r}"
        )
    w_fact, w_sim = float(values[0]), float(values[1])
    if w_fact + w_sim == 0:
        raise ValueError("weights must not both be zero")
    return w_fact, w_sim


@register
class AnswerCorrectness(Metric):
    name = "answer_correctness"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "reference")
    needs_llm = True
    #: only when the similarity weight is positive; with weights[1] = 0 nothing is embedded
    needs_embeddings = True
    statement_needs = frozenset({"response", "reference"})
    summary = "F1 of response vs reference statements, blended with semantic similarity"

    def __init__(
        self,
        *,
        weights: Sequence[float] = (0.75, 0.25),
        beta: float = 1.0,
        threshold: float | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.weights = _validate_weights(weights)
        if not (_is_number(beta) and beta > 0):
            raise ValueError(f"beta must be a positive number, got {beta!r}")
        self.beta = float(beta)
        if threshold is not None and not (_is_number(threshold) and 0.0 <= threshold <= 1.0):
            raise ValueError(f"threshold must be a number in [0, 1] or None, got {threshold!r}")
        self.threshold = None if threshold is None else float(threshold)

    def params(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "beta": self.beta, "threshold": self.threshold}

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, reference = sample.text("response"), sample.text("reference")
        if not reference.strip():
            return MetricResult.not_measured("the reference is empty: nothing to compare with")
        if not response.strip():
            return self._result(0.0, {"factuality": 0.0}, None, "the response is empty")
        w_fact, w_sim = self.weights
        facts, similarity = await asyncio.gather(
            self._factuality(sample, ctx) if w_fact > 0 else _skipped(),
            semantic_similarity_value(ctx, response, reference) if w_sim > 0 else _skipped(),
        )
        return self._result(
            answer_correctness_score(
                None if facts is None else facts["factuality"], similarity, self.weights
            ),
            facts,
            similarity,
            None,
        )

    def _result(
        self,
        score: float,
        facts: dict[str, Any] | None,
        similarity: float | None,
        why: str | None,
    ) -> MetricResult:
        value = score if self.threshold is None else float(score >= self.threshold)
        parts = [why] if why else []
        if facts is not None and "tp" in facts:
            parts.append(
                f"factuality {facts['factuality']:.4f} "
                f"(TP={facts['tp']}, FP={facts['fp']}, FN={facts['fn']})"
            )
        if similarity is not None:
            parts.append(f"similarity {similarity:.4f}")
        reason = f"score {score:.4f}: " + ", ".join(parts)
        if self.threshold is not None:
            reason += f"; {'at or above' if value else 'below'} threshold {self.threshold:g}"
        evidence = facts or {"factuality": None}
        return MetricResult.ok(value, reason=reason, score=score, similarity=similarity, **evidence)

    async def _factuality(self, sample: Sample, ctx: ScoringContext) -> dict[str, Any]:
        answer = await ctx.statements.get("response")
        reference = await ctx.statements.get("reference")
        supported = [
            AnswerVerdict(id=i, reason="", supported=False) for i in range(1, len(answer) + 1)
        ]
        covered = [
            ReferenceVerdict(id=i, reason="", covered=False) for i in range(1, len(reference) + 1)
        ]
        # with one side empty every verdict is known without asking: nothing supports or covers
        if answer and reference:
            reply = await ctx.ask(
                prompt(sample.text("user_input"), answer, reference),
                CorrectnessVerdicts,
                check=check_verdicts(len(answer), len(reference)),
            )
            supported = sorted(reply.answer, key=lambda v: v.id)
            covered = sorted(reply.reference, key=lambda v: v.id)
        tp_ids = [v.id for v in supported if v.supported]
        fp_ids = [v.id for v in supported if not v.supported]
        fn_ids = [v.id for v in covered if not v.covered]
        tp, fp, fn = len(tp_ids), len(fp_ids), len(fn_ids)
        return {
            "factuality": fbeta(tp, fp, fn, self.beta),
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "tp_ids": tp_ids,
            "fp_ids": fp_ids,
            "fn_ids": fn_ids,
            "response_statements": [
                {"id": v.id, "text": t, "supported": v.supported, "reason": v.reason or None}
                for t, v in zip(answer, supported, strict=True)
            ],
            "reference_statements": [
                {"id": v.id, "text": t, "covered": v.covered, "reason": v.reason or None}
                for t, v in zip(reference, covered, strict=True)
            ],
        }


async def _skipped() -> None:
    """Stands in for a part whose weight is 0, so it is neither asked for nor embedded."""
    return None
