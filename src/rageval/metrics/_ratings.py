"""Two-template ratings on a fixed scale (answer_accuracy, context_relevance,
response_groundedness): each template is asked independently, a rating off the scale is
re-asked (judge layer, `max_reasks`), and the valid ratings are normalised and averaged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from rageval.judge import JudgeCallFailed
from rageval.metrics.base import Metric, MetricResult, ScoringContext


class Rating(BaseModel):
    rating: float = Field(description="one of the allowed ratings")


def two_template_score(ratings: Sequence[int | None], scale_max: int) -> float | None:
    """Mean of the valid ratings, each divided by `scale_max`; None when none is valid.

    A missing rating is left out, never counted as 0 and never allowed to poison the mean."""
    valid = [r / scale_max for r in ratings if r is not None]
    return sum(valid) / len(valid) if valid else None


def _on_scale(scale: Sequence[int]) -> Callable[[Rating], None]:
    def check(reply: Rating) -> None:
        if reply.rating not in scale:
            allowed = ", ".join(str(s) for s in scale)
            raise ValueError(f"rating must be exactly one of {allowed}; got {reply.rating!r}")

    return check


async def rate_with_templates(
    ctx: ScoringContext,
    prompts: Sequence[list[dict[str, str]]],
    scale: Sequence[int],
    max_retries: int,
) -> MetricResult:
    """Ask every template concurrently and combine the valid ratings."""

    async def one(msgs: list[dict[str, str]]) -> int | str:
        try:
            reply = await ctx.ask(msgs, Rating, check=_on_scale(scale), max_reasks=max_retries)
        except JudgeCallFailed as e:
            return e.cause
        return int(reply.rating)

    outcomes = await asyncio.gather(*(one(p) for p in prompts))
    ratings = [o if isinstance(o, int) else None for o in outcomes]
    evidence: dict[str, Any] = {
        "ratings": {f"template_{i}": r for i, r in enumerate(ratings, start=1)},
        "scale": list(scale),
    }
    failures = {f"template_{i}": o for i, o in enumerate(outcomes, start=1) if isinstance(o, str)}
    if failures:
        evidence["failures"] = failures
    value = two_template_score(ratings, max(scale))
    if value is None:
        causes = "; ".join(f"{k}: {v}" for k, v in failures.items())
        return MetricResult.not_measured(f"no template gave a valid rating ({causes})", **evidence)
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

    def params(self) -> dict[str, Any]:
        return {"max_retries": self.max_retries}

    async def rate(
        self, ctx: ScoringContext, prompts: Sequence[list[dict[str, str]]]
    ) -> MetricResult:
        return await rate_with_templates(ctx, prompts, self.scale, self.max_retries)
