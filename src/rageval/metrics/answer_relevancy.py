"""answer_relevancy: does the response answer the question that was asked?

The published method (as ragas implements it): the judge reads the response alone (never the
question, which it could simply copy) and reverse-engineers the question it answers, N =
`strictness` times independently; each generation also says whether the response is
noncommittal (evasive, vague, "I don't know"). Then

    score = (1/N) Σ_i cos(E(q_i), E(user_input))      (0 if every generation finds it noncommittal)

with the cosine not clipped: the range is −1..1, although sentence embeddings almost always
give 0..1. The N generations are one request with the `n` parameter where the endpoint
honours it (else N requests), at `temperature` 0.3 — at temperature 0 they would be N copies
of one question (ragas uses 0.3 when n > 1 as well).

Noncommittal: the score is 0 only when all N generations agree that the response is
noncommittal, as in ragas. One stray flag out of N samples of the judge's opinion is noise,
not a verdict; an answer that at least one generation could turn into a committed question
is scored by its questions. A generated question that is blank reconstructs nothing of the
user input: its cosine counts as 0.
Empty response: it answers nothing, so it scores 0 without a request. Empty user_input: there
is no question to be relevant to, so the sample is not measured.
Judge requests: 1 (N where the endpoint ignores or refuses `n`). Embedding calls: 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from rageval.metrics.authoring import (
    BlankRule,
    PlannedRequest,
    ReplyModel,
    messages,
    not_measured_if_blank,
    note_truncation,
    number_only,
    tagged,
    text_tokens,
    zero_if_blank,
)
from rageval.metrics.base import Metric, MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import QuestionsEvidence, ScoredQuestion
from rageval.samples import Sample


class GeneratedQuestion(ReplyModel):
    question: str = Field(description="the question the answer responds to")
    # 1/0 as in ragas' published prompt, not a boolean: a small judge (Qwen2.5 1.5B on
    # llama.cpp) answered `true` for 5 of 5 plainly committal answers, and 0 of 5 as 1/0
    noncommittal: Annotated[Literal[0, 1], BeforeValidator(number_only)] = Field(
        description="1 if the answer is evasive, vague or declines to answer, else 0"
    )


def prompt(response: str) -> list[dict[str, str]]:
    return messages(
        "Write the question that the answer below responds to, phrased as a user would ask "
        "it. Also give noncommittal: 1 if the answer is evasive, vague or declines to "
        'answer ("I don\'t know", "I\'m not sure"), else 0.\n\n'
        f"{tagged('answer', response)}",
        'Reply as {"question": "...", "noncommittal": 0}.',
    )


def answer_relevancy_score(cosines: Sequence[float], noncommittal: Sequence[bool]) -> float:
    """Mean cosine of the generated questions to the user input; 0 when every generation
    found the answer noncommittal."""
    if not cosines or len(cosines) != len(noncommittal):
        raise ValueError("answer relevancy needs one cosine and one flag per generated question")
    if all(noncommittal):
        return 0.0
    return sum(cosines) / len(cosines)


@register
class AnswerRelevancy(Metric):
    name = "answer_relevancy"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response")
    needs_llm = True
    needs_embeddings = True
    value_range = (-1.0, 1.0)  # a cosine, not clipped
    summary = "mean cosine of questions generated from the response to the user input"
    blank_rules: ClassVar[tuple[BlankRule, ...]] = (
        not_measured_if_blank("user_input", "the user input is empty: no question to answer"),
        zero_if_blank("response", "the response is empty: it answers nothing"),
    )

    def __init__(self, *, strictness: int = 3, temperature: float = 0.3, **kw: Any) -> None:
        super().__init__(**kw)
        if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:
            raise ValueError(
                f"strictness (questions to generate) must be an int >= 1, got {strictness!r}"
            )
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not 0.0 <= temperature <= 2.0
        ):
            raise ValueError(f"temperature must be a number from 0 to 2, got {temperature!r}")
        self.strictness = strictness
        self.temperature = float(temperature)

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        question, response = sample.text("user_input"), sample.text("response")
        # each generation: a question about as long as the user's, and the flag
        expected = 12 + text_tokens(question)
        return [PlannedRequest(prompt(response), GeneratedQuestion, expected, n=self.strictness)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        question, response = sample.text("user_input"), sample.text("response")
        replies = await ctx.ask_n(
            prompt(response), GeneratedQuestion, self.strictness, temperature=self.temperature
        )
        flags = [r.noncommittal == 1 for r in replies]
        votes = sum(flags)
        if all(flags):
            return MetricResult.ok(
                answer_relevancy_score([0.0] * len(flags), flags),
                reason=f"all {len(flags)} generations find the response noncommittal "
                "(evasive or declining to answer)",
            ).with_evidence(
                QuestionsEvidence(
                    noncommittal=True,
                    noncommittal_votes=votes,
                    questions=[
                        ScoredQuestion(question=r.question, noncommittal=flag)
                        for r, flag in zip(replies, flags, strict=True)
                    ],
                )
            )
        cosines = await self._cosines(ctx, question, [r.question for r in replies])
        value = answer_relevancy_score(cosines, flags)
        named = {"user_input": question}
        named.update({f"question_{i}": r.question for i, r in enumerate(replies, start=1)})
        cut = ctx.truncated(named)
        limit = ctx.embeddings.max_tokens if ctx.embeddings else None
        result = MetricResult.ok(
            value,
            reason=f"mean cosine of {len(cosines)} generated questions to the user input"
            + (f" ({votes} of {len(flags)} generations found it noncommittal)" if votes else ""),
        ).with_evidence(
            QuestionsEvidence(
                noncommittal=False,
                noncommittal_votes=votes,
                questions=[
                    ScoredQuestion(question=r.question, noncommittal=flag, cosine=c)
                    for r, flag, c in zip(replies, flags, cosines, strict=True)
                ],
            )
        )
        return note_truncation(result, cut, limit)

    @staticmethod
    async def _cosines(ctx: ScoringContext, question: str, generated: list[str]) -> list[float]:
        """Cosine of each generated question to the user input; 0 for a blank one (it
        reconstructs nothing, and embedding endpoints reject empty input)."""
        from rageval.embeddings import cosine

        asked = [q for q in generated if q.strip()]
        if not asked:
            return [0.0] * len(generated)
        vectors = await ctx.embed([question, *asked])
        by_text = {q: cosine(vectors[0], v) for q, v in zip(asked, vectors[1:], strict=True)}
        return [by_text[q] if q.strip() else 0.0 for q in generated]


#: ragas' newer name for the same metric
ResponseRelevancy = AnswerRelevancy


#: names this module lacks are read from its default metric: ``answer_relevancy.score(...)``
__getattr__ = forward_to_metric(__name__)
