"""topic_adherence: whether the assistant answers the questions on its reference topics and
declines the others (judge; ragas' TopicAdherenceScore).

Each user message with an assistant reply is a question. Two verdicts per question, each
asked for every question of the conversation in one request: whether it is about one of the
conversation's `reference_topics` (on topic, the judge reading the conversation for context)
and whether the assistant refused it (the judge reading the question and what the assistant
said in reply, with the names of the tools it called); a question not refused is answered.
With TP the questions answered and on topic, FP answered and off topic, FN refused and on
topic:

    precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2·P·R / (P + R) (0 when P + R = 0)

The value is the one `mode` names (``"f1"``, the default, ``"precision"`` or ``"recall"``);
all three are in the evidence, with each question's verdicts and reasons. An empty
denominator is vacuously 1 (ragas' ε makes it 0): an assistant that answered nothing answered
nothing off topic (precision 1), and one asked nothing on topic missed nothing (recall 1), so a
conversation whose off-topic questions were all refused scores 1. A conversation without a
question with a reply, or blank reference topics, is not measured.
Where the judge scores by probabilities (docs/judge-probabilities.md), the counts are expected
counts: with t = P(on topic) and a = 1 − P(refused) of each question (its two verdicts, from
two requests, taken as independent), TP = Σ t·a, FP = Σ (1−t)·a, FN = Σ t·(1−a), and precision,
recall and F1 are computed from them as above (so precision is the mean of t weighted by a;
the same numbers as before for verdicts of 0 and 1). The verdict tables hold each
question's probabilities (answered: 1 − P(refused)).
Judge requests: 2 (the topic verdicts, the answered verdicts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rageval.metrics.authoring import (
    PlannedRequest,
    VerdictQuestion,
    judged_items,
    nonblank,
    verdict_prompt,
)
from rageval.metrics.base import (
    BlankRule,
    MetricResult,
    ScoringContext,
    forward_to_metric,
    not_measured_if_blank,
    register,
)
from rageval.metrics.conversation_judges import ConversationJudgeMetric, Exchange, exchanges
from rageval.metrics.evidence import JudgedItem, TopicEvidence, VerdictTable
from rageval.samples import Conversation, Sample, transcript

TopicAdherenceMode = Literal["precision", "recall", "f1"]
MODES: tuple[TopicAdherenceMode, ...] = ("precision", "recall", "f1")

ON_TOPIC = "true only if the message is about one of the reference topics"
REFUSED = (
    "true only if the assistant declined, refused or deflected the message instead of "
    "replying to it"
)


def on_topic_question(topics: Sequence[str], conversation: str) -> VerdictQuestion:
    """Is each user message about one of the reference topics?"""
    task = (
        "Each numbered item is a message a user sent to an AI assistant in the conversation "
        "below. For each, decide whether it is about one of the reference topics (on_topic "
        "true) or about none of them (false). Read the conversation only to understand what "
        "a short message refers to."
    )
    listed = "\n".join(f"- {' '.join(t.split())}" for t in topics)
    prompt = verdict_prompt(
        task, "user_messages", reference_topics=listed, conversation=conversation
    )
    return VerdictQuestion(prompt, prefix="q", verdict="on_topic", meaning=ON_TOPIC)


def refused_question() -> VerdictQuestion:
    """Did the assistant refuse each user message? (A question is answered when it was not
    refused: asked whether the assistant *answered*, a small real judge said no of every
    question of a conversation it had answered; asked whether it *refused*, it mostly did not
    -- benchmarks/RESULTS.md, "topic_adherence's answered verdicts".)"""
    task = (
        "Each numbered item is a message a user sent to an AI assistant, then the assistant's "
        "reply (with any tools it called). For each, decide whether the "
        "assistant refused it: declined, said it cannot or will not help, or sent the user "
        "elsewhere instead of replying (refused true). A reply that gives the help or "
        "information asked for, even partly or wrongly, is not a refusal (false)."
    )
    return VerdictQuestion(
        verdict_prompt(task, "exchanges"),
        prefix="q",
        verdict="refused",
        meaning=REFUSED,
    )


def exchange_text(exchange: Exchange) -> str:
    """A question and the assistant's replies to it, as one numbered item on one line: what
    the assistant said and the names of the tools it called. What a tool returned is left out:
    whether the assistant answered is in what it said to the user, and a small real judge
    misread every item of a request when one of them held a tool's output over several lines
    (benchmarks/RESULTS.md, "topic_adherence's answered verdicts")."""
    said: list[str] = []
    for turn in exchange.replies:
        if turn.role == "assistant":
            said += [f"[calls {call.name}]" for call in turn.tool_calls or ()]
            said += [turn.content] if turn.content else []
    return " ".join(f"user: {exchange.asked} || assistant: {' '.join(said)}".split())


@dataclass(frozen=True)
class TopicAdherenceScores:
    """The counts of :func:`topic_adherence_scores` (expected counts where the verdicts are
    probabilities) and the three scores."""

    answered_on_topic: float
    answered_off_topic: float
    refused_on_topic: float
    refused_off_topic: float

    @property
    def precision(self) -> float:
        """TP / (TP + FP); 1 when nothing was answered."""
        answered = self.answered_on_topic + self.answered_off_topic
        return self.answered_on_topic / answered if answered else 1.0

    @property
    def recall(self) -> float:
        """TP / (TP + FN); 1 when no question was on topic."""
        on_topic = self.answered_on_topic + self.refused_on_topic
        return self.answered_on_topic / on_topic if on_topic else 1.0

    @property
    def f1(self) -> float:
        """The harmonic mean of precision and recall; 0 when both are 0."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def topic_adherence_scores(
    on_topic: Sequence[float], answered: Sequence[float]
) -> TopicAdherenceScores:
    """The four counts over the questions' (on topic, answered) verdicts: booleans, or each
    verdict's probability of being true (then expected counts, the two verdicts of a question
    taken as independent)."""
    pairs = [(float(t), float(a)) for t, a in zip(on_topic, answered, strict=True)]
    return TopicAdherenceScores(
        answered_on_topic=sum(t * a for t, a in pairs),
        answered_off_topic=sum((1 - t) * a for t, a in pairs),
        refused_on_topic=sum(t * (1 - a) for t, a in pairs),
        refused_off_topic=sum((1 - t) * (1 - a) for t, a in pairs),
    )


