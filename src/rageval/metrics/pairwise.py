"""pairwise: which of two answers to one question is better, asked in both orders.

A pairwise sample carries two answers: `response` (answer A) and `response_b` (answer B, a
column of the data, kept in the sample's metadata). The judge is shown the question, the
reference when the sample has one, the contexts when the criterion reads them, and the two
answers as "answer 1" and "answer 2". What it is asked (`ask`):

- ``"each"`` (the default): what each answer gives, in a few words, then a verdict on each
  answer on its own, in the one request: ``{"answer_1_gives": "...", "answer_2_gives":
  "...", "answer_1": "right" | "wrong", "answer_2": "right" | "wrong"}``; a reading's winner
  is the answer written right when the other is written wrong (else a tie), and it keeps
  each answer's probability of being right (``right_a``, ``right_b``);
- ``"which"``: which answer is better, ``{"better": "1" | "2" | "tie"}``.

Position bias: each pair is asked twice, A as answer 1 (the ``a_first`` reading) and B as
answer 1 (``b_first``); two readings whose verdicts, mapped back to A and B, differ make the
pair a *flip* (the verdict followed the order, or changed between a win and a tie, rather than
following the answers). The winner (:func:`combine`) is by default
(``winner_from="probabilities"``) read from the judge's log-probabilities: with
``ask="each"`` the answer more probably right where it was shown first (both are then read in
the same position: the first verdict of each reply, written after what each answer gives and
before the verdict on the other answer), a tie when the two probabilities are closer than
``tie_margin`` (default :data:`TIE_MARGIN`; a run recorded before it existed keeps 0), with
``ask="which"``
the option (a, b or tie) most probable on average over the two orders; with
``winner_from="verdicts"`` two readings that agree give the winner and two that differ a tie.

The defaults were chosen on EVOUNA-NQ tune-split pairs (one answer people accepted, one they
rejected) with Qwen2.5-Coder-1.5B, a judge that leans hard to a position (benchmarks/
RESULTS.md, docs/pairwise.md). The cell's value is the winner read as B's score: 1 when B
wins, 0.5 on a tie, 0 when A wins, so the mean over pairs is B's win rate over A with ties
counted half. Each reading keeps the probabilities read from the judge's log-probabilities
(when the endpoint gives them).

The criterion is a setting: ``correctness`` (the default; against the reference when there is
one), ``completeness``, ``faithfulness`` (to the retrieved contexts, which it requires) or the
user's own words, ``rubric="..."``.
Judge requests: 2 (more only for re-asks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

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

if TYPE_CHECKING:
    from rageval.judge import ReplyScoring

Criterion = Literal["correctness", "completeness", "faithfulness", "rubric"]
Winner = Literal["a", "b", "tie"]
WinnerFrom = Literal["verdicts", "probabilities"]
Ask = Literal["each", "which"]
#: how a pair's winner is read when nothing says otherwise
DEFAULT_WINNER_FROM: WinnerFrom = "probabilities"
#: what each request asks when nothing says otherwise: a verdict on each answer
DEFAULT_ASK: Ask = "each"
#: ask="each", winner from probabilities: P(A right | A first) and P(B right | B first) closer
#: than this are a tie. Chosen on EVOUNA-NQ tune pairs with Qwen2.5-Coder-1.5B (16 where people
#: accepted one answer, 16 where they accepted or rejected both): of 0 (ties only when equal),
#: "both on the same side of 0.5", 0.05, 0.1 and 0.2, the best mean agreement with people's
#: verdict (a, b or tie); with 0 none of the 16 tie pairs was a tie
TIE_MARGIN = 0.2
#: two probabilities (or sums of them) this close are equal, a tie whatever the margin: float
#: rounding leaves 0.1 + 0.2 and 0.3 apart
_EQUAL = 1e-9

#: the sample's metadata key holding answer B
RESPONSE_B = "response_b"

#: what each criterion asks the judge (ask="which")
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

#: ask="each": first what each answer gives, in a few words (a long answer's point pulled
#: out of its hedging and background, where a small judge finds it next to a short one's)
WRITE_DOWN = (
    "First write down, in a few words each, what answer 1 and answer 2 give as their answer "
    'to the question (the name, date, number or fact itself; "none" when an answer gives '
    "none)."
)
#: then what makes an answer right under each criterion; correctness with a reference is
#: "correctness", without one "correctness-alone"
RIGHT_WHEN: dict[str, str] = {
    "correctness": (
        "Then judge each of these on its own against the reference: it is right when it gives "
        "what the reference answer gives (any one of the alternatives, in any words, with or "
        "without more detail), and wrong when it gives something else, gives no answer, or "
        "only says it cannot answer."
    ),
    "correctness-alone": (
        "Then judge each of these on its own: it is right when it answers the question "
        "correctly, and wrong when it gives a wrong answer, gives no answer, or only says it "
        "cannot answer."
    ),
    "completeness": (
        "Then judge each answer on its own: it is right when it covers everything the "
        "question asks (and, when a reference answer is given, what the reference says) "
        "without a wrong claim, and wrong when it leaves part of that out or says something "
        "wrong."
    ),
    "faithfulness": (
        "Then judge each answer on its own against the contexts: it is right when the "
        "contexts support every claim it makes, and wrong when it makes a claim the contexts "
        "do not support."
    ),
    "rubric": (
        "Then judge each answer on its own by the rubric below: it is right when it meets the "
        "rubric, and wrong when it does not."
    ),
}
#: said after every per-answer task: the judge is not to reward words for their number
LENGTH_IS_NO_MERIT = (
    "Length is no merit: a short answer that gives the right answer is as good as a long one, "
    "and extra words, hedging or background do not make a wrong answer better."
)
_EACH_REPLY = (
    'Reply as {"answer_1_gives": "...", "answer_2_gives": "...", "answer_1": "right" or '
    '"wrong", "answer_2": "right" or "wrong"}.'
)


class PairVerdict(ReplyModel):
    better: Literal["1", "2", "tie"] = Field(description="the better answer, or tie")


class EachVerdict(ReplyModel):
    answer_1_gives: str = Field(description="what answer 1 gives as its answer, in a few words")
    answer_2_gives: str = Field(description="what answer 2 gives as its answer, in a few words")
    answer_1: Literal["right", "wrong"] = Field(description="answer 1, judged on its own")
    answer_2: Literal["right", "wrong"] = Field(description="answer 2, judged on its own")


def response_b(sample: Sample) -> str | None:
    """Answer B of a pairwise sample (None when it has none, or not as text)."""
    value = sample.metadata.get(RESPONSE_B)
    return value if isinstance(value, str) else None


def task_text(
    criterion: str, *, ask: Ask, rubric: str | None = None, reference: bool = True
) -> tuple[str, str]:
    """(the task, how to reply) of a request under `criterion`, asking `ask`."""
    if ask == "which":
        return (rubric if criterion == "rubric" and rubric else CRITERIA[criterion]), _REPLY
    key = "correctness-alone" if criterion == "correctness" and not reference else criterion
    task = f"{WRITE_DOWN} {RIGHT_WHEN[key]} {LENGTH_IS_NO_MERIT}"
    if criterion == "rubric" and rubric:
        task += f"\nRubric: {rubric}"
    return task, _EACH_REPLY


def prompt(
    sample: Sample,
    first: str,
    second: str,
    *,
    criterion: str,
    rubric: str | None = None,
    ask: Ask = DEFAULT_ASK,
) -> list[dict[str, str]]:
    """The messages asking about `first` (answer 1) and `second` (answer 2): a verdict on
    each (``ask="each"``) or which is better (``"which"``)."""
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
    task, reply = task_text(criterion, ask=ask, rubric=rubric, reference=bool(reference.strip()))
    return data_first_messages("\n".join(blocks), task, reply)


def read_back(better: str, *, b_first: bool) -> Winner:
    """A verdict on answers 1 and 2 as a verdict on A and B."""
    if better == "tie":
        return "tie"
    first_won = better == "1"
    return "b" if first_won == b_first else "a"


def which_reading(scoring: ReplyScoring, better: str, *, b_first: bool) -> PairwiseReading:
    """One order's reading of a reply saying which answer is better (ask="which")."""
    p = scoring.choice("better").probabilities
    first, second = p.get("1", 0.0), p.get("2", 0.0)
    return PairwiseReading(
        winner=read_back(better, b_first=b_first),
        p_a=second if b_first else first,
        p_b=first if b_first else second,
        p_tie=p.get("tie", 0.0),
    )


