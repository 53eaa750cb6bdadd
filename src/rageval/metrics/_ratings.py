"""Two-template ratings on a fixed scale (answer_accuracy, context_relevance,
response_groundedness): each template is asked independently for a rating whose schema is an
enum of exactly the scale's values (a reply off the scale is re-asked by the judge layer, up to
`max_retries`), and the valid ratings are normalised and averaged."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from rageval.errors import CauseKind
from rageval.judge import JudgeCallFailed
from rageval.metrics.authoring import rating_model
from rageval.metrics.base import Metric, MetricResult, ScoringContext


def two_template_score(ratings: Sequence[int | None], scale_max: int) -> float | None:
    """Mean of the valid ratings, each divided by `scale_max`; None when none is valid.

    A missing rating is left out, never counted as 0 and never allowed to poison the mean."""
    valid = [r / scale_max for r in ratings if r is not None]
    return sum(valid) / len(valid) if valid else None


async def rate_with_templates(
    ctx: ScoringContext,
    prompts: Sequence[list[dict[str, str]]],
    scale: tuple[int, ...],
    max_retries: int,
) -> MetricResult:
    """Ask every template concurrently and combine the valid ratings."""
    model = rating_model(scale)

    async def one(msgs: list[dict[str, str]]) -> int | JudgeCallFailed:
        try:
            reply = await ctx.ask(msgs, model, max_reasks=max_retries)
        except JudgeCallFailed as e:
            return e
        rating: int = reply.rating  # type: ignore[attr-defined]
        return rating

    outcomes = await asyncio.gather(*(one(p) for p in prompts))
    ratings = [o if isinstance(o, int) else None for o in outcomes]
    evidence: dict[str, Any] = {
        "ratings": {f"template_{i}": r for i, r in enumerate(ratings, start=1)},
        "scale": list(scale),
    }
    failed = {
        f"template_{i}": o for i, o in enumerate(outcomes, start=1) if isinstance(o, Exception)
    }
    if failed:
        evidence["failures"] = {k: e.cause for k, e in failed.items()}
    value = two_template_score(ratings, max(scale))
    if value is None:
        causes = "; ".join(f"{k}: {e.cause}" for k, e in failed.items())
        # the kind of the first template's failure (both failed; usually for the same reason)
        kind: CauseKind = next(iter(failed.values())).kind
        return MetricResult.not_measured(
            f"no template gave a valid rating ({causes})", cause_kind=kind, **evidence
        )
    valid = [r for r in ratings if r is not None]
    reason = (
        f"ratings {', '.join(str(r) for r in valid)} on the scale {'/'.join(map(str, scale))}"
        + (" (one template gave no valid rating)" if len(valid) < len(ratings) else "")
    )
    return MetricResult.ok(value, reason=reason, **evidence)


class RatingMetric(Metric):
    """Base of the two-template rating metrics: the scale and the per-template re-ask budget."""

    scale: ClassVar[tuple[int, ...]]

    def __init__(self, *, max_retries: int = 5, **kw: Any) -> None:
        super().__init__(**kw)
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries

    async def rate(
        self, ctx: ScoringContext, prompts: Sequence[list[dict[str, str]]]
    ) -> MetricResult:
        return await rate_with_templates(ctx, prompts, self.scale, self.max_retries)
