"""faithfulness: the share of the response's claims that the retrieved contexts support.

score = supported / total over the response's atomic statements (extracted once per sample and
shared with answer_correctness). A response with no statements is not measured; with no
non-blank context nothing can be supported, so the score is 0 without a verdict request.
Judge requests: 1 for the verdicts (+ the shared statement extraction).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from rageval.metrics._prompting import check_ids, messages, numbered, tagged
from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.samples import Sample


class StatementVerdict(BaseModel):
    id: int
    reason: str = Field(description="one short sentence")
    supported: bool = Field(description="true only if the contexts state or directly imply it")


class FaithfulnessVerdicts(BaseModel):
    verdicts: list[StatementVerdict]


def prompt(contexts: list[str], statements: list[str]) -> list[dict[str, str]]:
    return messages(
        "For each numbered statement, decide whether the contexts support it: it is stated "
        "in them or follows directly from them. Anything the contexts do not give is "
        "unsupported, even if it is true.\n\n"
        f"{tagged('contexts', numbered(contexts))}\n{tagged('statements', numbered(statements))}\n\n"
        'Reply as {"verdicts": [{"id": 1, "reason": "...", "supported": true}, ...]} with '
        "one entry per statement id."
    )


def faithfulness_score(verdicts: list[bool]) -> float | None:
    """supported / total; None when there is nothing to judge."""
    return sum(verdicts) / len(verdicts) if verdicts else None


@register
class Faithfulness(Metric):
    name = "faithfulness"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "retrieved_contexts")
    needs_llm = True
    statement_needs = frozenset({"response"})
    summary = "share of the response's claims supported by the retrieved contexts"

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        statements = await ctx.statements.get("response")
        if not statements:
            return MetricResult.not_measured("the response makes no factual statement to check")
        contexts = [c for c in sample.retrieved_contexts or [] if c.strip()]
        if not contexts:
            return MetricResult.ok(
                0.0,
                reason="no context was retrieved, so none of the statements is supported",
                statements=[
                    {"id": i, "text": t, "verdict": False} for i, t in enumerate(statements, 1)
                ],
            )
        reply = await ctx.ask(
            prompt(contexts, statements),
            FaithfulnessVerdicts,
            check=check_ids(len(statements), lambda r: r.verdicts, "statement"),
        )
        by_id = {v.id: v for v in reply.verdicts}
        verdicts = [by_id[i].supported for i in range(1, len(statements) + 1)]
        value = faithfulness_score(verdicts)
        assert value is not None
        return MetricResult.ok(
            value,
            reason=f"{sum(verdicts)} of {len(verdicts)} statements are supported by the contexts",
            statements=[
                {"id": i, "text": t, "verdict": by_id[i].supported, "reason": by_id[i].reason}
                for i, t in enumerate(statements, start=1)
            ],
        )