def each_reading(scoring: ReplyScoring, verdict: EachVerdict, *, b_first: bool) -> PairwiseReading:
    """One order's reading of a reply with a verdict on each answer (ask="each"): the winner
    is the answer written right when the other is written wrong (else a tie); `right_a` and
    `right_b` are the answers' probabilities of being right, and P(a), P(b), P(tie) what they
    give, taken as independent, for one right and the other wrong, and for both alike."""
    r1 = scoring.probability("answer_1", option="right")
    r2 = scoring.probability("answer_2", option="right")
    ra, rb = (r2, r1) if b_first else (r1, r2)
    first_right, second_right = verdict.answer_1 == "right", verdict.answer_2 == "right"
    better = "tie" if first_right == second_right else ("1" if first_right else "2")
    p_a, p_b = ra * (1 - rb), rb * (1 - ra)
    return PairwiseReading(
        winner=read_back(better, b_first=b_first),
        p_a=p_a,
        p_b=p_b,
        p_tie=1 - p_a - p_b,
        right_a=ra,
        right_b=rb,
    )


def combine(
    a_first: PairwiseReading,
    b_first: PairwiseReading,
    *,
    by: WinnerFrom = "verdicts",
    tie_margin: float = TIE_MARGIN,
) -> tuple[Winner, bool]:
    """The winner of both orders' readings, and whether their verdicts differ (a flip).

    ``by="verdicts"``: agreeing verdicts give their winner, differing ones a tie.
    ``by="probabilities"``: with a verdict on each answer (readings with ``right_a`` and
    ``right_b``), the answer more probably right where it was shown first: P(A right) of the
    A-first reading against P(B right) of the B-first one, a tie when they are closer than
    `tie_margin` (the judge holds the two about as likely right). Both are the first
    verdict of their reply, read in the same position: each written after the judge wrote
    what both answers give and before its verdict on the other answer, so what it gives a
    position is the same for both; the second verdict of a reply is written after the first
    and leans on it (it is kept in the readings, not counted). Otherwise the option (a, b or
    tie) most probable on average over the two orders, a tie when the best two are equal.
    Without log-probabilities each reading's written verdict has probability 1, and the two
    rules agree when the judge writes the same verdict on an answer in either position."""
    flip = a_first.winner != b_first.winner
    if by == "verdicts":
        return (a_first.winner, False) if not flip else ("tie", True)
    if a_first.right_a is not None and b_first.right_b is not None:
        lead = a_first.right_a - b_first.right_b
        tie = abs(lead) < tie_margin or abs(lead) <= _EQUAL
        return ("tie" if tie else "a" if lead > 0 else "b"), flip
    mean = {
        "a": a_first.p_a + b_first.p_a,
        "b": a_first.p_b + b_first.p_b,
        "tie": a_first.p_tie + b_first.p_tie,
    }
    ranked = sorted(mean, key=lambda k: -mean[k])
    level = abs(mean[ranked[0]] - mean[ranked[1]]) <= _EQUAL
    best: Winner = "tie" if level else ranked[0]  # type: ignore[assignment]
    return best, flip


