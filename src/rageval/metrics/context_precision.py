"""context_precision: are the useful contexts ranked first?

One judge request sees every retrieved context, numbered in rank order, and gives a verdict per
context id: useful for arriving at the reference answer (v_k = 1) or not (v_k = 0). The score is
the average precision over the ranks:

    AP = Σ_k precision@k · v_k / Σ_k v_k,    precision@k = (v_1 + … + v_k) / k

so [1,0,0] → 1, [0,0,1] → 1/3, [1,0,1] → (1 + 2/3)/2. No useful context → 0.
An empty retrieval (no context, or only blank ones) has no useful context either → 0 without
a request. A blank reference gives nothing to judge usefulness against → not measured.
Judge requests: 1 (ragas makes one per context).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from rageval.metrics._prompting import check_ids, messages, numbered, tagged
from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.samples import Sample


class ContextVerdict(BaseModel):
    id: int
    reason: str = Field(description="one short sentence")
    useful: bool = Field(description="true if it gives information used in the reference answer")


class ContextVerdicts(BaseModel):
    verdicts: list[ContextVerdict]


def prompt(question: str, reference: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    return messages(
        "For each numbered context, decide whether it was useful for arriving at the reference "
        "answer to the question: it gives information the reference answer relies on. A context "
        "that is merely on topic is not useful.\n\n"
        f"{tagged('question', question)}\n{tagged('reference', reference)}\n"
        f"{tagged('contexts', numbered(contexts))}\n\n"
        'Reply as {"verdicts": [{"id": 1, "reason": "...", "useful": true}, ...]} with one '
        "entry per context id."
    )


def average_precision(verdicts: Sequence[bool]) -> float:
    """Mean of precision@k over the ranks k that hold a useful context; 0 when none does."""
    hits = 0
    total = 0.0
    for k, useful in enumerate(verdicts, start=1):
        if useful:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def _verdict_items(reply: ContextVerdicts) -> list[ContextVerdict]:
    return reply.verdicts


@register
class ContextPrecision(Metric):
    name = "context_precision"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts", "reference")
    needs_llm = True
    summary = (
        "average precision of the useful contexts in rank order (useful = leads to the reference)"
    )

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        contexts = sample.retrieved_contexts or []
        reference = sample.text("reference")
        if not reference.strip():
            return MetricResult.not_measured(
                "the reference is empty: nothing to judge usefulness by"
            )
        if not any(c.strip() for c in contexts):
            return MetricResult.ok(0.0, reason="no context was retrieved", contexts=[])
        reply = await ctx.ask(
            prompt(sample.text("user_input"), reference, contexts),
            ContextVerdicts,
            check=check_ids(len(contexts), _verdict_items, "context"),
        )
        by_id = {v.id: v for v in reply.verdicts}
        verdicts = [by_id[k].useful for k in range(1, len(contexts) + 1)]
        useful_ranks = [k for k, v in enumerate(verdicts, start=1) if v]
        return MetricResult.ok(
            average_precision(verdicts),
            reason=(
                f"useful contexts at ranks {useful_ranks} of {len(contexts)}"
                if useful_ranks
                else f"none of the {len(contexts)} contexts is useful for the reference"
            ),
            contexts=[
                {"rank": k, "useful": by_id[k].useful, "reason": by_id[k].reason}
                for k in range(1, len(contexts) + 1)
            ],
        )