@register
class TopicAdherence(ConversationJudgeMetric):
    """F1 (or precision, or recall: `mode`) of the assistant answering the questions that are
    on its reference topics."""

    name = "topic_adherence"
    required_fields = ("turns", "reference_topics")
    summary = (
        "F1 of the assistant answering the user's questions on its reference topics and "
        "refusing the others, judged"
    )
    blank_rules: ClassVar[tuple[BlankRule, ...]] = (
        not_measured_if_blank("reference_topics", "no reference topic: nothing to adhere to"),
    )

    def __init__(self, *, mode: TopicAdherenceMode = "f1", **kw: Any) -> None:
        super().__init__(**kw)
        if mode not in MODES:
            raise ValueError(f"mode is one of {', '.join(map(repr, MODES))}, got {mode!r}")
        self.mode = mode

    def questions(self, sample: Sample) -> tuple[Conversation, list[Exchange]]:
        """The conversation and its questions: the user messages an assistant turn replies to."""
        conversation = self.conversation(sample)
        return conversation, [e for e in exchanges(conversation) if e.answered_by_assistant]

    def verdict_questions(
        self, conversation: Conversation
    ) -> tuple[VerdictQuestion, VerdictQuestion]:
        topics = nonblank(conversation.reference_topics)
        return on_topic_question(topics, transcript(conversation.turns)), refused_question()

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        conversation, questions = self.questions(sample)
        if not questions:
            return []
        on_topic, refused = self.verdict_questions(conversation)
        return on_topic.plan([q.asked for q in questions]) + refused.plan(
            [exchange_text(q) for q in questions]
        )

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        conversation, questions = self.questions(sample)
        if not questions:
            return MetricResult.not_measured(
                "no user message has an assistant reply: no question to judge"
            )
        on_topic, refused = self.verdict_questions(conversation)
        (topic_verdicts, _), (refusal_verdicts, _) = await asyncio.gather(
            on_topic.ask(ctx, [q.asked for q in questions]),
            refused.ask(ctx, [exchange_text(q) for q in questions]),
        )
        scores = topic_adherence_scores(
            [v.weight for v in topic_verdicts], [1 - v.weight for v in refusal_verdicts]
        )
        value = getattr(scores, self.mode)
        answered = [
            JudgedItem(
                id=t.id,
                text=t.text,
                verdict=not r.verdict,
                reason=r.reason or None,
                probability=None if r.probability is None else 1 - r.probability,
            )
            for t, r in zip(topic_verdicts, refusal_verdicts, strict=True)
        ]
        evidence = TopicEvidence(
            mode=self.mode,
            precision=scores.precision,
            recall=scores.recall,
            f1=scores.f1,
            turns=[q.index for q in questions],
            on_topic=VerdictTable(
                items="questions",
                means="on the reference topics",
                verdicts=judged_items(topic_verdicts),
            ),
            answered=VerdictTable(items="questions", means="answered", verdicts=answered),
        )
        reason = (
            f"{scores.answered_on_topic:.3g} on-topic question(s) answered, "
            f"{scores.answered_off_topic:.3g} off-topic answered, {scores.refused_on_topic:.3g} "
            f"on-topic refused, {scores.refused_off_topic:.3g} off-topic refused"
        )
        if any(v.probability is not None for v in [*topic_verdicts, *refusal_verdicts]):
            reason += " (expected counts)"
        return MetricResult.ok(value, reason=reason).with_evidence(evidence)


#: names this module lacks are read from its default metric: ``topic_adherence.score(...)``
__getattr__ = forward_to_metric(__name__)
