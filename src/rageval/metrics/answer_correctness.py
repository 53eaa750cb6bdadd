"""answer_correctness: factual overlap with the reference, blended with semantic similarity.

The response's atomic statements come from the shared extraction (the same request whether or
not faithfulness runs too). Then ONE request shows the question, the reference text and the
numbered response statements ``[s1] …``, and asks for

* every response statement: supported by the reference (TP) or not (FP), one key per id;
* the reference's own atomic statements, each covered by the response statements or not (FN).

This is two steps of the published method (extract the reference's statements, then classify
both lists) in one request: a deviation listed in docs/metrics.md. With `beta`=1 the
factuality is the F1 of the statement sets:

    factuality  = (1+β²)·TP / ((1+β²)·TP + β²·FN + FP)     (= TP / (TP + 0.5·(FP+FN)) for β=1)
    similarity  = semantic_similarity(response, reference)  (a cosine, not clipped)
    score       = (w₀·factuality + w₁·similarity) / (w₀ + w₁)      `weights` = (0.75, 0.25)

and with `threshold` set the value becomes 1.0 if score ≥ threshold else 0.0. People's
guidance (`instructions`, `examples`, `reasons`, `threshold`: :class:`GuidedMetric`) goes
into the classification request: an example shows its question, its reference and its response
as one statement, with people's verdict on it.

Edge cases: a blank reference leaves nothing to compare with → not measured. A blank response
scores 0 with no request at all: an empty answer is wrong, not vacuously right. A response
without statements gives TP = FP = 0 (the reference's statements are still asked for, so FN is
known); TP=FP=FN=0 (neither text makes a factual claim) gives factuality 1.
With w₁ = 0 no embedding is computed; with w₀ = 0 no judge request is made.

Where the judge scores by probabilities (docs/judge-probabilities.md), TP, FP and FN are
expected counts, read from the same reply's token log-probabilities: TP = Σ P(supported) and
FP = Σ (1 − P(supported)) over the response statements, FN = Σ (1 − P(covered)) over the
reference statements, and factuality is the same F-beta of those counts (an F-beta of
expected counts, not the expectation of the F-beta; the same number as before for verdicts
of 0 and 1, as faithfulness counts each verdict by its probability). The evidence keeps the
counts of the verdicts written (`tp`, `fp`, `fn` and their ids), each verdict's
`probability`, and the expected counts (`expected`); a verdict whose probability could not
be read counts as written.
Judge requests: 1 (+ the shared statement extraction); embeddings: 2 texts.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field, StrictBool

from rageval.metrics.authoring import (
    EXPECTED_ITEM_TOKENS,
    EXPECTED_VERDICT_TOKENS,
    NO_REFERENCE,
    STATEMENT_RULES as RULES,
    Guidance,
    GuidedMetric,
    PlannedRequest,
    ReplyModel,
    Verdict,
    VerdictQuestion,
    item_verdict,
    judged_items,
    note_truncation,
    numbered,
    planned_statements,
    predicted_statements,
    reply_budget,
    split_sentences,
    text_tokens,
    verdict_data,
    verdict_prompt,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import FactualityEvidence, VerdictTable
from rageval.metrics.semantic_similarity import semantic_similarity_value
from rageval.samples import Sample

SUPPORTED = "true if the reference states it or directly implies it"


class ReferenceStatement(ReplyModel):
    statement: str = Field(description="one atomic claim of the reference")
    reason: str = Field(description="one short sentence")
    covered: StrictBool = Field(description="true if the answer statements state or imply it")


class BareReferenceStatement(ReplyModel):
    """A reference statement without the reason (``reasons=False``)."""

    statement: str = Field(description="one atomic claim of the reference")
    covered: StrictBool = Field(description="true if the answer statements state or imply it")


class ReferenceCoverage(ReplyModel):
    """What the classification request returns besides the verdict per response statement."""

    reference_statements: list[ReferenceStatement]


class BareReferenceCoverage(ReplyModel):
    """:class:`ReferenceCoverage` without the reasons (``reasons=False``)."""

    reference_statements: list[BareReferenceStatement]


_TASK = (
    "Compare an answer with a reference answer to the question.\n"
    "1. reference_statements: split the reference into its atomic factual claims. "
    f"{RULES} For each claim, covered = the numbered answer statements state it or directly "
    "imply it.\n"
    "2. For each numbered answer statement: supported = the reference states it or directly "
    "implies it. A statement that conflicts with the reference is not supported.\n"
    'Reply with "reference_statements": [{{"statement": "...", {reason}'
    '"covered": true or false}}, ...].'
)
#: the classification request's task (with a reason per claim; TASK_WITHOUT_REASONS without)
TASK = _TASK.format(reason='"reason": "...", ')
TASK_WITHOUT_REASONS = _TASK.format(reason="")


def prompt(
    question: str, reference: str, guidance: Guidance | None = None, reasons: bool = True
) -> Callable[[str], str]:
    """The classification request's text, around the numbered response statements;
    `guidance` (guidelines, labelled examples) after the task."""
    task = (guidance or Guidance()).head(
        TASK if reasons else TASK_WITHOUT_REASONS,
        _example,
        functools.partial(item_verdict, "supported"),
    )
    return verdict_prompt(task, "answer_statements", question=question, reference=reference)


def _example(sample: Sample) -> str:
    """A labelled example as the request shows data: its question and reference, its response
    as one statement."""
    return verdict_data(
        "answer_statements",
        numbered([sample.text("response")], "s"),
        question=sample.text("user_input"),
        reference=sample.text("reference"),
    )


def fbeta(tp: float, fp: float, fn: float, beta: float = 1.0) -> float:
    """F-beta of statement counts (or expected counts); 1.0 when there is nothing on either
    side (TP=FP=FN=0)."""
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
class AnswerCorrectness(GuidedMetric):
    name = "answer_correctness"
    required_fields = ("user_input", "response", "reference")
    #: only when the similarity weight is positive; with weights[1] = 0 nothing is embedded
    needs_embeddings = True
    #: down to -w1/(w0+w1) with a negative cosine: -1 at most (docs/metrics.md)
    value_range = (-1.0, 1.0)
    statement_needs = frozenset({"response"})
    summary = "F1 of response vs reference statements, blended with semantic similarity"
    blank_rules = (NO_REFERENCE,)
    guideline_variants: ClassVar[Mapping[str, str]] = {
        "lenient": (
            "A statement that gives the right entity, date or number in other words or less "
            "specifically than the reference (a surname for a full name, a year for a full "
            "date) is supported."
        ),
        "strict": (
            "A statement is supported only if the reference states it as specifically; a "
            "vaguer statement, or one with a detail the reference does not give, is not."
        ),
    }

    def __init__(
        self,
        *,
        weights: Sequence[float] = (0.75, 0.25),
        beta: float = 1.0,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.weights = _validate_weights(weights)
        if not (_is_number(beta) and beta > 0):
            raise ValueError(f"beta must be a positive number, got {beta!r}")
        self.beta = float(beta)

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        response, reference = sample.text("response"), sample.text("reference")
        if not response.strip() or self.weights[0] == 0:
            return []
        # the reply lists the reference's statements (about its sentences), each ruled on
        per_claim = EXPECTED_ITEM_TOKENS if self.reasons else EXPECTED_VERDICT_TOKENS
        coverage = sum(text_tokens(s) + per_claim for s in split_sentences(reference))
        return planned_statements(sample, "response") + self.question(sample).plan(
            predicted_statements(response), base_reply_tokens=8 + coverage, predicted=True
        )

    def question(self, sample: Sample) -> VerdictQuestion:
        """Is each statement of the response supported by the reference? The first request's
        reply also lists the reference's statements, each covered by the response or not."""
        reference = sample.text("reference")
        return VerdictQuestion(
            prompt(sample.text("user_input"), reference, self.guidance, self.reasons),
            prefix="s",
            verdict="supported",
            meaning=SUPPORTED,
            base=ReferenceCoverage if self.reasons else BareReferenceCoverage,
            base_tokens=reply_budget(len(split_sentences(reference)), text=reference),
            reasons=self.reasons,
        )

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, reference = sample.text("response"), sample.text("reference")
        if not response.strip():
            return self._result(0.0, {"factuality": 0.0}, None, "the response is empty")
        w_fact, w_sim = self.weights
        facts, similarity = await asyncio.gather(
            self._factuality(sample, ctx) if w_fact > 0 else _skipped(),
            semantic_similarity_value(ctx, response, reference) if w_sim > 0 else _skipped(),
        )
        result = self._result(
            answer_correctness_score(
                None if facts is None else facts["factuality"], similarity, self.weights
            ),
            facts,
            similarity,
            None,
        )
        if similarity is None:
            return result
        cut = ctx.truncated({"response": response, "reference": reference})
        return note_truncation(result, cut, ctx.embeddings.max_tokens if ctx.embeddings else None)

    def _result(
        self,
        score: float,
        facts: dict[str, Any] | None,
        similarity: float | None,
        why: str | None,
    ) -> MetricResult:
        parts = [why] if why else []
        if facts is not None and "tp" in facts:
            counts = f"TP={facts['tp']}, FP={facts['fp']}, FN={facts['fn']}"
            if facts.get("expected"):
                e = facts["expected"]
                counts = f"expected TP={e['tp']:.3g}, FP={e['fp']:.3g}, FN={e['fn']:.3g}; written {counts}"
            parts.append(f"factuality {facts['factuality']:.4f} ({counts})")
        if similarity is not None:
            parts.append(f"similarity {similarity:.4f}")
        reason = f"score {score:.4f}: " + ", ".join(parts)
        evidence = FactualityEvidence(
            score=score, similarity=similarity, **(facts or {"factuality": None})
        )
        # the value is the score; `threshold` turns it into a verdict (GuidedMetric.decide)
        return MetricResult.ok(score, reason=reason).with_evidence(evidence)

    async def _factuality(self, sample: Sample, ctx: ScoringContext) -> dict[str, Any]:
        answer = await ctx.statements.get("response")
        verdicts, first = await self.question(sample).ask_scored(ctx, answer)
        coverage = first.value
        assert isinstance(coverage, (ReferenceCoverage, BareReferenceCoverage))
        # the reference's claims as verdicts (covered), each with its probability of being
        # covered where the judge's scoring read it
        listed: list[ReferenceStatement | BareReferenceStatement] = list(
            coverage.reference_statements
        )
        kept = [(i, c) for i, c in enumerate(listed) if c.statement.strip()]
        claims = [
            Verdict(
                f"f{n}",
                c.statement.strip(),
                c.covered,
                getattr(c, "reason", ""),
                first.scoring.read_probability("reference_statements", str(i), "covered"),
            )
            for n, (i, c) in enumerate(kept, start=1)
        ]
        tp_ids = [v.id for v in verdicts if v.verdict]
        fp_ids = [v.id for v in verdicts if not v.verdict]
        fn_ids = [c.id for c in claims if not c.verdict]
        # expected counts: each verdict counts its probability of being true (as written
        # where none was read); the counts of the ids where every verdict is 0 or 1
        expected = {
            "tp": sum(v.weight for v in verdicts),
            "fp": sum(1 - v.weight for v in verdicts),
            "fn": sum(1 - c.weight for c in claims),
        }
        read = any(v.probability is not None for v in [*verdicts, *claims])
        return {
            "factuality": fbeta(expected["tp"], expected["fp"], expected["fn"], self.beta),
            "tp": len(tp_ids),
            "fp": len(fp_ids),
            "fn": len(fn_ids),
            "expected": expected if read else None,
            "tp_ids": tp_ids,
            "fp_ids": fp_ids,
            "fn_ids": fn_ids,
            "response_statements": VerdictTable(
                items="response statements",
                means="supported by the reference",
                verdicts=judged_items(verdicts),
            ),
            "reference_statements": VerdictTable(
                items="reference statements",
                means="covered by the response",
                verdicts=judged_items(claims),
            ),
        }


async def _skipped() -> None:
    """Stands in for a part whose weight is 0, so it is neither asked for nor embedded."""
    return None


#: names this module lacks are read from its default metric: ``answer_correctness.score(...)``
__getattr__ = forward_to_metric(__name__)
