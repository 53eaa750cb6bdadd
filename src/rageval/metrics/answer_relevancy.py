"""answer_relevancy: does the response answer the question that was asked?

The judge reads the response alone (never the question, which it could simply copy) and writes
N = `strictness` questions that the response answers; it also flags a noncommittal response
(evasive, vague, "I don't know"). Then

    score = (1/N) Σ_i cos(E(q_i), E(user_input))      (0 if noncommittal)

with the cosine not clipped: the range is −1..1, although sentence embeddings almost always
give 0..1. The reply must hold exactly N non-empty questions, otherwise it is re-asked
(a noncommittal reply scores 0 whatever its questions). The N questions and the user_input
are embedded in one call.
Empty response: it answers nothing, so it scores 0 without a request. Empty user_input: there
is no question to be relevant to, so the sample is not measured.
Judge requests: 1 (more only for re-asks). Embedding calls: 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from rageval.metrics._prompting import messages, tagged
from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.samples import Sample


class GeneratedQuestions(BaseModel):
    questions: list[str] = Field(description="questions the answer responds to")
    noncommittal: bool = Field(description="true if the answer is evasive, vague or declines")


def prompt(response: str, n: int) -> list[dict[str, str]]:
    what = "one question" if n == 1 else f"{n} different questions"
    return messages(
        f"Write exactly {what} that the answer below responds to, each phrased as a user "
        "would ask it. Also set noncommittal to true if the answer is evasive, vague or "
        'declines to answer ("I don\'t know", "I\'m not sure"), else false.\n\n'
        f"{tagged('answer', response)}\n\n"
        'Reply as {"questions": ["..."], "noncommittal": false}.'
    )


def _exactly(n: int) -> Callable[[GeneratedQuestions], None]:
    def check(reply: GeneratedQuestions) -> None:
        if reply.noncommittal:
            return  # scores 0 whatever the questions: re-asking would only cost money
        blank = sum(1 for q in reply.questions if not q.strip())
        if len(reply.questions) != n or blank:
            raise ValueError(
                f"give exactly {n} non-empty questions; got {len(reply.questions)}"
                + (f" ({blank} empty)" if blank else "")
            )

    return check


def answer_relevancy_score(cosines: Sequence[float], noncommittal: bool) -> float:
    """Mean cosine of the generated questions to the user input; 0 for a noncommittal answer."""
    if noncommittal:
        return 0.0
    if not cosines:
        raise ValueError("answer relevancy needs at least one generated question")
    return sum(cosines) / len(cosines)


@register
class AnswerRelevancy(Metric):
    name = "answer_relevancy"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response")
    needs_llm = True
    needs_embeddings = True
    summary = "mean cosine of questions generated from the response to the user input"

    def __init__(self, *, strictness: int = 3, **kw: Any) -> None:
        super().__init__(**kw)
        if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:
            raise ValueError(
                f"strictness (questions to write) must be an int >= 1, got {strictness!r}"
            )
        self.strictness = strictness

    def params(self) -> dict[str, Any]:
        return {"strictness": self.strictness}

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        question, response = sample.text("user_input"), sample.text("response")
        if not question.strip():
            return MetricResult.not_measured("the user input is empty: no question to answer")
        if not response.strip():
            return MetricResult.ok(0.0, reason="the response is empty: it answers nothing")
        reply = await ctx.ask(
            prompt(response, self.strictness), GeneratedQuestions, check=_exactly(self.strictness)
        )
        if reply.noncommittal:
            return MetricResult.ok(
                answer_relevancy_score([], noncommittal=True),
                reason="the response is noncommittal (evasive or declines to answer)",
                noncommittal=True,
                questions=[{"question": q, "cosine": None} for q in reply.questions],
            )
        from rageval.embeddings import cosine

        vectors = await ctx.embed([question, *reply.questions])
        cosines = [cosine(vectors[0], v) for v in vectors[1:]]
        value = answer_relevancy_score(cosines, noncommittal=False)
        return MetricResult.ok(
            value,
            reason=f"mean cosine of {len(cosines)} generated questions to the user input",
            noncommittal=False,
            questions=[
                {"question": q, "cosine": c} for q, c in zip(reply.questions, cosines, strict=True)
            ],
        )


#: ragas' newer name for the same metric
ResponseRelevancy = AnswerRelevancy
