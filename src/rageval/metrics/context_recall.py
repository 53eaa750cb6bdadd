"""context_recall: the share of the reference's sentences that the retrieved contexts support.

The published method: the reference is split into sentences — here by our own deterministic
splitter (:func:`rageval.metrics.authoring.split_sentences`), so each sentence has an id
``[r1] …`` the reply's schema can require — and one judge request classifies each sentence as
attributable to the contexts (stated in them or directly implied) or not.

    score = attributed sentences / total sentences

A blank reference has nothing to look for → not measured. With no non-blank context nothing
can be attributed → 0 without a request.
Judge requests: 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rageval.metrics.authoring import (
    PlannedRequest,
    VerdictMetric,
    VerdictQuestion,
    nonblank,
    not_measured_if_blank,
    share_true,
    split_sentences,
    unjudged,
    verdict_prompt,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.samples import Sample

ATTRIBUTED = "true if the contexts state it or it follows directly from them"
TASK = (
    "The numbered sentences come from a reference answer to the question. For each one, decide "
    "whether it can be attributed to the retrieved contexts: they state it or it follows "
    "directly from them. Background knowledge does not count."
)


def prompt(question: str, contexts: Sequence[str]) -> Callable[[str], str]:
    """The verdict request's text: the contexts, the question, the numbered reference
    sentences, then the task."""
    return verdict_prompt(TASK, "sentences", contexts_first=contexts, question=question)


#: the score from the verdicts: attributed / total; None when the reference has no sentence
context_recall_score = share_true


@register
class ContextRecall(VerdictMetric):
    name = "context_recall"
    required_fields = ("user_input", "retrieved_contexts", "reference")
    summary = "share of the reference's sentences supported by the retrieved contexts"
    verdict_items = "reference sentences"
    verdict_means = "attributed to the retrieved contexts"
    blank_rules = (
        not_measured_if_blank("reference", "the reference is empty: nothing to look for"),
    )

    def question(self, sample: Sample, contexts: list[str]) -> VerdictQuestion:
        """Can each sentence of the reference be attributed to the contexts?"""
        prompt_text = prompt(sample.text("user_input"), contexts)
        return VerdictQuestion(prompt_text, "r", "attributed", ATTRIBUTED, reasons=self.reasons)

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        contexts = nonblank(sample.retrieved_contexts)
        if not contexts:
            return []
        return self.question(sample, contexts).plan(split_sentences(sample.text("reference")))

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        sentences = split_sentences(sample.text("reference"))
        contexts = nonblank(sample.retrieved_contexts)
        if contexts:
            verdicts, _ = await self.question(sample, contexts).ask(ctx, sentences)
            found = sum(v.verdict for v in verdicts)
            reason = f"{found} of {len(sentences)} reference sentences are found in the contexts"
        else:
            verdicts, reason = unjudged(sentences, "r"), "no context was retrieved"
        return self.share_result(verdicts, reason)


#: names this module lacks are read from its default metric: ``context_recall.score(...)``
__getattr__ = forward_to_metric(__name__)
