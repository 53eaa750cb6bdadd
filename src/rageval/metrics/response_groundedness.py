"""response_groundedness: is the response backed by the retrieved contexts? Two templates rate
0/1/2 (0 not grounded, 1 partly, 2 fully).

Template 1 shows the response and asks whether each of its claims is found in the contexts;
template 2 shows the sources first and casts the judge as a fact-checker tracing a text back to
them. Each rating is divided by 2 and the valid ones averaged (one valid → that one; none → not
measured). A rating off the scale is re-asked up to `max_retries` times per template. A blank
response, or no non-blank context (blank contexts are left out, as by every metric), scores 0
without a request. Where the judge scores by probabilities each template counts its expected
rating (`value="expected"`, the default; `"pass_probability"`: docs/judge-probabilities.md).
Judge requests: 2 (more only for re-asks).

``mode="checker"`` checks the response's own sentences one by one instead, each request a
short yes/no answer read as the probability that the contexts support the sentence; the score
is the mean probability (:mod:`rageval.metrics.claim_checks`; `checker` sends the checks to
another endpoint and model). Judge requests in that mode: one per sentence (sentences x
contexts with ``per_context=True``); it reads no ratings, so it refuses another `value`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.metrics.authoring import (
    PlannedRequest,
    RatingMetric,
    RatingValue,
    contexts_block,
    nonblank,
    rating_prompts,
    tagged,
    zero_if_blank,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.claim_checks import ClaimCheckMetric
from rageval.samples import Sample

SCALE = (0, 1, 2)


def prompts(response: str, contexts: Sequence[str]) -> list[list[dict[str, str]]]:
    return rating_prompts(
        SCALE,
        "Is every claim in the response stated in, or directly inferable from, the contexts? "
        "Rate 2 if all of its claims are, 1 if only some are, 0 if none are or it contradicts "
        "the contexts.",
        "You are fact-checking the response against its sources, the contexts. Trace each "
        "piece of information in the response back to the contexts; outside knowledge does not "
        "count. Rate 2 if everything can be traced, 1 if part can, 0 if nothing can.",
        data=f"{contexts_block(contexts)}\n{tagged('response', response)}",
    )


@register
class ResponseGroundedness(ClaimCheckMetric, RatingMetric):
    name = "response_groundedness"
    required_fields = ("response", "retrieved_contexts")
    scale = SCALE
    #: "ratings": two templates rate the whole response; "checker": claim checks
    modes = ("ratings", "checker")
    summary = "how far the response is backed by the retrieved contexts, two templates rating 0/1/2"
    blank_rules = (
        zero_if_blank("response", "the response is empty"),
        zero_if_blank("retrieved_contexts", "no context was retrieved"),
    )

    def __init__(self, *, value: RatingValue | None = None, **kw: Any) -> None:
        """`value` reads the ratings of mode "ratings"; mode "checker" reads none (its score is
        the mean probability of its checks), so another `value` there is refused."""
        super().__init__(value=value, **kw)
        if self.checking and self.value != self.default_value:
            raise ValueError(
                f"value={self.value!r} reads ratings, which mode='checker' does not ask for "
                "(its score is the mean probability of its checks): leave value out, or use "
                "mode='ratings'"
            )

    def templates(self, sample: Sample) -> list[list[dict[str, str]]]:
        return prompts(sample.text("response"), nonblank(sample.retrieved_contexts))

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        if self.checking:
            return self.planned_checks(sample)
        return super().planned_requests(sample)

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        if self.checking:
            return await self.check(sample, ctx)
        return await super().measure(sample, ctx)


#: names this module lacks are read from its default metric: ``response_groundedness.score(...)``
__getattr__ = forward_to_metric(__name__)
