"""context_recall: the share of the reference's claims that the retrieved contexts contain.

The reference is split into atomic statements (extracted once per sample, shared with
answer_correctness); one judge request rules on each statement id: attributable to the contexts
(stated in them or directly implied) or not.

    score = attributed / total

A reference with no statements (blank, or no factual claim) is not measured. With no
non-blank context nothing can be attributed → 0 without the verdict request.
Judge requests: 1 for the verdicts (+ the shared statement extraction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from rageval.metrics._prompting import check_ids, messages, numbered, tagged
from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.samples import Sample


class AttributionVerdict(BaseModel):
    id: int
    reason: str = Field(description="one short sentence")
    attributed: bool = Field(description="true if the contexts state or directly imply it")


class RecallVerdicts(BaseModel):
    verdicts: list[AttributionVerdict]


def prompt(
    question: str, contexts: Sequence[str], statements: Sequence[str]
) -> list[dict[str, str]]:
    return messages(
        "The numbered statements come from a reference answer to the question. For each one, "
        "decide whether it can be attributed to the retrieved contexts: they state it or it "
        "follows directly from them. Background knowledge does not count.\n\n"
        f"{tagged('question', question)}\n{tagged('contexts', numbered(contexts))}\n"
        f"{tagged('statements', numbered(statements))}\n\n"
        'Reply as {"verdicts": [{"id": 1, "reason": "...", "attributed": true}, ...]} with one '
        "entry per statement id."
    )


def context_recall_score(attributed: Sequence[bool]) -> float | None:
    """attributed / total; None when the reference has no statement to look for."""
    return sum(attributed) / len(attributed) if attributed else None


def _verdict_items(reply: RecallVerdicts) -> list[AttributionVerdict]:
    return reply.verdicts


@register
class ContextRecall(Metric):
    name = "context_recall"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts", "reference")
    needs_llm = True
    statement_needs = frozenset({"reference"})
    summary = "share of the reference's claims found in the retrieved contexts"

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        statements = await ctx.statements.get("reference")
        if not statements:
            return MetricResult.not_measured("the reference makes no factual statement to look for")
        contexts = sample.retrieved_contexts or []
        retrieved = any(c.strip() for c in contexts)
        verdicts = [
            AttributionVerdict(id=i, reason="", attributed=False)
            for i, _ in enumerate(statements, start=1)
        ]
        # with no context to look in, every verdict is known without asking
        if retrieved:
            reply = await ctx.ask(
                prompt(sample.text("user_input"), contexts, statements),
                RecallVerdicts,
                check=check_ids(len(statements), _verdict_items, "statement"),
            )
            verdicts = sorted(reply.verdicts, key=lambda v: v.id)
        attributed = [v.attributed for v in verdicts]
        value = context_recall_score(attributed)
        assert value is not None
        return MetricResult.ok(
            value,
            reason=(
                f"{sum(attributed)} of {len(statements)} reference statements are found in the "
                "contexts"
                if retrieved
                else "no context was retrieved"
            ),
            statements=[
                {"id": v.id, "text": t, "attributed": v.attributed, "reason": v.reason or None}
                for t, v in zip(statements, verdicts, strict=True)
            ],
        )
