"""pairwise: which of two answers to one question is better, asked in both orders.

A pairwise sample carries two answers: `response` (answer A) and `response_b` (answer B, a
column of the data, kept in the sample's metadata). The judge is shown the question, the
reference when the sample has one, the contexts when the criterion reads them, and the two
answers as "answer 1" and "answer 2", and replies ``{"better": "1" | "2" | "tie"}``.

Position bias: each pair is asked twice, A as answer 1 (the ``a_first`` reading) and B as
answer 1 (``b_first``); two readings whose verdicts, mapped back to A and B, differ make the
pair a *flip* (the verdict followed the order, or changed between a win and a tie, rather than
following the answers). The winner (:func:`combine`) is by default
(``winner_from="probabilities"``) the option most probable on average over the two orders, by
the judge's log-probabilities, which cancels a lean to one position even when the written
verdicts flip; with ``winner_from="verdicts"`` two readings that agree give the winner and two
that differ a tie. Without log-probabilities each written verdict has probability 1 and the
two rules agree. The default was chosen on EVOUNA-NQ tune-split pairs (one answer people
accepted, one they rejected) with Qwen2.5-Coder-1.5B, where the verdicts flipped on 11 of 16
pairs: the probabilities chose the accepted answer in 0.75 of them, the verdicts 0.59
(benchmarks/RESULTS.md). The cell's value is the
winner read as B's score: 1 when B wins, 0.5 on a tie, 0 when A wins, so the mean over pairs
is B's win rate over A with ties counted half. A reply's probabilities of "1", "2" and "tie"
(from the judge's log-probabilities, when the endpoint gives them) are kept with each reading.

The criterion is a setting: ``correctness`` (the default; against the reference when there is
one), ``completeness``, ``faithfulness`` (to the retrieved contexts, which it requires) or the
user's own words, ``rubric="..."``.
Judge requests: 2 (more only for re-asks).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import Field

from rageval.metrics.authoring import (
    PlannedRequest,
    ReplyModel,
    contexts_block,
    data_first_messages,
    nonblank,
    reference_text,
    tagged,
)
from rageval.metrics.base import Metric, MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import PairwiseEvidence, PairwiseReading
from rageval.samples import Sample

Criterion = Literal["correctness", "completeness", "faithfulness", "rubric"]
Winner = Literal["a", "b", "tie"]
WinnerFrom = Literal["verdicts", "probabilities"]
#: how a pair's winner is read when nothing says otherwise
DEFAULT_WINNER_FROM: WinnerFrom = "probabilities"

#: the sample's metadata key holding answer B
RESPONSE_B = "response_b"

#: what each criterion asks the judge
CRITERIA: dict[str, str] = {
    "correctness": (
        "Which answer answers the question correctly? Prefer the answer that is right; when a "
        "reference answer is given, the right answer is the one that says what the reference "
        "says, in any words."
    ),
    "completeness": (
        "Which answer covers more of what the question asks (and, when a reference answer is "
        "given, more of what the reference says), without being wrong?"
    ),
    "faithfulness": (
        "Which answer is better supported by the contexts? Prefer the answer whose claims the "
        "contexts support; an answer that adds claims the contexts do not make is worse."
    ),
}
_REPLY = 'Reply as {"better": "1"} or {"better": "2"}, or {"better": "tie"} when neither is better.'


class PairVerdict(ReplyModel):
    better: Literal["1", "2", "tie"] = Field(description="the better answer, or tie")


def response_b(sample: Sample) -> str | None:
    """Answer B of a pairwise sample (None when it has none, or not as text)."""
    value = sample.metadata.get(RESPONSE_B)
    return value if isinstance(value, str) else None


def prompt(
    sample: Sample, first: str, second: str, *, criterion: str, rubric: str | None = None
) -> list[dict[str, str]]:
    """The messages asking which of `first` (answer 1) and `second` (answer 2) is better."""
    task = rubric if criterion == "rubric" and rubric else CRITERIA[criterion]
    # data first (the contexts first of all), as every request showing contexts is laid out:
    # the two orders of a pair then begin with the same text, for a server's prompt cache
    blocks = []
    contexts = nonblank(sample.retrieved_contexts)
    if criterion == "faithfulness" or (criterion == "rubric" and contexts):
        blocks.append(contexts_block(contexts))
    blocks.append(tagged("question", sample.text("user_input")))
    reference = reference_text(sample)
    if reference.strip():
        blocks.append(tagged("reference", reference))
    blocks += [tagged("answer_1", first), tagged("answer_2", second)]
    return data_first_messages("\n".join(blocks), task, _REPLY)


def read_back(better: str, *, b_first: bool) -> Winner:
    """A verdict on answers 1 and 2 as a verdict on A and B."""
    if better == "tie":
        return "tie"
    first_won = better == "1"
    return "b" if first_won == b_first else "a"


def combine(
    a_first: PairwiseReading, b_first: PairwiseReading, *, by: WinnerFrom = "verdicts"
) -> tuple[Winner, bool]:
    """The winner of both orders' readings, and whether their verdicts differ (a flip).

    ``by="verdicts"``: agreeing verdicts give their winner, differing ones a tie.
    ``by="probabilities"``: the option (a, b or tie) most probable on average over the two
    orders, a tie when the best two are equal; what the judge leans to because of the order
    cancels out in the average. Without log-probabilities each reading's written verdict has
    probability 1, and the two rules agree."""
    flip = a_first.winner != b_first.winner
    if by == "verdicts":
        return (a_first.winner, False) if not flip else ("tie", True)
    mean = {
        "a": a_first.p_a + b_first.p_a,
        "b": a_first.p_b + b_first.p_b,
        "tie": a_first.p_tie + b_first.p_tie,
    }
    ranked = sorted(mean, key=lambda k: -mean[k])
    best: Winner = "tie" if mean[ranked[0]] == mean[ranked[1]] else ranked[0]  # type: ignore[assignment]
    return best, flip


#: the winner as B's score: the mean over pairs is B's win rate, ties counted half
WINNER_VALUE: dict[Winner, float] = {"a": 0.0, "tie": 0.5, "b": 1.0}


@register
class Pairwise(Metric):
    name = "pairwise"
    required_fields = ("user_input", "response")
    needs_llm = True
    value_range = (0.0, 1.0)
    summary = "which of two answers (response, response_b) is better, asked in both orders"
    in_default_run = False  # a pairwise sample is built for it (rageval pairwise)

    def __init__(
        self,
        *,
        criterion: Criterion = "correctness",
        rubric: str | None = None,
        winner_from: WinnerFrom = DEFAULT_WINNER_FROM,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        if winner_from not in ("verdicts", "probabilities"):
            raise ValueError(f"winner_from is verdicts or probabilities, got {winner_from!r}")
        self.winner_from = winner_from
        if criterion not in (*CRITERIA, "rubric"):
            raise ValueError(
                f"unknown criterion {criterion!r}: use one of {', '.join(CRITERIA)} or rubric"
            )
        if (criterion == "rubric") != bool(rubric and rubric.strip()):
            raise ValueError(
                "criterion='rubric' takes the user's words in rubric='...', and rubric goes "
                "only with criterion='rubric'"
            )
        self.criterion = criterion
        self.rubric = rubric.strip() if rubric else None

    def input_problems(self, sample: Sample) -> list[tuple[str, str]]:
        problems = super().input_problems(sample)
        value = sample.metadata.get(RESPONSE_B)
        if value is None:
            problems.append((RESPONSE_B, f"{self.name} needs answer B in a response_b column"))
        elif not isinstance(value, str):
            problems.append((RESPONSE_B, f"must be a text, got {type(value).__name__}"))
        if self.criterion == "faithfulness" and not nonblank(sample.retrieved_contexts):
            problems.append(
                ("retrieved_contexts", f"{self.name} with criterion faithfulness reads them")
            )
        return problems

    def _orders(self, sample: Sample) -> list[list[dict[str, str]]]:
        a, b = sample.text("response"), response_b(sample) or ""
        return [
            prompt(sample, a, b, criterion=self.criterion, rubric=self.rubric),
            prompt(sample, b, a, criterion=self.criterion, rubric=self.rubric),
        ]

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        return [PlannedRequest(m, PairVerdict, reply_tokens=8) for m in self._orders(sample)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        replies = await asyncio.gather(
            *(ctx.ask_scored(m, PairVerdict) for m in self._orders(sample))
        )
        readings = []
        for reply, b_first in zip(replies, (False, True), strict=True):
            p = reply.scoring.choice("better").probabilities
            first, second = p.get("1", 0.0), p.get("2", 0.0)
            readings.append(
                PairwiseReading(
                    winner=read_back(reply.value.better, b_first=b_first),
                    p_a=second if b_first else first,
                    p_b=first if b_first else second,
                    p_tie=p.get("tie", 0.0),
                )
            )
        winner, flip = combine(readings[0], readings[1], by=self.winner_from)
        why = (
            f"the orders disagree (A first: {readings[0].winner}, B first: {readings[1].winner})"
            if flip
            else "both orders agree"
        ) + f"; winner ({self.winner_from}): {winner}"
        return MetricResult.ok(WINNER_VALUE[winner], reason=why).with_evidence(
            PairwiseEvidence(
                winner=winner,
                a_first=readings[0],
                b_first=readings[1],
                flip=flip,
                criterion=self.criterion,
                winner_from=self.winner_from,
            )
        )


#: names this module lacks are read from its default metric
__getattr__ = forward_to_metric(__name__)
