"""context_precision: are the useful contexts ranked first?

One judge request sees every (non-blank) retrieved context, numbered in rank order ``[c1] …``,
and gives a verdict per context id: useful for arriving at the reference answer (v_k = 1) or
not (v_k = 0). The score is the average precision over the ranks:

    AP = Σ_k precision@k · v_k / Σ_k v_k,    precision@k = (v_1 + … + v_k) / k

so [1,0,0] → 1, [0,0,1] → 1/3, [1,0,1] → (1 + 2/3)/2. No useful context → 0.
Blank contexts hold nothing: like every metric, this one leaves them out (they take no rank).
An empty retrieval (no non-blank context) has no useful context either → 0 without a request.
A blank reference gives nothing to judge usefulness against → not measured.
Judge requests: 1 (ragas makes one per context).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rageval.metrics.authoring import (
    PlannedRequest,
    VerdictMetric,
    VerdictQuestion,
    nonblank,
    not_measured_if_blank,
    reference_text,
    verdict_prompt,
)
from rageval.metrics.base import (
    BlankRule,
    MetricResult,
    ScoringContext,
    forward_to_metric,
    register,
)
from rageval.metrics.evidence import JudgedItem, VerdictEvidence
from rageval.samples import Sample

#: what a context's true verdict says (its evidence)
USEFUL_MEANS = "useful for arriving at the reference answer"
USEFUL = "true if it gives information the reference answer relies on"
TASK = (
    "For each numbered context, decide whether it was useful for arriving at the reference "
    "answer to the question: it gives information the reference answer relies on. A context "
    "that is merely on topic is not useful."
)


def prompt(question: str, reference: str) -> Callable[[str], str]:
    """The verdict request's text: the numbered contexts (the items ruled on, first as in
    every request that shows them), the question and the reference, then the task."""
    return verdict_prompt(
        TASK, "contexts", items_first=True, question=question, reference=reference
    )


def average_precision(verdicts: Sequence[float]) -> float:
    """Mean of precision@k over the ranks k that hold a useful context; 0 when none does.
    A verdict may be a probability of being useful (the judge scored by probabilities): then
    sum_k precision@k * v_k / sum_k v_k, with precision@k = sum_{i<=k} v_i / k, which is the
    same number for verdicts of 0 and 1."""
    hits = 0.0
    total = 0.0
    for k, useful in enumerate(verdicts, start=1):
        if useful:
            hits += useful
            total += useful * hits / k
    return total / hits if hits else 0.0


@register
class ContextPrecision(VerdictMetric):
    name = "context_precision"
    required_fields = ("user_input", "retrieved_contexts", "reference")
    summary = (
        "average precision of the useful contexts in rank order (useful = leads to the reference)"
    )
    verdict_items = "contexts"
    verdict_means = USEFUL_MEANS
    blank_rules = (
        not_measured_if_blank(
            "reference", "the reference is empty: nothing to judge usefulness by"
        ),
        BlankRule(
            "retrieved_contexts",
            "no context was retrieved",
            0.0,
            VerdictEvidence(items="contexts", means=USEFUL_MEANS, verdicts=[]),
        ),
    )

    def question(self, sample: Sample) -> VerdictQuestion:
        """Is each context useful for reaching the reference?"""
        prompt_text = prompt(sample.text("user_input"), reference_text(sample))
        return VerdictQuestion(prompt_text, "c", "useful", USEFUL, reasons=self.reasons)

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        return self.question(sample).plan(nonblank(sample.retrieved_contexts))

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        contexts = nonblank(sample.retrieved_contexts)
        verdicts, _ = await self.question(sample).ask(ctx, contexts)
        useful_ranks = [k for k, v in enumerate(verdicts, start=1) if v.verdict]
        return MetricResult.ok(
            average_precision([v.weight for v in verdicts]),
            reason=(
                f"useful contexts at ranks {useful_ranks} of {len(contexts)}"
                if useful_ranks
                else f"none of the {len(contexts)} contexts is useful for the reference"
            ),
        ).with_evidence(
            self.verdict_table(
                [
                    JudgedItem(
                        id=v.id,
                        text=v.text,
                        verdict=v.verdict,
                        reason=v.reason or None,
                        rank=k,
                        probability=v.probability,
                    )
                    for k, v in enumerate(verdicts, start=1)
                ]
            )
        )


#: names this module lacks are read from its default metric: ``context_precision.score(...)``
__getattr__ = forward_to_metric(__name__)