#: the winner as B's score: the mean over pairs is B's win rate, ties counted half
WINNER_VALUE: dict[Winner, float] = {"a": 0.0, "tie": 0.5, "b": 1.0}


@register
class Pairwise(Metric):
    name = "pairwise"
    required_fields = ("user_input", "response")
    required_columns = (RESPONSE_B,)
    needs_llm = True
    value_range = (0.0, 1.0)
    summary = "which of two answers (response, response_b) is better, asked in both orders"
    in_default_run = False  # a pairwise sample is built for it (rageval pairwise)
    #: what a run recorded before a parameter existed used: the which-is-better request,
    #: and (before the margin) a tie only when the two probabilities were equal
    earlier_params: ClassVar[Mapping[str, Any]] = {"ask": "which", "tie_margin": 0.0}

    def __init__(
        self,
        *,
        criterion: Criterion = "correctness",
        rubric: str | None = None,
        winner_from: WinnerFrom = DEFAULT_WINNER_FROM,
        ask: Ask = DEFAULT_ASK,
        tie_margin: float = TIE_MARGIN,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        if isinstance(tie_margin, bool) or not isinstance(tie_margin, (int, float)):
            raise ValueError(f"tie_margin is a number in [0, 1), got {tie_margin!r}")
        if not 0 <= tie_margin < 1:
            raise ValueError(f"tie_margin is in [0, 1), got {tie_margin}")
        self.tie_margin = float(tie_margin)
        if winner_from not in ("verdicts", "probabilities"):
            raise ValueError(f"winner_from is verdicts or probabilities, got {winner_from!r}")
        if ask not in ("each", "which"):
            raise ValueError(f"ask is each or which, got {ask!r}")
        self.winner_from = winner_from
        self.ask = ask
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
        kw: dict[str, Any] = {"criterion": self.criterion, "rubric": self.rubric, "ask": self.ask}
        return [prompt(sample, a, b, **kw), prompt(sample, b, a, **kw)]

    def _model(self) -> type[EachVerdict] | type[PairVerdict]:
        return EachVerdict if self.ask == "each" else PairVerdict

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        tokens = 64 if self.ask == "each" else 8  # "each": what each answer gives, in words
        return [PlannedRequest(m, self._model(), reply_tokens=tokens) for m in self._orders(sample)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        model = self._model()
        replies = await asyncio.gather(*(ctx.ask_scored(m, model) for m in self._orders(sample)))
        readings = []
        for reply, b_first in zip(replies, (False, True), strict=True):
            value = reply.value
            if isinstance(value, EachVerdict):
                readings.append(each_reading(reply.scoring, value, b_first=b_first))
            else:
                assert isinstance(value, PairVerdict)
                readings.append(which_reading(reply.scoring, value.better, b_first=b_first))
        winner, flip = combine(
            readings[0], readings[1], by=self.winner_from, tie_margin=self.tie_margin
        )
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
                ask=self.ask,
            )
        )


#: names this module lacks are read from its default metric
__getattr__ = forward_to_metric(__name__)
